import assert from 'node:assert/strict';
import { ManualClock } from '../../src/clock.js';
import { AppError } from '../../src/errors/app-error.js';
import { createLogger } from '../../src/logger.js';
import { InventoryService } from '../../src/modules/inventory/inventory.service.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import { ProviderRegistry } from '../../src/providers/provider-registry.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';
import { addScriptedCloud, cloudOffer, type ScriptedCloud } from '../inventory/scripted-provider.js';

const BASE = 'https://gpus.example';
const MAX_AGE_S = 600;

/** The error `fn` throws or rejects with, which must be an AppError. */
async function refusal(fn: () => unknown): Promise<AppError> {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof AppError, String(err));
    return err;
  }
  return assert.fail('expected a refusal');
}

describe('InventoryService (memory store)', () => {
  let store: ReturnType<typeof memoryStore>;
  let clock: ManualClock;
  let registry: ProviderRegistry;
  let a: ScriptedCloud;
  let b: ScriptedCloud;
  let sut: InventoryService;

  beforeEach(() => {
    store = memoryStore();
    clock = new ManualClock(new Date('2026-05-01T00:00:00Z'));
    registry = new ProviderRegistry();
    a = addScriptedCloud(registry, 'cloud-a');
    b = addScriptedCloud(registry, 'cloud-b');
    sut = new InventoryService(store, registry, clock, createLogger('silent'), {
      publicBaseUrl: BASE,
      offerMaxAgeSeconds: MAX_AGE_S,
    });
    a.offers = [
      cloudOffer({ key: 'a-h100', pricePerHourMinor: 300 }),
      cloudOffer({ key: 'a-pcie', name: 'H100 PCIe', pricePerHourMinor: 250, cpuCores: undefined, region: 'eu' }),
      cloudOffer({ key: 'a-4090', name: 'RTX 4090', vramGb: 24, pricePerHourMinor: 60, gpuCount: 2 }),
    ];
    b.offers = [
      cloudOffer({
        key: 'b-h100',
        pricePerHourMinor: 280,
        capabilities: { customImage: true, startupScript: true, ports: 3, maxDiskGb: null },
      }),
    ];
  });

  /** Refreshes every provider and drops the served copy, as a process that ran the refresh itself. */
  async function refreshed(): Promise<void> {
    await sut.refresh();
    sut.invalidate();
  }

  const keys = (list: { id: string }[], all: { id: string; provider: string }[]) =>
    list.map((o) => all.find((x) => x.id === o.id)?.provider);

  it('serves the live offers cheapest first as the API shows them, leaving out what a provider did not say', async () => {
    await refreshed();
    const { body, etag } = await sut.listOffers().wait();
    assert.deepEqual(
      body.map((o) => [o.name, o.pricePerHourMinor, o.provider]),
      [
        ['RTX 4090', 60, 'cloud-a'],
        ['H100 PCIe', 250, 'cloud-a'],
        ['H100 SXM', 280, 'cloud-b'],
        ['H100 SXM', 300, 'cloud-a'],
      ],
    );
    const pcie = body[1];
    assert.equal('cpuCores' in pcie, false);
    assert.equal(pcie.region, 'eu');
    assert.deepEqual(body[2].capabilities, { customImage: true, startupScript: true, ports: 3, maxDiskGb: null });
    assert.match(etag, /\S/);
  });

  it('filters by GPU family or model, and lists nothing for a model not on offer', async () => {
    await refreshed();
    const names = async (gpu: string) => (await sut.listOffers(gpu).wait()).body.map((o) => o.name);
    assert.deepEqual(await names('h100'), ['H100 PCIe', 'H100 SXM', 'H100 SXM']);
    assert.deepEqual(await names('H100 SXM'), ['H100 SXM', 'H100 SXM']);
    assert.deepEqual(await names('rtx4090'), ['RTX 4090']);
    assert.deepEqual(await names('B200'), []);
  });

  it('answers one live offer by id, and NOT_FOUND for one not on offer', async () => {
    await refreshed();
    const [first] = (await sut.listOffers().wait()).body;
    assert.equal((await sut.offer(first.id).wait()).body.name, 'RTX 4090');
    const err = await refusal(() => sut.offer('00000000-0000-0000-0000-000000000000').wait());
    assert.deepEqual([err.code, err.status], ['NOT_FOUND', 404]);
    assert.match(err.message, /GET \/api\/v1\/offers/);
  });

  it('sums up each model on offer across providers, cheapest model first', async () => {
    await refreshed();
    const { body } = await sut.gpuSummary().wait();
    assert.equal(body.count, 3);
    assert.equal(body.offersUrl, `${BASE}/api/v1/offers`);
    assert.deepEqual(
      body.models.map((m) => [
        m.slug,
        m.availableOffers,
        m.availableGpus,
        m.minPricePerHourMinor,
        m.maxPricePerHourMinor,
      ]),
      [
        ['rtx-4090', 1, 2, 60, 60],
        ['h100-pcie', 1, 1, 250, 250],
        ['h100-sxm', 2, 2, 280, 300],
      ],
    );
    const sxm = body.models[2];
    assert.deepEqual(sxm.providers, ['cloud-a', 'cloud-b']);
    assert.equal(sxm.family, 'h100');
    assert.equal(sxm.url, `${BASE}/api/v1/gpus/h100-sxm`);
    const offers = (await sut.listOffers().wait()).body;
    assert.equal(offers.find((o) => o.id === sxm.cheapestOfferId)?.provider, 'cloud-b');
  });

  it('answers a model by slug or spelling, and NOT_FOUND for a family of several models or a model not on offer', async () => {
    await refreshed();
    const model = await sut.gpuModel('H100 SXM').wait();
    assert.equal(model.body.slug, 'h100-sxm');
    assert.deepEqual(keys(model.body.offers, (await sut.listOffers().wait()).body), ['cloud-b', 'cloud-a']);
    assert.equal((await sut.gpuModel('rtx-4090').wait()).body.name, 'RTX 4090');
    const several = await refusal(() => sut.gpuModel('h100').wait());
    assert.match(several.message, /names several models \(h100-pcie, h100-sxm\)/);
    const unknown = await refusal(() => sut.gpuModel('zzzz').wait());
    assert.deepEqual([unknown.code, /closest known/.test(unknown.message)], ['NOT_FOUND', true]);
  });

  it('answers at once only once a snapshot is loaded, as the fast route reads it', async () => {
    await sut.refresh();
    assert.equal(sut.listOffers().now(), undefined);
    const waited = await sut.listOffers().wait();
    assert.equal(sut.listOffers().now()?.etag, waited.etag);
    // A synchronous refusal: the fast route answers it at once too.
    assert.throws(
      () => sut.offer('nope').now(),
      (e: unknown) => e instanceof AppError && e.code === 'NOT_FOUND',
    );
  });

  it('stops serving offers at their stale time, says they aged out, and serves them again once renewed', async () => {
    await refreshed();
    assert.deepEqual(await sut.servableOffers(), { live: 4, agedOut: false });
    clock.advance(MAX_AGE_S * 1000);
    // No refresh since: the snapshot reaches its offers' stale time and reloads without them.
    assert.deepEqual((await sut.listOffers().wait()).body, []);
    assert.deepEqual(await sut.servableOffers(), { live: 0, agedOut: true });
    await refreshed();
    assert.deepEqual(await sut.servableOffers(), { live: 4, agedOut: false });
  });

  it('lists each configured provider with its status and its shapes in the drift report', async () => {
    await refreshed();
    const at = new Date('2026-05-01T00:00:00Z');
    const tally = {
      kind: 'unknown_state' as const,
      where: 'pod status',
      shapeHash: 'h'.repeat(64),
      firstSeenAt: at,
      lastSeenAt: at,
    };
    await store.read((r) =>
      r.providerDrift.record([{ ...tally, provider: 'cloud-b', shape: { state: 'NEW' }, seen: 3 }], 200),
    );
    assert.deepEqual(
      (await sut.providerListing()).map((p) => [p.id, p.status, p.drift]),
      [
        ['cloud-a', 'ok', { shapes: 0, seen: 0 }],
        ['cloud-b', 'ok', { shapes: 1, seen: 3 }],
      ],
    );
  });

  it("reports each configured provider's health, live offers and last error, in configuration order", async () => {
    await refreshed();
    b.failure = new ProviderApiError('rate_limited', 'slow down');
    clock.advance(60_000);
    await refreshed();
    const statuses = await sut.providerStatuses();
    assert.deepEqual(
      statuses.map((s) => [s.id, s.status, s.offerCount, s.lastErrorClass]),
      [
        ['cloud-a', 'ok', 3, null],
        ['cloud-b', 'degraded', 1, 'rate_limited'],
      ],
    );
    assert.equal(statuses[1].lastSuccessAt, '2026-05-01T00:00:00.000Z');
    assert.equal(statuses[1].lastRefreshAt, '2026-05-01T00:01:00.000Z');
    clock.advance(MAX_AGE_S * 1000);
    await refreshed();
    assert.deepEqual(
      (await sut.providerStatuses()).map((s) => [s.status, s.offerCount]),
      [
        ['ok', 3],
        ['down', 0],
      ],
    );
  });

  it('still finds an offer that left the list, for admission to tell unknown from gone', async () => {
    await refreshed();
    const [gone] = (await sut.listOffers('rtx-4090').wait()).body;
    a.offers = a.offers.filter((o) => o.key !== 'a-4090');
    await refreshed();
    assert.equal(await sut.liveOffer(gone.id), undefined);
    const cached = await sut.findCached(gone.id);
    assert.deepEqual([cached?.id, cached?.available], [gone.id, false]);
    assert.equal(await sut.findCached('00000000-0000-0000-0000-000000000000'), null);
  });

  it("matches a GPU intent to the snapshot's offers by count, ceiling and machine needs, cheapest first", async () => {
    await refreshed();
    const q = { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 300 };
    const found = await sut.intentCandidates(q, 10);
    assert.equal(found.slug, 'h100-sxm');
    assert.deepEqual(
      found.candidates.map((o) => [o.provider, o.pricePerHourMinor]),
      [
        ['cloud-b', 280],
        ['cloud-a', 300],
      ],
    );
    const needs = { customImage: true, startupScript: false, ports: 0, diskGb: null };
    assert.deepEqual(
      (await sut.intentCandidates(q, 10, needs)).candidates.map((o) => o.provider),
      ['cloud-b'],
    );
    const dear = await refusal(() => sut.intentCandidates({ ...q, maxHourlyPriceMinor: 100 }, 10));
    assert.equal(dear.code, 'NO_MATCHING_OFFER');
    assert.match(dear.message, /the cheapest is 280 cents/);
  });
});
