import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { outstandingReservationMinor, RESERVATION_MINUTES } from '../../src/modules/billing/credit-reservation.js';
import { Deployment } from '../../src/modules/rentals/deployment.entity.js';
import { RentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, offerIds, rent, rentOk, setStatus } from '../helpers/rentals.js';

const PRICE = 300;
const OFFERS: LocalInventoryOffer[] = [
  { key: 'res-a', name: 'NVIDIA H100 SXM', category: 'datacenter', vramGb: 80, gpuCount: 1, pricePerHourMinor: PRICE, maximumDurationSeconds: 86400, provisionSeconds: 0 },
];

describe('credit reservations of metered rentals', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let offer: string;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { METERING_EVERY_MS: '60000' } });
    offer = (await offerIds(ctx))['res-a'];
  });
  after(async () => {
    await ctx.services.ds.query(`DELETE FROM agenda_jobs WHERE name LIKE 'rental.%'`);
    await ctx.close();
  });

  const balance = async (accountId: string) => (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: accountId })).balanceMinor;

  it('reserves the first hour at the price, or the cap when smaller, less usage already posted', () => {
    assert.equal(RESERVATION_MINUTES, 60);
    assert.equal(outstandingReservationMinor({ hourlyPriceMinor: 300, spendCapMinor: null, usageMinor: 0 }), 300);
    assert.equal(outstandingReservationMinor({ hourlyPriceMinor: 300, spendCapMinor: 120, usageMinor: 0 }), 120);
    assert.equal(outstandingReservationMinor({ hourlyPriceMinor: 300, spendCapMinor: 10_000, usageMinor: 100 }), 200);
    assert.equal(outstandingReservationMinor({ hourlyPriceMinor: 300, spendCapMinor: null, usageMinor: 450 }), 0);
  });

  it('admits exactly as many of 10 parallel metered rentals as the credits cover; metering overdraws by at most one period', async () => {
    // Credits for one rental's reservation and a third of another's.
    const owner = await account(ctx, { kind: 'OWNER', creditsMinor: PRICE + 100, scopes: ['read', 'rent', 'manage', 'billing'], maxConcurrentDeployments: 50 });
    const results = await Promise.all(Array.from({ length: 10 }, () => rent(ctx, owner, { offerId: offer })));
    const admitted = results.filter((r) => r.status === 201);
    assert.equal(admitted.length, 1, results.map((r) => `${r.status} ${r.body.error?.code ?? ''}`).join(', '));
    for (const r of results.filter((x) => x.status !== 201)) {
      assert.equal(r.status, 402);
      assert.equal(r.body.error.code, 'INSUFFICIENT_CREDITS');
      assert.match(r.body.error.message, /reserved/);
    }

    const life = new RentalLifecycle(ctx.services, { sshTimeoutMs: 1500 });
    const deploymentId: string = admitted[0].body.data.deploymentId;
    for (let i = 0; i < 10 && (await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: deploymentId })).status !== 'ACTIVE'; i++) {
      await life.provision(deploymentId);
    }
    const periodMs = ctx.config.meteringEveryMs;
    const onePeriod = Math.ceil((PRICE * periodMs) / 3_600_000);
    let lowest = Infinity;
    for (let i = 0; i < 200; i++) {
      ctx.clock.advance(periodMs);
      await life.meter();
      lowest = Math.min(lowest, await balance(owner.accountId));
      const d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: deploymentId });
      if (d.status !== 'ACTIVE') {
        assert.equal(d.terminationReason, 'CREDITS');
        break;
      }
    }
    assert.ok(lowest <= 0, `metering ran the credits out (lowest balance ${lowest})`);
    assert.ok(lowest >= -onePeriod, `balance ${lowest} went below -${onePeriod}, one metering period of accrual`);
    await life.terminate(deploymentId);
  });

  it('counts what other live rentals have not used yet, and frees it as usage is posted or they end', async () => {
    const owner = await account(ctx, { kind: 'OWNER', creditsMinor: 2 * PRICE, scopes: ['read', 'rent', 'manage', 'billing'], maxConcurrentDeployments: 50 });
    const first = await rentOk(ctx, owner, { offerId: offer });
    const second = await rentOk(ctx, owner, { offerId: offer });
    const third = await rent(ctx, owner, { offerId: offer });
    assert.equal(third.status, 402);
    // A capped rental needs only its cap; nothing is left unreserved for it either.
    assert.equal((await rent(ctx, owner, { offerId: offer, budgetMinor: 1 })).status, 402);
    await setStatus(ctx, first.deploymentId, 'TERMINATED');
    await rentOk(ctx, owner, { offerId: offer });
    await setStatus(ctx, second.deploymentId, 'FAILED');
    await rentOk(ctx, owner, { offerId: offer, budgetMinor: 100 });
  });
});
