import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { InventoryRepository } from '../../src/modules/inventory/inventory.repository.js';
import { UPSERT_BATCH_ROWS, type ListedOffer } from '../../src/modules/inventory/offers.repository.js';

type InventoryStore = Store<{ inventory: InventoryRepository }>;

/** An offer id the way the refresh makes them: a UUID, so ids sort as on the server. */
const newId = () => randomUUID();

/** A time on the server's precision (milliseconds), near the real one: other files share the row of the version. */
const at = (offsetMs = 0) => new Date(Date.now() + offsetMs);

function listed(provider: string, o: Partial<ListedOffer> = {}): ListedOffer {
  const seenAt = o.seenAt ?? at();
  return {
    id: newId(),
    provider,
    providerOfferKey: `key-${randomUUID().slice(0, 8)}`,
    name: 'H100 SXM',
    slug: 'h100-sxm',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    cpuCores: 16,
    memoryGb: 128,
    storageGb: 500,
    pricePerHourMinor: 250,
    costPerHourMinor: 200,
    region: 'eu-west',
    currency: 'USD',
    maximumDurationSeconds: 86_400,
    seenAt,
    staleAt: new Date(seenAt.getTime() + 600_000),
    capCustomImage: false,
    capStartupScript: false,
    capPorts: 0,
    capMaxDiskGb: null,
    trafficUpCostMicro: null,
    trafficDownCostMicro: null,
    trafficUpPriceMicro: null,
    trafficDownPriceMicro: null,
    ...o,
  };
}

/** An offer as read, as a plain object (the entity class of either side compares equal). */
const plain = <T extends object>(o: T | null | undefined) => (o ? { ...o } : o);

/**
 * What every store's inventory repository does, run on MariaDB (test/store/) and on the memory
 * store (test/unit/). Each test lists offers of providers of its own: the MariaDB cache is shared
 * by the files of a worker, so reads of the whole cache are narrowed to them.
 */
export function inventoryContract(kind: string, makeStore: () => Promise<InventoryStore>): void {
  describe(`inventory repository (${kind})`, () => {
    let store: InventoryStore;
    let provider: string;
    before(async () => (store = await makeStore()));
    beforeEach(() => (provider = `c-${randomUUID().slice(0, 12)}`));

    const upsert = (offers: ListedOffer[]) => store.transaction((r) => r.inventory.offers.upsertListed(offers));
    const liveOf = async (p: string, now: Date) =>
      (await store.read((r) => r.inventory.offers.liveByPrice(now))).filter((o) => o.provider === p);
    const statesOf = async (p: string) =>
      (await store.read((r) => r.inventory.offers.statesOf(p))).sort((a, b) => (a.id < b.id ? -1 : 1));

    describe('offers', () => {
      it('lists the live offers cheapest first, then fewest GPUs, then id, leaving out stale and withdrawn ones', async () => {
        const now = at();
        const [x, y] = [newId(), newId()].sort();
        const offers = [
          listed(provider, { pricePerHourMinor: 300 }),
          listed(provider, { id: y, pricePerHourMinor: 200 }),
          listed(provider, { pricePerHourMinor: 200, gpuCount: 2 }),
          listed(provider, { id: x, pricePerHourMinor: 200 }),
          listed(provider, { pricePerHourMinor: 100, staleAt: now }),
          listed(provider, { pricePerHourMinor: 50 }),
        ];
        await upsert(offers);
        await store.transaction((r) => r.inventory.offers.withdraw([offers[5].id]));
        const live = await liveOf(provider, now);
        assert.deepEqual(
          live.map((o) => o.id),
          [x, y, offers[2].id, offers[0].id],
        );
      });

      it('reads an offer back with its types: numbers for BIGINT prices, booleans, dates and nulls', async () => {
        const o = listed(provider, {
          capCustomImage: true,
          capPorts: 5,
          capMaxDiskGb: 200,
          cpuCores: null,
          region: null,
          trafficUpCostMicro: 4560,
          trafficDownCostMicro: 0,
          trafficUpPriceMicro: 5016,
          trafficDownPriceMicro: 0,
        });
        await upsert([o]);
        const { seenAt, ...fields } = o;
        assert.deepEqual(plain(await store.read((r) => r.inventory.offers.cached(o.id))), {
          ...fields,
          available: true,
          firstSeenAt: seenAt,
          lastSeenAt: seenAt,
        });
        assert.equal(await store.read((r) => r.inventory.offers.cached(newId())), null);
      });

      it('renews a listed offer again: what a listing may change is taken, its shape, price and first sighting kept', async () => {
        const first = listed(provider, { seenAt: at(-60_000) });
        await upsert([first]);
        await store.transaction((r) => r.inventory.offers.withdraw([first.id]));
        const again = listed(provider, {
          id: first.id,
          seenAt: at(),
          name: 'H100 NVL',
          slug: 'h100-nvl',
          category: 'hpc',
          region: 'us-east',
          costPerHourMinor: 210,
          capStartupScript: true,
          capPorts: 3,
          capMaxDiskGb: 100,
          // Part of the id: a listing that changed them would be another offer. They stay.
          pricePerHourMinor: 999,
          gpuCount: 8,
          providerOfferKey: 'other',
        });
        await upsert([again]);
        const row = await store.read((r) => r.inventory.offers.cached(first.id));
        assert.ok(row);
        assert.deepEqual(
          [row.available, row.name, row.slug, row.category, row.region, row.costPerHourMinor],
          [true, 'H100 NVL', 'h100-nvl', 'hpc', 'us-east', 210],
        );
        assert.deepEqual(
          [row.capCustomImage, row.capStartupScript, row.capPorts, row.capMaxDiskGb],
          [false, true, 3, 100],
        );
        assert.deepEqual(
          [row.pricePerHourMinor, row.gpuCount, row.providerOfferKey],
          [first.pricePerHourMinor, 1, first.providerOfferKey],
        );
        assert.equal(row.firstSeenAt.getTime(), first.seenAt.getTime());
        assert.equal(row.lastSeenAt.getTime(), again.seenAt.getTime());
        assert.equal(row.staleAt.getTime(), again.staleAt.getTime());
      });

      it('answers the states of every offer of a provider, withdrawn ones too, as booleans and numbers', async () => {
        const a = listed(provider, { capCustomImage: true, capPorts: 2, capMaxDiskGb: 50 });
        const b = listed(provider, { region: null });
        await upsert([a, b, listed(`${provider}-x`)]);
        await store.transaction((r) => r.inventory.offers.withdraw([b.id]));
        const state = (o: ListedOffer, available: boolean) => ({
          id: o.id,
          available,
          slug: o.slug,
          name: o.name,
          category: o.category,
          region: o.region,
          capCustomImage: o.capCustomImage,
          capStartupScript: o.capStartupScript,
          capPorts: o.capPorts,
          capMaxDiskGb: o.capMaxDiskGb,
        });
        assert.deepEqual(
          await statesOf(provider),
          [state(a, true), state(b, false)].sort((x, y) => (x.id < y.id ? -1 : 1)),
        );
        assert.deepEqual(await statesOf(`${provider}-none`), []);
      });

      it('writes and withdraws more offers than one statement holds', async () => {
        const many = Array.from({ length: UPSERT_BATCH_ROWS + 3 }, (_, i) =>
          listed(provider, { pricePerHourMinor: 100 + i }),
        );
        await upsert(many);
        const now = at();
        assert.equal((await liveOf(provider, now)).length, many.length);
        await store.transaction((r) => r.inventory.offers.withdraw(many.map((o) => o.id)));
        assert.equal((await liveOf(provider, now)).length, 0);
        await store.transaction(async (r) => {
          await r.inventory.offers.upsertListed([]);
          await r.inventory.offers.withdraw([]);
        });
      });

      it("withdraws a provider's offers stale by now, counting them, and no one else's", async () => {
        const now = at();
        const stale = listed(provider, { staleAt: now });
        const fresh = listed(provider, { staleAt: at(60_000) });
        const other = listed(`${provider}-b`, { staleAt: at(-1000) });
        await upsert([stale, fresh, other]);
        assert.equal(await store.transaction((r) => r.inventory.offers.withdrawStale(provider, now)), 1);
        assert.equal(await store.transaction((r) => r.inventory.offers.withdrawStale(provider, now)), 0);
        assert.deepEqual(
          (await statesOf(provider)).map((s) => [s.id, s.available]),
          [
            [stale.id, false],
            [fresh.id, true],
          ].sort((x, y) => (x[0] < y[0] ? -1 : 1)),
        );
        assert.deepEqual(
          (await statesOf(`${provider}-b`)).map((s) => s.available),
          [true],
        );
      });

      it('withdraws every offer of a provider not configured, and refuses an empty list of them', async () => {
        const gone = `${provider}-gone`;
        await upsert([listed(provider), listed(gone), listed(gone, { staleAt: at(-1000) })]);
        // Every provider with offers on the list but `gone`: on a shared cache, no one else's go.
        const everyone = await store.read((r) => r.inventory.offers.liveByPrice(new Date(0)));
        const configured = [...new Set(everyone.map((o) => o.provider))].filter((p) => p !== gone);
        assert.equal(await store.transaction((r) => r.inventory.offers.withdrawNotOf(configured)), 2);
        assert.deepEqual(
          (await statesOf(gone)).map((s) => s.available),
          [false, false],
        );
        assert.deepEqual(
          (await statesOf(provider)).map((s) => s.available),
          [true],
        );
        await assert.rejects(store.transaction((r) => r.inventory.offers.withdrawNotOf([])));
      });

      it('tells whether listed offers are past their age at a moment', async () => {
        await upsert([listed(provider, { staleAt: at(60_000) })]);
        assert.equal(await store.read((r) => r.inventory.offers.listedPastAge(new Date(0))), false);
        assert.equal(await store.read((r) => r.inventory.offers.listedPastAge(at(120_000))), true);
      });

      it('finds any offer it ever held by id, withdrawn or stale too, and leaves unknown ids out', async () => {
        const a = listed(provider, { staleAt: at(-1000) });
        const b = listed(provider);
        await upsert([a, b]);
        await store.transaction((r) => r.inventory.offers.withdraw([b.id]));
        assert.equal((await store.read((r) => r.inventory.offers.cached(b.id)))?.available, false);
        const found = await store.read((r) => r.inventory.offers.byIds([b.id, newId(), a.id]));
        assert.deepEqual(found.map((o) => o.id).sort(), [a.id, b.id].sort());
        assert.deepEqual(await store.read((r) => r.inventory.offers.byIds([])), []);
      });

      it('finds the cheapest offers of a shape, live or not: model, exact count, ceiling, then id, up to the limit', async () => {
        const slug = `s-${randomUUID()}`;
        const other = `s-${randomUUID()}`;
        const [p, q] = [newId(), newId()].sort();
        await upsert([
          listed(provider, { slug, pricePerHourMinor: 300 }),
          listed(provider, { id: q, slug, pricePerHourMinor: 200, staleAt: at(-1000) }),
          listed(provider, { id: p, slug: other, pricePerHourMinor: 200 }),
          listed(provider, { slug, pricePerHourMinor: 301 }),
          listed(provider, { slug, pricePerHourMinor: 100, gpuCount: 2 }),
        ]);
        const shape = { slugs: [slug, other], gpuCount: 1, maxHourlyPriceMinor: 300 };
        const cheapest = await store.read((r) => r.inventory.offers.cheapestOfShape(shape, 10));
        assert.deepEqual(
          cheapest.map((o) => [o.slug, o.pricePerHourMinor]),
          [
            [other, 200],
            [slug, 200],
            [slug, 300],
          ],
        );
        assert.deepEqual(
          cheapest.slice(0, 2).map((o) => o.id),
          [p, q],
        );
        assert.equal((await store.read((r) => r.inventory.offers.cheapestOfShape(shape, 2))).length, 2);
        for (const none of [
          { ...shape, gpuCount: null },
          { ...shape, maxHourlyPriceMinor: null },
        ])
          assert.deepEqual(await store.read((r) => r.inventory.offers.cheapestOfShape(none, 10)), []);
      });

      it('keeps nothing a transaction wrote when it throws', async () => {
        const o = listed(provider);
        await assert.rejects(
          store.transaction(async (r) => {
            await r.inventory.offers.upsertListed([o]);
            throw new Error('the refresh failed');
          }),
          /the refresh failed/,
        );
        assert.equal(await store.read((r) => r.inventory.offers.cached(o.id)), null);
      });
    });

    describe('the version', () => {
      it('moves the version only for a change, and stamps the refresh time every time', async () => {
        const before = await store.read((r) => r.inventory.offers.stamp());
        assert.equal(typeof before.version, 'number');
        const t1 = at();
        await store.transaction(async (r) => {
          await r.inventory.offers.lockVersion();
          await r.inventory.offers.markRefreshed(t1, false);
        });
        const unchanged = await store.read((r) => r.inventory.offers.stamp());
        assert.deepEqual(unchanged, { version: before.version, refreshedAt: t1.getTime() });
        const t2 = at(1);
        await store.transaction(async (r) => {
          await r.inventory.offers.lockVersion();
          await r.inventory.offers.markRefreshed(t2, true);
        });
        assert.deepEqual(await store.read((r) => r.inventory.offers.stamp()), {
          version: before.version + 1,
          refreshedAt: t2.getTime(),
        });
      });
    });

    describe('provider status', () => {
      const statusOf = async (p: string) =>
        plain((await store.read((r) => r.inventory.providerStatus.all())).find((s) => s.providerId === p));

      it('records a first success with its count, then a failure that keeps the last success and its count', async () => {
        const t1 = at(-2000);
        const t2 = at(-1000);
        await store.transaction((r) => r.inventory.providerStatus.recordRefreshSuccess(provider, t1, 7));
        assert.deepEqual(await statusOf(provider), {
          providerId: provider,
          lastRefreshAt: t1,
          lastRefreshOk: true,
          lastSuccessAt: t1,
          offerCount: 7,
          lastErrorClass: null,
          lastErrorAt: null,
        });
        await store.transaction((r) => r.inventory.providerStatus.recordRefreshFailure(provider, t2, 'auth'));
        assert.deepEqual(await statusOf(provider), {
          providerId: provider,
          lastRefreshAt: t2,
          lastRefreshOk: false,
          lastSuccessAt: t1,
          offerCount: 7,
          lastErrorClass: 'auth',
          lastErrorAt: t2,
        });
      });

      it('starts a row on a first failure with no success and no offers; a later success keeps the last error', async () => {
        const t1 = at(-2000);
        const t2 = at(-1000);
        await store.transaction((r) => r.inventory.providerStatus.recordRefreshFailure(provider, t1, 'timeout'));
        assert.deepEqual(await statusOf(provider), {
          providerId: provider,
          lastRefreshAt: t1,
          lastRefreshOk: false,
          lastSuccessAt: null,
          offerCount: 0,
          lastErrorClass: 'timeout',
          lastErrorAt: t1,
        });
        await store.transaction((r) => r.inventory.providerStatus.recordRefreshSuccess(provider, t2, 3));
        assert.deepEqual(await statusOf(provider), {
          providerId: provider,
          lastRefreshAt: t2,
          lastRefreshOk: true,
          lastSuccessAt: t2,
          offerCount: 3,
          lastErrorClass: 'timeout',
          lastErrorAt: t1,
        });
      });

      it('records an error outside the refresh as the last error only, starting a row with no refresh', async () => {
        const t1 = at(-2000);
        const t2 = at(-1000);
        await store.read((r) => r.inventory.providerStatus.recordError(provider, 'request', t1));
        assert.deepEqual(await statusOf(provider), {
          providerId: provider,
          lastRefreshAt: null,
          lastRefreshOk: false,
          lastSuccessAt: null,
          offerCount: 0,
          lastErrorClass: 'request',
          lastErrorAt: t1,
        });
        await store.transaction((r) => r.inventory.providerStatus.recordRefreshSuccess(provider, t1, 4));
        await store.read((r) => r.inventory.providerStatus.recordError(provider, 'rate_limited', t2));
        assert.deepEqual(await statusOf(provider), {
          providerId: provider,
          lastRefreshAt: t1,
          lastRefreshOk: true,
          lastSuccessAt: t1,
          offerCount: 4,
          lastErrorClass: 'rate_limited',
          lastErrorAt: t2,
        });
        assert.equal(await statusOf(`${provider}-never`), undefined);
      });
    });
  });
}
