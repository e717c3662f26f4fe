import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import {
  outstandingReservationMinor,
  RESERVATION_MINUTES,
} from '../../src/modules/rentals/admission/credit-reservation.js';
import { MIN_BUDGET_MINOR } from '../../src/modules/rentals/admission/rental-limits.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { lifecycleDepsOf } from '../../src/container.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, addKey, offerIds, rent, rentOk, setStatus } from '../helpers/rentals.js';

const PRICE = 300;
const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'res-a',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: PRICE,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
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

  const balance = async (accountId: string) =>
    (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: accountId })).balanceMinor;
  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });

  /**
   * The admitted rentals of a parallel burst made ACTIVE through the provisioning job, then metered
   * period after period until none is ACTIVE (`afterSweep` runs after each sweep); returns the
   * deployments as they ended, after their termination has run.
   */
  async function meterUntilEnded(
    ids: string[],
    afterSweep: () => Promise<void> = async () => undefined,
  ): Promise<Deployment[]> {
    const life = createRentalLifecycle(lifecycleDepsOf(ctx.services), { sshTimeoutMs: 1500 });
    for (const id of ids) {
      for (let i = 0; i < 10 && (await dep(id)).status !== 'ACTIVE'; i++) await life.provision(id);
      assert.equal((await dep(id)).status, 'ACTIVE');
    }
    let ended: Deployment[] = [];
    for (let i = 0; i < 400; i++) {
      ctx.clock.advance(ctx.config.rentals.meteringEveryMs);
      await life.meter();
      await afterSweep();
      ended = await Promise.all(ids.map(dep));
      if (ended.every((d) => d.status !== 'ACTIVE')) break;
    }
    for (const id of ids) await life.terminate(id);
    return ended;
  }

  /** What `rentals` admitted rentals at PRICE accrue together in one metering period. */
  const onePeriodOf = (rentals: number) =>
    Math.ceil((rentals * PRICE * ctx.config.rentals.meteringEveryMs) / 3_600_000);

  it('reserves the first hour at the price, or the cap when smaller, less usage already posted', () => {
    assert.equal(RESERVATION_MINUTES, 60);
    assert.equal(outstandingReservationMinor({ hourlyPriceMinor: 300, spendCapMinor: null, usageMinor: 0 }), 300);
    assert.equal(outstandingReservationMinor({ hourlyPriceMinor: 300, spendCapMinor: 120, usageMinor: 0 }), 120);
    assert.equal(outstandingReservationMinor({ hourlyPriceMinor: 300, spendCapMinor: 10_000, usageMinor: 100 }), 200);
    assert.equal(outstandingReservationMinor({ hourlyPriceMinor: 300, spendCapMinor: null, usageMinor: 450 }), 0);
  });

  for (const covered of [1, 3]) {
    it(`admits exactly ${covered} of 10 parallel metered rentals when credits cover ${covered}; metering overdraws by at most one period`, async () => {
      // Credits for `covered` reservations and a third of another one.
      const owner = await account(ctx, {
        kind: 'OWNER',
        creditsMinor: covered * PRICE + 100,
        scopes: ['read', 'rent', 'manage', 'billing'],
        maxConcurrentDeployments: 50,
      });
      const results = await Promise.all(Array.from({ length: 10 }, () => rent(ctx, owner, { offerId: offer })));
      const admitted = results.filter((r) => r.status === 201);
      assert.equal(admitted.length, covered, results.map((r) => `${r.status} ${r.body.error?.code ?? ''}`).join(', '));
      for (const r of results.filter((x) => x.status !== 201)) {
        assert.equal(r.status, 402);
        assert.equal(r.body.error.code, 'INSUFFICIENT_CREDITS');
        assert.match(r.body.error.message, /reserved/);
      }

      const ids: string[] = admitted.map((r) => r.body.data.deploymentId);
      const onePeriod = onePeriodOf(covered);
      let lowest = Infinity;
      const ended = await meterUntilEnded(ids, async () => {
        lowest = Math.min(lowest, await balance(owner.accountId));
      });
      assert.ok(
        ended.every((d) => d.terminationReason === 'CREDITS'),
        ended.map((d) => d.terminationReason).join(),
      );
      assert.ok(lowest <= 0, `metering ran the credits out (lowest balance ${lowest})`);
      assert.ok(lowest >= -onePeriod, `balance ${lowest} went below -${onePeriod}, one metering period of accrual`);
    });
  }

  for (const covered of [1, 3]) {
    it(`admits exactly ${covered} of 10 parallel metered rentals of one key whose budget covers ${covered}; metering overspends it by at most one period`, async () => {
      // Plenty of credits: the key's budget, covering `covered` reservations and a third of another, is the limit.
      const budget = covered * PRICE + 100;
      const key = await account(ctx, { creditsMinor: 100_000, budgetLimitMinor: budget, maxConcurrentDeployments: 50 });
      const results = await Promise.all(Array.from({ length: 10 }, () => rent(ctx, key, { offerId: offer })));
      const admitted = results.filter((r) => r.status === 201);
      assert.equal(admitted.length, covered, results.map((r) => `${r.status} ${r.body.error?.code ?? ''}`).join(', '));
      for (const r of results.filter((x) => x.status !== 201)) {
        assert.equal(r.status, 403);
        assert.equal(r.body.error.code, 'KEY_LIMIT_EXCEEDED');
        assert.match(r.body.error.message, /reserved/);
      }

      const ids: string[] = admitted.map((r) => r.body.data.deploymentId);
      const onePeriod = onePeriodOf(covered);
      const ended = await meterUntilEnded(ids);
      assert.ok(
        ended.every((d) => d.terminationReason === 'KEY_BUDGET'),
        ended.map((d) => d.terminationReason).join(),
      );
      const [{ net }] = await ctx.services.ds.query(`SELECT net_spent_minor AS net FROM api_keys WHERE id = ?`, [
        key.keyId,
      ]);
      assert.ok(Number(net) >= budget, `metering ran the budget out (net spend ${net})`);
      assert.ok(
        Number(net) <= budget + onePeriod,
        `net spend ${net} went past ${budget} + ${onePeriod}, one metering period of accrual`,
      );
    });
  }

  it("counts a key's own live reservations against its budget, not another key's, and frees them as they end", async () => {
    const key = await account(ctx, {
      creditsMinor: 100_000,
      budgetLimitMinor: 2 * PRICE,
      maxConcurrentDeployments: 50,
    });
    const sibling = await addKey(ctx, key.accountId, { budgetLimitMinor: PRICE, maxConcurrentDeployments: 50 });
    const first = await rentOk(ctx, key, { offerId: offer });
    await rentOk(ctx, sibling, { offerId: offer });
    await rentOk(ctx, key, { offerId: offer });
    const third = await rent(ctx, key, { offerId: offer, budgetMinor: MIN_BUDGET_MINOR });
    assert.equal(third.status, 403, JSON.stringify(third.body));
    assert.equal(third.body.error.code, 'KEY_LIMIT_EXCEEDED');
    await setStatus(ctx, first.deploymentId, 'TERMINATED');
    await rentOk(ctx, key, { offerId: offer });
  });

  it('counts what other live rentals have not used yet, and frees it as usage is posted or they end', async () => {
    const owner = await account(ctx, {
      kind: 'OWNER',
      creditsMinor: 2 * PRICE,
      scopes: ['read', 'rent', 'manage', 'billing'],
      maxConcurrentDeployments: 50,
    });
    const first = await rentOk(ctx, owner, { offerId: offer });
    const second = await rentOk(ctx, owner, { offerId: offer });
    const third = await rent(ctx, owner, { offerId: offer });
    assert.equal(third.status, 402);
    // A capped rental needs only its cap; nothing is left unreserved for it either.
    assert.equal((await rent(ctx, owner, { offerId: offer, budgetMinor: MIN_BUDGET_MINOR })).status, 402);
    await setStatus(ctx, first.deploymentId, 'TERMINATED');
    await rentOk(ctx, owner, { offerId: offer });
    await setStatus(ctx, second.deploymentId, 'FAILED');
    await rentOk(ctx, owner, { offerId: offer, budgetMinor: MIN_BUDGET_MINOR });
  });
});
