import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { lifecycleDepsOf } from '../../src/container.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { balanceOf } from '../helpers/payments.js';
import { waitFor } from '../helpers/wait.js';
import { account, discardQueuedRentalJobs, offerIds, rent } from '../helpers/rentals.js';
import { sentRequests } from '../helpers/sql-requests.js';
import { addScriptedCloud, cloudOffer, type ScriptedCloud } from '../inventory/scripted-provider.js';

// GPU intents are matched in the api process's offer snapshot, not by a query: each rule the
// candidate query used to apply (liveness, a provider gone down, model, count, ceiling, machine
// settings, order) holds there, and the snapshot is as fresh for intents as for offer ids.

const H100 = {
  name: 'NVIDIA H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  maximumDurationSeconds: 86400,
};
const NO_PORTS = { ports: 0 };
const LOCAL: LocalInventoryOffer[] = [
  { ...H100, key: 'snap-300-a', pricePerHourMinor: 300, capabilities: NO_PORTS },
  { ...H100, key: 'snap-300-b', pricePerHourMinor: 300, capabilities: NO_PORTS },
  { ...H100, key: 'snap-350-ports', pricePerHourMinor: 350, capabilities: { ports: 2 } },
  { ...H100, key: 'snap-500', pricePerHourMinor: 500, capabilities: NO_PORTS },
  { ...H100, key: 'snap-8x', gpuCount: 8, pricePerHourMinor: 2400 },
];
const MAX_AGE_MS = 600_000;
const INTENT = { gpuModel: 'H100 SXM', gpuCount: 1 };

describe('GPU-intent admission from the offer snapshot', () => {
  let ctx: TestContext;
  let acme: ScriptedCloud;
  let id: Record<string, string>;
  before(async () => {
    ctx = await createTestContext({ offers: LOCAL });
    acme = addScriptedCloud(ctx.services.providers, 'acme-snap');
    await refresh();
    id = await offerIds(ctx);
  });
  afterEach(async () => {
    acme.failure = null;
    acme.offers = [];
    await refresh();
  });
  after(async () => {
    await discardQueuedRentalJobs(ctx);
    await ctx.close();
  });

  async function refresh() {
    await ctx.services.inventory.refresh();
    ctx.services.inventory.invalidate();
  }
  const candidatesOf = async (body: object): Promise<string[]> => {
    const who = await account(ctx, { creditsMinor: 100_000, maxPerRentalMinor: 100_000 });
    const res = await rent(ctx, who, body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data.candidateOfferIds;
  };
  const refusalOf = async (body: object): Promise<string> => {
    const who = await account(ctx, { creditsMinor: 100_000, maxPerRentalMinor: 100_000 });
    const res = await rent(ctx, who, body);
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'NO_MATCHING_OFFER');
    return res.body.error.message;
  };

  it('sends no query about offers: the candidates come from the snapshot, as an offer id does', async () => {
    await candidatesOf({ ...INTENT, maxHourlyPriceMinor: 400 });
    const who = await account(ctx, { creditsMinor: 100_000 });
    const { result, sent } = await sentRequests(() => rent(ctx, who, { ...INTENT, maxHourlyPriceMinor: 400 }));
    assert.equal(result.status, 201, JSON.stringify(result.body));
    assert.deepEqual(
      sent.filter((q) => /\boffers\b/i.test(q)),
      [],
    );
    assert.ok(
      sent.some((q) => /INSERT INTO `?orders`?/i.test(q)),
      'the admission itself was recorded',
    );
  });

  it('keeps the exact GPU count, the ceiling, and cheapest first with ties by id', async () => {
    const tied = [id['snap-300-a'], id['snap-300-b']].sort();
    assert.deepEqual(await candidatesOf({ ...INTENT, maxHourlyPriceMinor: 400 }), [...tied, id['snap-350-ports']]);
    assert.deepEqual(await candidatesOf({ ...INTENT, maxHourlyPriceMinor: 300 }), tied);
    assert.deepEqual(await candidatesOf({ ...INTENT, gpuCount: 8, maxHourlyPriceMinor: 3000 }), [id['snap-8x']]);
    assert.match(
      await refusalOf({ ...INTENT, maxHourlyPriceMinor: 299 }),
      /above 299 cents per hour; the cheapest is 300 cents \(\$3\.00\) per hour/,
    );
    assert.match(
      await refusalOf({ ...INTENT, gpuCount: 2, maxHourlyPriceMinor: 3000 }),
      /No offer of 2 x H100 SXM right now; H100 SXM is offered with 1, 8 GPU\(s\)/,
    );
    assert.match(await refusalOf({ ...INTENT, gpuCount: 8, maxHourlyPriceMinor: 2399 }), /the cheapest is 2400 cents/);
  });

  it('keeps only offers that honour the machine settings, and says which setting none honours', async () => {
    assert.deepEqual(await candidatesOf({ ...INTENT, maxHourlyPriceMinor: 1000, machine: { ports: [8000] } }), [
      id['snap-350-ports'],
    ]);
    assert.deepEqual(await candidatesOf({ ...INTENT, maxHourlyPriceMinor: 1000, machine: { ports: [8000, 8001] } }), [
      id['snap-350-ports'],
    ]);
    assert.match(
      await refusalOf({ ...INTENT, maxHourlyPriceMinor: 1000, machine: { ports: [8000, 8001, 8002] } }),
      /^None of the 4 offers of 1 x H100 SXM at or under 1000 cents per hour can honour 3 machine\.ports \(at most 2\)\./,
    );
    assert.match(
      await refusalOf({ ...INTENT, maxHourlyPriceMinor: 340, machine: { ports: [8000] } }),
      /^None of the 2 offers .* can honour 1 machine\.ports \(none exposes ports\)/,
    );
  });

  it('drops the offers of a provider gone down once they pass the age bound, with no refresh and no version move', async () => {
    acme.offers = [cloudOffer({ key: 'acme-cheap', name: 'H100 SXM', pricePerHourMinor: 150 })];
    await refresh();
    const cheap = (
      await ctx.services.ds
        .getRepository(Offer)
        .findOneByOrFail({ provider: 'acme-snap', providerOfferKey: 'acme-cheap' })
    ).id;
    assert.deepEqual(await candidatesOf({ ...INTENT, maxHourlyPriceMinor: 200 }), [cheap]);

    // The provider fails from now on; the local one keeps refreshing, so only acme's offers age.
    acme.failure = new ProviderApiError('auth', 'acme GET /v1/offers: 401');
    ctx.clock.advance(MAX_AGE_MS / 2);
    await refresh();
    assert.deepEqual(
      await candidatesOf({ ...INTENT, maxHourlyPriceMinor: 200 }),
      [cheap],
      'degraded, still within the bound',
    );
    const version = (await ctx.services.ds.query('SELECT version FROM inventory_state WHERE id = 1'))[0].version;

    ctx.clock.advance(MAX_AGE_MS / 2);
    // No refresh ran: the offer is still marked available, and the version has not moved.
    assert.equal((await ctx.services.ds.getRepository(Offer).findOneByOrFail({ id: cheap })).available, true);
    assert.match(await refusalOf({ ...INTENT, maxHourlyPriceMinor: 200 }), /the cheapest is 300 cents/);
    assert.ok(!(await candidatesOf({ ...INTENT, maxHourlyPriceMinor: 1000 })).includes(cheap));
    assert.equal((await ctx.services.ds.query('SELECT version FROM inventory_state WHERE id = 1'))[0].version, version);
  });

  it('drops an offer its provider stops listing at the same moment GET /api/v1/offers/{id} does', async () => {
    acme.offers = [cloudOffer({ key: 'acme-leaving', name: 'Snapshot Leaving GPU', pricePerHourMinor: 100 })];
    await refresh();
    const leaving = (
      await ctx.services.ds
        .getRepository(Offer)
        .findOneByOrFail({ provider: 'acme-snap', providerOfferKey: 'acme-leaving' })
    ).id;
    const intent = { gpuModel: 'Snapshot Leaving GPU', gpuCount: 1, maxHourlyPriceMinor: 200 };
    assert.deepEqual(await candidatesOf(intent), [leaving]);
    acme.offers = [];
    // Refreshed without invalidating: the snapshot learns of it by its version check, as for offer ids.
    await ctx.services.inventory.refresh();
    await waitFor(async () => (await ctx.api.get(`/api/v1/offers/${leaving}`)).status === 404, {
      timeoutMs: 5000,
      what: 'the snapshot to drop the offer',
    });
    assert.match(await refusalOf(intent), /No GPU model is known as "Snapshot Leaving GPU"/);
  });

  it('treats an offer that vanished from the database after the snapshot was taken as an offer id does: admitted, then failed by provisioning with nothing charged', async () => {
    acme.offers = [cloudOffer({ key: 'acme-vanishing', name: 'Snapshot Vanishing GPU', pricePerHourMinor: 100 })];
    await refresh();
    const vanishing = (
      await ctx.services.ds
        .getRepository(Offer)
        .findOneByOrFail({ provider: 'acme-snap', providerOfferKey: 'acme-vanishing' })
    ).id;
    const intent = { gpuModel: 'Snapshot Vanishing GPU', gpuCount: 1, maxHourlyPriceMinor: 200 };
    // Loads the snapshot, then the row goes without the version moving.
    assert.deepEqual(await candidatesOf(intent), [vanishing]);
    await ctx.services.ds.getRepository(Offer).delete({ id: vanishing });

    const who = await account(ctx, { creditsMinor: 5000 });
    const byId = await rent(ctx, who, { offerId: vanishing });
    const byIntent = await rent(ctx, who, intent);
    assert.equal(byId.status, 201, JSON.stringify(byId.body));
    assert.equal(byIntent.status, 201, JSON.stringify(byIntent.body));
    assert.deepEqual(byIntent.body.data.candidateOfferIds, [vanishing]);

    const life = createRentalLifecycle(lifecycleDepsOf(ctx.services));
    for (const res of [byId, byIntent]) await life.provision(res.body.data.deploymentId);
    const after = async (res: typeof byId) =>
      (await ctx.api.get(`/api/v1/rentals/${res.body.data.rentalId}`).set(who.auth)).body.data;
    assert.deepEqual([(await after(byId)).status, (await after(byId)).failureCode], ['FAILED', 'OFFER_NOT_FOUND']);
    assert.deepEqual([(await after(byIntent)).status, (await after(byIntent)).failureCode], ['FAILED', 'NO_CAPACITY']);
    assert.deepEqual(
      await balanceOf(ctx, who.accountId),
      { balance: 5000, entries: 1 },
      'nothing charged for either: the top-up is the only entry',
    );

    // Once the snapshot is loaded again, neither admits it.
    ctx.services.inventory.invalidate();
    const gone = await rent(ctx, who, { offerId: vanishing });
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, 'OFFER_NOT_FOUND');
    assert.match(await refusalOf(intent), /No GPU model is known as "Snapshot Vanishing GPU"/);
  });
});
