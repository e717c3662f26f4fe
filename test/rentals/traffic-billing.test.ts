import assert from 'node:assert/strict';
import { lifecycleDepsOf } from '../../src/container.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { LedgerEntry } from '../../src/modules/billing/ledger-entry.entity.js';
import { createRentalLifecycle, type RentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { assertLedgerConsistent } from '../helpers/ledger.js';
import { account, offerIds, rentOk, stepUntil } from '../helpers/rentals.js';

const GB = 2 ** 30;
// 3 cents per GB sent and 1 cent per GB received, before the 10 % markup: 3.3 and 1.1 cents after it.
const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'tr-billed',
    name: 'NVIDIA RTX 4090',
    category: 'consumer',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
    trafficPrice: { upMicroUsdPerGb: 30_000, downMicroUsdPerGb: 10_000 },
  },
  {
    key: 'tr-free',
    name: 'NVIDIA RTX 4090',
    category: 'consumer',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 310,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

/** Traffic billed as used: offers show it, status polls record it, the sweep charges it, budgets count it. */
describe('internet traffic billed as used (API + lifecycle + local provider)', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let life: RentalLifecycle;
  let ids: Record<string, string>;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { PRICE_MARKUP_PERCENT: '10' } });
    ids = await offerIds(ctx);
    life = createRentalLifecycle(lifecycleDepsOf(ctx.services), {
      activeBoundMs: 60_000,
      adoptBoundMs: 5000,
      sshTimeoutMs: 3000,
    });
  });
  after(() => ctx.close());

  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const entries = async (rentalId: string, kind: 'USAGE' | 'TRAFFIC') =>
    (await ctx.services.ds.getRepository(LedgerEntry).findBy({ rentalId, kind })).map((e) => e.amountMinor);
  const balance = async (accountId: string) =>
    (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: accountId })).balanceMinor;
  /** What a status poll of the instance records: its cumulative counters. */
  const poll = async (deploymentId: string, upBytes: number, downBytes: number) => {
    const { label } = await dep(deploymentId);
    return ctx.services.store.read((r) =>
      r.rentals.metering.recordTraffic([{ label: label!, upBytes, downBytes }], ctx.clock.now()),
    );
  };

  async function active(body: object, creditsMinor = 10_000) {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor });
    const r = await rentOk(ctx, who, body);
    await stepUntil(ctx, r.deploymentId, 'ACTIVE', (id) => life.provision(id));
    return { who, ...r };
  }

  it('lists offers that bill traffic with their per-GB prices, markup included, and filters on them', async () => {
    const all = (await ctx.api.get('/api/v1/offers')).body.data as Record<string, unknown>[];
    const billed = all.find((o) => o.id === ids['tr-billed'])!;
    const free = all.find((o) => o.id === ids['tr-free'])!;
    assert.deepEqual(billed.trafficPricePerGb, { upMicroUsd: 33_000, downMicroUsd: 11_000 });
    assert.equal(billed.pricePerHourMinor, 330);
    assert.equal(free.trafficPricePerGb, undefined, 'free traffic shows no price');
    const onlyFree = (await ctx.api.get('/api/v1/offers?maxTrafficMicroUsdPerGb=0')).body.data as { id: string }[];
    assert.ok(onlyFree.some((o) => o.id === ids['tr-free']) && !onlyFree.some((o) => o.id === ids['tr-billed']));
    const upTo = (await ctx.api.get('/api/v1/offers?maxTrafficMicroUsdPerGb=33000')).body.data as { id: string }[];
    assert.ok(upTo.some((o) => o.id === ids['tr-billed']));
    const below = (await ctx.api.get('/api/v1/offers?maxTrafficMicroUsdPerGb=32999')).body.data as { id: string }[];
    assert.ok(!below.some((o) => o.id === ids['tr-billed']), 'the dearer direction decides');
    const bad = await ctx.api.get('/api/v1/offers?maxTrafficMicroUsdPerGb=-1');
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.code, 'VALIDATION_FAILED');
  });

  it('charges the traffic an instance moved at the rental price, in TRAFFIC entries of their own, and shows it on the rental', async () => {
    const r = await active({ offerId: ids['tr-billed'] });
    const before = await balance(r.who.accountId);
    // 10 GB sent and 20 GB received: 10 x 3.3 + 20 x 1.1 = 55 cents.
    assert.equal(await poll(r.deploymentId, 10 * GB, 20 * GB), 1);
    await life.meter();
    let d = await dep(r.deploymentId);
    assert.equal(d.trafficMinor, 55);
    assert.equal(await balance(r.who.accountId), before - d.usageMinor - 55, 'taken from the credits at the sweep');
    assert.deepEqual(await entries(r.rentalId, 'TRAFFIC'), [], 'posted hourly, like usage');

    // A lower reading (a counter that restarted) never takes back, nor charges twice.
    await poll(r.deploymentId, 1 * GB, 1 * GB);
    ctx.clock.advance(3600_000);
    await life.meter();
    d = await dep(r.deploymentId);
    assert.equal(d.trafficUpBytes, 10 * GB);
    assert.equal(d.trafficMinor, 55);
    assert.deepEqual(
      await entries(r.rentalId, 'TRAFFIC'),
      [-55],
      'the first rental-hour posts the traffic charged by then',
    );

    const shown = (await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(r.who.auth)).body.data;
    assert.deepEqual(
      { ...shown.deployment.traffic, readAt: typeof shown.deployment.traffic.readAt },
      {
        sentBytes: 10 * GB,
        receivedBytes: 20 * GB,
        pricePerGb: { upMicroUsd: 33_000, downMicroUsd: 11_000 },
        chargedMinor: 55,
        readAt: 'string',
      },
    );

    // The last reading, before destruction, is settled with the rest: 1 GB more sent is 3.3 cents (58.3 in all).
    await poll(r.deploymentId, 11 * GB, 20 * GB);
    assert.equal((await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(r.who.auth)).status, 202);
    await stepUntil(ctx, r.deploymentId, 'TERMINATED', (id) => life.terminate(id));
    d = await dep(r.deploymentId);
    assert.equal(d.trafficMinor, 58);
    assert.equal(d.postedTrafficMinor, 58);
    const traffic = await entries(r.rentalId, 'TRAFFIC');
    assert.equal(traffic.length, 2);
    assert.equal(-traffic.reduce((a, b) => a + b, 0), 58);
    const usage = -(await entries(r.rentalId, 'USAGE')).reduce((a, b) => a + b, 0);
    assert.equal(await balance(r.who.accountId), before - usage - 58);
    await assertLedgerConsistent(ctx.services.ds);
  });

  it('ends a rental that reaches its budget through traffic like one that reaches it through time, charging no more than the budget', async () => {
    const r = await active({ offerId: ids['tr-billed'], budgetMinor: 500 });
    // 1,000 GB sent would cost $33: far past the $5 budget.
    await poll(r.deploymentId, 1000 * GB, 0);
    ctx.clock.advance(60_000);
    await life.meter();
    let d = await dep(r.deploymentId);
    assert.equal(d.usageMinor + d.trafficMinor, 500, 'time and traffic together stop at the budget');
    assert.ok(d.usageMinor > 0 && d.trafficMinor > 0);
    assert.equal(d.terminationReason, 'SPEND_CAP');
    await stepUntil(ctx, r.deploymentId, 'TERMINATED', (id) => life.terminate(id));
    d = await dep(r.deploymentId);
    assert.equal(d.usageMinor + d.trafficMinor, 500);
    const charged = [...(await entries(r.rentalId, 'USAGE')), ...(await entries(r.rentalId, 'TRAFFIC'))];
    assert.equal(-charged.reduce((a, b) => a + b, 0), 500);
    const shown = (await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(r.who.auth)).body.data;
    assert.equal(shown.terminationReason, 'SPEND_CAP');
    await assertLedgerConsistent(ctx.services.ds);
  });

  it('counts traffic in the key budget: a key whose spend reaches its budget through traffic ends its rental', async () => {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 10_000, budgetLimitMinor: 400 });
    const r = await rentOk(ctx, who, { offerId: ids['tr-billed'] });
    await stepUntil(ctx, r.deploymentId, 'ACTIVE', (id) => life.provision(id));
    await poll(r.deploymentId, 200 * GB, 0);
    await life.meter();
    const d = await dep(r.deploymentId);
    assert.ok(d.trafficMinor >= 400 - d.usageMinor, 'the key has spent its budget');
    assert.equal(d.terminationReason, 'KEY_BUDGET');
  });

  it("counts traffic in the account's credits: a rental whose traffic takes them to nothing ends for CREDITS", async () => {
    const r = await active({ offerId: ids['tr-billed'] }, 1000);
    await poll(r.deploymentId, 400 * GB, 0);
    await life.meter();
    const d = await dep(r.deploymentId);
    assert.ok(d.trafficMinor > 0);
    assert.ok((await balance(r.who.accountId)) <= 0, 'the credits are spent');
    assert.equal(d.terminationReason, 'CREDITS');
  });

  it('keeps a free offer free: no counters are taken and no traffic is shown', async () => {
    const r = await active({ offerId: ids['tr-free'] });
    assert.equal(await poll(r.deploymentId, 5 * GB, 5 * GB), 0);
    await life.meter();
    const d = await dep(r.deploymentId);
    assert.equal(d.trafficMinor, 0);
    const shown = (await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(r.who.auth)).body.data;
    assert.equal(shown.deployment.traffic, null);
  });
});
