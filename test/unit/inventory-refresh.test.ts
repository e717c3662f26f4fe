import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { declaredCapabilities, InventoryRefresher, offerId } from '../../src/modules/inventory/inventory-refresh.js';
import type { Offer } from '../../src/modules/inventory/offer.entity.js';
import { customerPriceMinor } from '../../src/providers/pricing.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import { ProviderRegistry } from '../../src/providers/provider-registry.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';
import { addScriptedCloud, cloudOffer, ScriptedCloud } from '../inventory/scripted-provider.js';

const MAX_AGE_S = 600;

/** A logger whose JSON lines the test reads. */
function recordingLogger() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: createLogger('info', sink), lines };
}

describe('InventoryRefresher (memory store)', () => {
  let store: ReturnType<typeof memoryStore>;
  let clock: ManualClock;
  let registry: ProviderRegistry;
  let cloud: ScriptedCloud;
  let log: ReturnType<typeof recordingLogger>;
  let sut: InventoryRefresher;

  beforeEach(() => {
    store = memoryStore();
    clock = new ManualClock(new Date('2026-05-01T00:00:00Z'));
    registry = new ProviderRegistry();
    cloud = addScriptedCloud(registry, 'cloud-a', 10);
    log = recordingLogger();
    sut = new InventoryRefresher(store, registry, clock, log.logger, MAX_AGE_S, 50);
  });

  const offers = (provider = 'cloud-a'): Promise<Offer[]> =>
    store.read(async (r) => (await r.inventory.offers.liveByPrice(clock.now())).filter((o) => o.provider === provider));
  const stamp = () => store.read((r) => r.inventory.offers.stamp());
  const statusOf = async (p: string) =>
    (await store.read((r) => r.inventory.providerStatus.all())).find((s) => s.providerId === p);

  it("stores a provider's listing at the customer price, with its cost, its model and its stale time", async () => {
    cloud.offers = [cloudOffer({ key: 'a-1', pricePerHourMinor: 200, region: '  eu-west  ' })];
    const [result] = await sut.refreshAll();
    assert.deepEqual(result, { provider: 'cloud-a', ok: true, offers: 1, added: 1, removed: 0 });
    const [o] = await offers();
    assert.equal(o.id, offerId('cloud-a', cloud.offers[0], customerPriceMinor(200, 10)));
    assert.deepEqual(
      [o.pricePerHourMinor, o.costPerHourMinor, o.slug, o.name, o.region, o.currency],
      [220, 200, 'h100-sxm', 'H100 SXM', 'eu-west', 'USD'],
    );
    assert.equal(o.staleAt.getTime(), clock.now().getTime() + MAX_AGE_S * 1000);
    assert.deepEqual(await stamp(), { version: 1, refreshedAt: clock.now().getTime() });
  });

  it('keeps the version of an unchanged listing, renewing its offers and the refresh time', async () => {
    cloud.offers = [cloudOffer({ key: 'a-1' }), cloudOffer({ key: 'a-2', gpuCount: 2 })];
    await sut.refreshAll();
    clock.advance(60_000);
    const [again] = await sut.refreshAll();
    assert.deepEqual([again.added, again.removed, again.offers], [0, 0, 2]);
    assert.deepEqual(await stamp(), { version: 1, refreshedAt: clock.now().getTime() });
    assert.ok((await offers()).every((o) => o.staleAt.getTime() === clock.now().getTime() + MAX_AGE_S * 1000));
  });

  it('counts an offer whose capabilities changed as changed, keeping its id and moving the version', async () => {
    cloud.offers = [cloudOffer({ key: 'a-1' })];
    await sut.refreshAll();
    const [before] = await offers();
    cloud.offers = [
      cloudOffer({ key: 'a-1', capabilities: { customImage: true, startupScript: false, ports: 2, maxDiskGb: null } }),
    ];
    const [result] = await sut.refreshAll();
    assert.deepEqual([result.added, result.removed], [1, 0]);
    const [after] = await offers();
    assert.equal(after.id, before.id);
    assert.deepEqual([after.capCustomImage, after.capPorts, after.capMaxDiskGb], [true, 2, null]);
    assert.equal((await stamp()).version, 2);
  });

  it('withdraws an offer its provider no longer lists, and a new price is a new offer', async () => {
    cloud.offers = [cloudOffer({ key: 'a-1' }), cloudOffer({ key: 'a-2' })];
    await sut.refreshAll();
    const [gone] = (await offers()).filter((o) => o.providerOfferKey === 'a-2');
    cloud.offers = [cloudOffer({ key: 'a-1', pricePerHourMinor: 300 })];
    const [result] = await sut.refreshAll();
    assert.deepEqual([result.offers, result.added, result.removed], [1, 1, 2]);
    assert.deepEqual(
      (await offers()).map((o) => [o.providerOfferKey, o.pricePerHourMinor]),
      [['a-1', 330]],
    );
    assert.equal((await store.read((r) => r.inventory.offers.cached(gone.id)))?.available, false);
  });

  it('stores an offer listed twice once', async () => {
    cloud.offers = [cloudOffer({ key: 'a-1' }), cloudOffer({ key: 'a-1' })];
    const [result] = await sut.refreshAll();
    assert.deepEqual([result.offers, result.added], [1, 1]);
    assert.equal((await offers()).length, 1);
    assert.equal((await statusOf('cloud-a'))?.offerCount, 1);
  });

  it("keeps a failing provider's offers until they are stale, then withdraws them, recording each failure", async () => {
    cloud.offers = [cloudOffer({ key: 'a-1' })];
    await sut.refreshAll();
    const success = clock.now();
    cloud.failure = new ProviderApiError('auth', 'bad key for https://cloud-a.example/?token=x');
    clock.advance(60_000);
    const [failed] = await sut.refreshAll();
    assert.deepEqual([failed.ok, failed.removed, failed.errorClass], [false, 0, 'auth']);
    assert.equal((await offers()).length, 1, 'still live until its stale time');
    const status = await statusOf('cloud-a');
    assert.deepEqual(
      [status?.lastRefreshOk, status?.lastSuccessAt?.getTime(), status?.offerCount, status?.lastErrorClass],
      [false, success.getTime(), 1, 'auth'],
    );
    clock.advance(MAX_AGE_S * 1000);
    const [expired] = await sut.refreshAll();
    assert.equal(expired.removed, 1);
    assert.equal((await store.read((r) => r.inventory.offers.statesOf('cloud-a')))[0].available, false);
    assert.ok(log.lines.some((l) => l.msg === 'provider offers are stale and no longer offered' && l.removed === 1));
  });

  it("stores each provider's outcome on its own: one failing or hanging holds back no one's offers", async () => {
    const broken = addScriptedCloud(registry, 'cloud-b');
    broken.failure = new Error('not a provider error');
    const hanging = addScriptedCloud(registry, 'cloud-c');
    hanging.listOffers = () => new Promise(() => undefined);
    cloud.offers = [cloudOffer({ key: 'a-1' })];
    const results = await sut.refreshAll();
    assert.deepEqual(
      results.map((r) => [r.provider, r.ok, r.errorClass]),
      [
        ['cloud-a', true, undefined],
        ['cloud-b', false, 'internal'],
        ['cloud-c', false, 'timeout'],
      ],
    );
    assert.equal((await offers()).length, 1);
    assert.equal((await statusOf('cloud-c'))?.lastErrorClass, 'timeout');
  });

  it('withdraws the offers of a provider no longer configured, however fresh', async () => {
    const retired = addScriptedCloud(registry, 'cloud-old');
    retired.offers = [cloudOffer({ key: 'o-1' })];
    cloud.offers = [cloudOffer({ key: 'a-1' })];
    await sut.refreshAll();
    assert.equal((await offers('cloud-old')).length, 1);
    const configured = new ProviderRegistry(registry.registered().filter((e) => e.id !== 'cloud-old'));
    await new InventoryRefresher(store, configured, clock, log.logger, MAX_AGE_S).refreshAll();
    assert.equal((await offers('cloud-old')).length, 0);
    assert.equal((await offers()).length, 1);
  });

  it('lists a GPU the catalog does not know under a slug of its own, warning once per process', async () => {
    const name = `Zeta Accelerator ${Date.now()}`;
    cloud.offers = [cloudOffer({ key: 'z-1', name }), cloudOffer({ key: 'z-2', name, gpuCount: 2 })];
    await sut.refreshAll();
    await sut.refreshAll();
    const warned = log.lines.filter((l) => l.gpuName === name);
    assert.equal(warned.length, 1);
    assert.deepEqual(
      (await offers()).map((o) => [o.name, o.slug === warned[0].slug]),
      [
        [name, true],
        [name, true],
      ],
    );
  });

  it('stores a listing once when its transaction loses its commit and runs again', async () => {
    cloud.offers = [cloudOffer({ key: 'a-1' }), cloudOffer({ key: 'a-2' })];
    store.loseNextCommits(1);
    const [result] = await sut.refreshAll();
    assert.deepEqual([result.ok, result.offers, result.added], [true, 2, 2]);
    assert.equal((await offers()).length, 2);
    assert.equal((await stamp()).version, 1);
  });

  it('treats a listing it cannot store as that provider failing', async () => {
    cloud.offers = [cloudOffer({ key: 'a-1', pricePerHourMinor: -5 })];
    const [result] = await sut.refreshAll();
    assert.deepEqual([result.ok, result.errorClass], [false, 'internal']);
    assert.ok(log.lines.some((l) => l.msg === 'inventory refresh could not be stored'));
    assert.equal((await statusOf('cloud-a'))?.lastRefreshOk, false);
  });
});

describe('what a listed offer declares', () => {
  it('keeps only capabilities that can be true: whole counts in range, true flags', () => {
    const declared = (capabilities: unknown) =>
      declaredCapabilities(cloudOffer({ key: 'x', capabilities: capabilities as never }));
    assert.deepEqual(declared(undefined), { customImage: false, startupScript: false, ports: 0, maxDiskGb: null });
    assert.deepEqual(declared({ customImage: true, startupScript: true, ports: 3, maxDiskGb: 500 }), {
      customImage: true,
      startupScript: true,
      ports: 3,
      maxDiskGb: 500,
    });
    for (const bad of [
      { customImage: 'yes', ports: -1, maxDiskGb: 0 },
      { ports: 1.5, maxDiskGb: 2.5 },
      { ports: 70_000, maxDiskGb: 2 ** 31 },
    ])
      assert.deepEqual(declared(bad), { customImage: false, startupScript: false, ports: 0, maxDiskGb: null });
  });

  it('gives an offer the same id while its provider, key, price and shape stay, whatever its capabilities', () => {
    const o = cloudOffer({ key: 'k-1' });
    const id = offerId('p', o, 250);
    assert.equal(
      offerId('p', { ...o, capabilities: { customImage: true, startupScript: true, ports: 1, maxDiskGb: 10 } }, 250),
      id,
    );
    for (const other of [
      offerId('q', o, 250),
      offerId('p', o, 251),
      offerId('p', { ...o, gpuCount: 2 }, 250),
      offerId('p', { ...o, region: 'us' }, 250),
      offerId('p', { ...o, key: 'k-2' }, 250),
    ])
      assert.notEqual(other, id);
  });
});
