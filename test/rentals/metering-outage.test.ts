import assert from 'node:assert/strict';
import { lifecycleDepsOf } from '../../src/container.js';
import { AppError } from '../../src/errors/app-error.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { assertMeteringCaughtUp } from '../../src/modules/rentals/admission/admission-guards.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { createRentalLifecycle, type RentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { METERING_LAG_MIN_MS, METERING_LAG_PERIODS } from '../../src/modules/rentals/admission/rental-limits.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { assertLedgerConsistent } from '../helpers/ledger.js';
import { account, offerIds, rent, rentOk, stepUntil } from '../helpers/rentals.js';

const base = {
  name: 'NVIDIA H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  maximumDurationSeconds: 86400,
  provisionSeconds: 0,
  create: 'ok' as const,
  destroy: 'ok' as const,
};
const OFFERS: LocalInventoryOffer[] = [
  { ...base, key: 'mo-fast', pricePerHourMinor: 3600 },
  { ...base, key: 'mo-slow', pricePerHourMinor: 360 },
];

describe('metering across a worker outage: admission waits for billing, and the stated overdraft bound holds', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let life: RentalLifecycle;
  let ids: Record<string, string>;
  let periodMs: number;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    ids = await offerIds(ctx);
    life = createRentalLifecycle(lifecycleDepsOf(ctx.services), {
      activeBoundMs: 60_000,
      adoptBoundMs: 5000,
      sshTimeoutMs: 3000,
    });
    periodMs = ctx.config.rentals.meteringEveryMs;
  });
  after(() => ctx.close());

  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const balance = async (accountId: string) =>
    (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: accountId })).balanceMinor;

  async function running(who: SignedUp, offerId: string): Promise<string> {
    const r = await rentOk(ctx, who, { offerId });
    await stepUntil(ctx, r.deploymentId, 'ACTIVE', (id) => life.provision(id));
    return r.deploymentId;
  }

  it('judges the lag by what each running rental may still be charged', () => {
    const now = new Date(1_700_000_000_000);
    const ago = (ms: number) => new Date(now.getTime() - ms);
    const bound = Math.max(METERING_LAG_PERIODS * 15_000, METERING_LAG_MIN_MS);
    const fresh = { meteredUntil: ago(bound), endsAt: null, terminateRequestedAt: null };
    assert.doesNotThrow(() =>
      assertMeteringCaughtUp([fresh, { meteredUntil: null, endsAt: null, terminateRequestedAt: null }], now, 15_000),
    );
    // Charged up to its end or its termination request, a rental owes nothing more, however long ago that was.
    assert.doesNotThrow(() =>
      assertMeteringCaughtUp(
        [{ meteredUntil: ago(3600_000), endsAt: ago(3600_000), terminateRequestedAt: null }],
        now,
        15_000,
      ),
    );
    assert.doesNotThrow(() =>
      assertMeteringCaughtUp(
        [{ meteredUntil: ago(3600_000), endsAt: null, terminateRequestedAt: ago(3600_000) }],
        now,
        15_000,
      ),
    );
    assert.throws(
      () =>
        assertMeteringCaughtUp(
          [fresh, { meteredUntil: ago(bound + 1000), endsAt: null, terminateRequestedAt: null }],
          now,
          15_000,
        ),
      (err: unknown) => err instanceof AppError && err.code === 'UNAVAILABLE' && err.headers['Retry-After'] === '15',
    );
  });

  it("refuses the account's new rentals while its running rental has gone unmetered, and admits again once the sweep has run", async () => {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 20_000 });
    await running(who, ids['mo-fast']);
    const bound = Math.max(METERING_LAG_PERIODS * periodMs, METERING_LAG_MIN_MS);
    ctx.clock.advance(bound);
    assert.equal((await rent(ctx, who, { offerId: ids['mo-fast'] })).status, 201, 'within the bound');

    // The worker is away: no sweep moves the rental's metering moment on.
    ctx.clock.advance(300_000);
    const refused = await rent(ctx, who, { offerId: ids['mo-fast'] });
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'UNAVAILABLE');
    assert.match(refused.body.error.message, /Billing is catching up/);
    assert.equal(refused.headers['retry-after'], String(Math.ceil(periodMs / 1000)));
    // An account without running rentals has exact credits: it is not held up.
    const other = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 20_000 });
    assert.equal((await rent(ctx, other, { offerId: ids['mo-fast'] })).status, 201);

    await life.meter();
    assert.equal((await rent(ctx, who, { offerId: ids['mo-fast'] })).status, 201, 'metering caught up');
  });

  it("overdraws by the accrual of the outage, no more: on the worker's return one sweep charges it and ends the rental out of credit", async () => {
    // 360 cents an hour: credits for 400 cents cover the rental's one-hour reservation.
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 400 });
    const id = await running(who, ids['mo-slow']);
    const startedAt = (await dep(id)).startedAt!.getTime();
    ctx.clock.advance(2 * 3600_000);
    const during = await rent(ctx, who, { offerId: ids['mo-slow'] });
    assert.equal(during.status, 503, 'no rental starts on credits already used');

    await life.meter();
    const d = await dep(id);
    const accrued = Math.floor((Math.floor((ctx.clock.now().getTime() - startedAt) / 1000) * 360) / 3600);
    assert.equal(accrued, 720);
    assert.equal(d.usageMinor, accrued);
    assert.equal(await balance(who.accountId), 400 - accrued);
    assert.equal(d.status, 'TERMINATING');
    assert.equal(d.terminationReason, 'CREDITS');
    // Charged to the instant of its end: what admission says now is about the real balance.
    const after = await rent(ctx, who, { offerId: ids['mo-slow'] });
    assert.equal(after.status, 402, JSON.stringify(after.body));
    assert.equal(after.body.error.code, 'ACCOUNT_FROZEN');
    await stepUntil(ctx, id, 'TERMINATED', (id) => life.terminate(id));
    assert.equal(await balance(who.accountId), 400 - accrued, 'nothing accrues after the request');
    await assertLedgerConsistent(ctx.services.ds);
  });
});
