import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, discardQueuedRentalJobs, rent } from '../helpers/rentals.js';
import { addScriptedCloud, cloudOffer, type ScriptedCloud } from '../inventory/scripted-provider.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { lifecycleDepsOf } from '../../src/container.js';

const LOCAL: LocalInventoryOffer[] = [
  {
    key: 'l-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 299,
    maximumDurationSeconds: 86400,
  },
  {
    key: 'l-l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 48,
    maximumDurationSeconds: 86400,
  },
];
const MAX_AGE_MS = 600_000;

type Listed = { id: string; provider: string; region?: string; name: string };

describe('provider refresh isolation and GET /api/v1/providers', () => {
  let ctx: TestContext;
  let acme: ScriptedCloud;
  before(async () => {
    ctx = await createTestContext({ offers: LOCAL });
    acme = addScriptedCloud(ctx.services.providers, 'acme');
    // Earlier suites of the run may have recorded failures of the local provider.
    await ctx.services.ds.query('DELETE FROM provider_status');
    await refresh();
  });
  afterEach(async () => {
    // Leave no scripted offers behind for other suites sharing the database.
    acme.failure = null;
    acme.offers = [];
    await refresh();
  });
  after(async () => {
    await discardQueuedRentalJobs(ctx);
    await ctx.close();
  });

  async function refresh() {
    const results = await ctx.services.inventory.refresh();
    ctx.services.inventory.invalidate();
    return results;
  }
  const offers = async (): Promise<Listed[]> => (await ctx.api.get('/api/v1/offers')).body.data;
  const providers = async () => {
    const res = await ctx.api.get('/api/v1/providers');
    assert.equal(res.status, 200);
    return res.body.data as Record<string, unknown>[];
  };
  const statusOf = async (id: string) => (await providers()).find((p) => p.id === id)!;

  it('keeps every provider live when one fails, and reports the failure by class only', async () => {
    acme.offers = [
      cloudOffer({ key: 'a-h100', pricePerHourMinor: 250, region: 'eu-north-1' }),
      cloudOffer({ key: 'a-4090', name: 'RTX 4090', category: 'consumer', vramGb: 24, pricePerHourMinor: 40 }),
    ];
    await refresh();
    const before = await offers();
    assert.deepEqual([...new Set(before.map((o) => o.provider))].sort(), ['acme', 'local']);
    assert.equal(before.find((o) => o.provider === 'acme' && o.name === 'H100 SXM')?.region, 'eu-north-1');
    assert.ok(
      before.filter((o) => o.provider === 'local').every((o) => !('region' in o)),
      'no region when the provider does not say',
    );
    const h100 = (await ctx.api.get('/api/v1/gpus')).body.data.models.find(
      (g: { slug: string }) => g.slug === 'h100-sxm',
    );
    assert.deepEqual(h100.providers, ['acme', 'local']);
    assert.equal(h100.availableOffers, 2);
    assert.equal(h100.minPricePerHourMinor, 250);

    acme.failure = new ProviderApiError(
      'rate_limited',
      'acme GET https://api.acme.example/v1/offers?token=SECRET: 429',
      429,
      5000,
    );
    ctx.clock.advance(60_000);
    const results = await refresh();
    assert.deepEqual(
      results.map((r) => [r.provider, r.ok, r.errorClass]),
      [
        ['local', true, undefined],
        ['acme', false, 'rate_limited'],
      ],
    );
    assert.deepEqual(
      (await offers()).map((o) => o.id).sort(),
      before.map((o) => o.id).sort(),
      'nothing leaves within the age bound',
    );

    const res = await ctx.api.get('/api/v1/providers');
    // The statuses only (request ids and times may hold "429" by chance); a whole-word 429 is the status code.
    assert.doesNotMatch(JSON.stringify(res.body.data), /SECRET|https?:|\b429\b/);
    const local = await statusOf('local');
    assert.equal(local.status, 'ok');
    assert.equal(local.offerCount, 2);
    assert.equal(local.lastErrorClass, null);
    assert.equal(local.description, 'Simulated GPU inventory; each instance is a real SSH endpoint on 127.0.0.1');
    const a = await statusOf('acme');
    assert.equal(a.status, 'degraded');
    assert.equal(a.offerCount, 2);
    assert.equal(a.lastErrorClass, 'rate_limited');
    assert.equal(a.lastErrorAt, ctx.clock.now().toISOString());
    assert.equal(a.lastRefreshAt, ctx.clock.now().toISOString());
    assert.equal(a.lastSuccessAt, new Date(ctx.clock.now().getTime() - 60_000).toISOString());
    assert.deepEqual(Object.keys(a).sort(), [
      'description',
      'drift',
      'id',
      'lastErrorAt',
      'lastErrorClass',
      'lastRefreshAt',
      'lastSuccessAt',
      'offerCount',
      'status',
    ]);

    const health = await ctx.api.get('/healthz');
    assert.equal(health.status, 200);
  });

  it("takes a failing provider's offers off the list once they are older than OFFER_MAX_AGE_SECONDS, and back when it answers", async () => {
    acme.offers = [cloudOffer({ key: 'a-cheap-h100', pricePerHourMinor: 150 })];
    await refresh();
    const who = await account(ctx, { creditsMinor: 5000 });
    const cheap = (await offers()).find((o) => o.provider === 'acme')!;

    acme.failure = new ProviderApiError('auth', 'acme GET /v1/offers: 401');
    ctx.clock.advance(MAX_AGE_MS - 1000);
    await refresh();
    assert.ok(
      (await offers()).some((o) => o.id === cheap.id),
      'still listed just inside the bound',
    );
    ctx.clock.advance(2000);
    const results = await refresh();
    assert.equal(results.find((r) => r.provider === 'acme')?.removed, 1);

    const listed = await offers();
    assert.ok(!listed.some((o) => o.provider === 'acme'));
    assert.equal(listed.filter((o) => o.provider === 'local').length, 2, 'the healthy provider keeps its offers');
    const h100 = (await ctx.api.get('/api/v1/gpus')).body.data.models.find(
      (g: { slug: string }) => g.slug === 'h100-sxm',
    );
    assert.deepEqual(h100.providers, ['local']);
    assert.equal((await ctx.services.ds.getRepository(Offer).findOneByOrFail({ id: cheap.id })).available, false);

    // Not rentable by GPU intent: the only H100 under the ceiling was the stale one.
    const refused = await rent(ctx, who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 200 });
    assert.equal(refused.status, 422);
    assert.equal(refused.body.error.code, 'NO_MATCHING_OFFER');
    assert.match(refused.body.error.message, /cheapest is 299 cents \(\$2\.99\)/);

    const a = await statusOf('acme');
    assert.equal(a.status, 'down');
    assert.equal(a.offerCount, 0);
    assert.equal(a.lastErrorClass, 'auth');
    assert.equal((await ctx.api.get('/healthz')).status, 200);

    acme.failure = null;
    await refresh();
    assert.ok(
      (await offers()).some((o) => o.id === cheap.id),
      'the same offer returns under the same id',
    );
    assert.equal((await statusOf('acme')).status, 'ok');
    assert.equal((await statusOf('acme')).lastErrorClass, 'auth', 'the last error stays on record');
  });

  it('hides offers past the bound even when no refresh runs (a stopped worker)', async () => {
    acme.offers = [cloudOffer({ key: 'a-h100' })];
    await refresh();
    assert.equal((await offers()).length, 3);
    ctx.clock.advance(MAX_AGE_MS + 1000);
    // No invalidate: the api process notices by the clock alone.
    assert.deepEqual(await offers(), []);
    assert.equal((await ctx.api.get('/api/v1/gpus')).body.data.count, 0);
    assert.deepEqual(
      (await providers()).map((p) => p.status),
      ['down', 'down'],
    );
    await refresh();
    assert.equal((await offers()).length, 3);
  });

  it('shows the same status in another api process, and counts any other thrown error as internal', async () => {
    acme.offers = [cloudOffer({ key: 'a-h100' })];
    await refresh();
    acme.failure = new Error('socket hang up at https://api.acme.example/v1/offers');
    await refresh();
    const other = await createTestContext({ offers: LOCAL });
    try {
      addScriptedCloud(other.services.providers, 'acme');
      const res = await other.api.get('/api/v1/providers');
      const a = res.body.data.find((p: { id: string }) => p.id === 'acme');
      assert.equal(a.lastErrorClass, 'internal');
      assert.equal(a.status, 'degraded');
      assert.doesNotMatch(JSON.stringify(res.body), /hang up|https?:/);
    } finally {
      await other.close();
    }
  });

  it('shows a create the provider rejected (a configuration error) as its last error, and keeps capacity refusals quiet', async () => {
    acme.offers = [cloudOffer({ key: 'acme-cfg' })];
    await refresh();
    const offerId = (await offers()).find((o) => o.provider === 'acme')!.id;
    const life = createRentalLifecycle(lifecycleDepsOf(ctx.services));
    const rentOnce = async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const res = await rent(ctx, who, { offerId });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      await life.provision(res.body.data.deploymentId);
    };
    const before = await statusOf('acme');
    ctx.clock.advance(1000);
    acme.createAnswer = { kind: 'unavailable', reason: 'no capacity' };
    await rentOnce();
    assert.deepEqual(await statusOf('acme'), before, 'no capacity is not an error of the provider');
    ctx.clock.advance(1000);
    acme.createAnswer = { kind: 'rejected', reason: 'ACME_PROVIDER_IMAGE was refused' };
    await rentOnce();
    const after = await statusOf('acme');
    assert.equal(after.lastErrorClass, 'request');
    assert.equal(after.lastErrorAt, ctx.clock.now().toISOString());
    acme.createAnswer = { kind: 'rejected', reason: 'ACME_PROVIDER_API_KEY was refused', errorClass: 'auth' };
    await rentOnce();
    assert.equal((await statusOf('acme')).lastErrorClass, 'auth');
    acme.createAnswer = { kind: 'unavailable', reason: 'scripted cloud has no capacity' };
  });

  it('keeps a GPU the catalog does not know under a slug of its own, listed and rentable', async () => {
    acme.offers = [
      cloudOffer({ key: 'a-x9', name: 'Acme Tensor X9', category: 'accelerator', vramGb: 32, pricePerHourMinor: 90 }),
    ];
    await refresh();
    const row = (await ctx.api.get('/api/v1/gpus')).body.data.models.find(
      (g: { slug: string }) => g.slug === 'acme-tensor-x9',
    );
    assert.equal(row.name, 'Acme Tensor X9');
    assert.equal(row.family, 'acme-tensor-x9');
    assert.equal(row.category, 'accelerator');
    assert.equal((await ctx.api.get('/api/v1/offers?gpu=acme%20tensor%20x9')).body.data.length, 1);
    assert.equal((await ctx.api.get('/api/v1/gpus/acme-tensor-x9')).status, 200);
    const who = await account(ctx, { creditsMinor: 5000 });
    const r = await rent(ctx, who, { gpuModel: 'Acme Tensor-X9', gpuCount: 1, maxHourlyPriceMinor: 100 });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  });
});
