import assert from 'node:assert/strict';
import { lifecycleDepsOf } from '../../src/container.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { LedgerEntry } from '../../src/modules/billing/ledger-entry.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { accrual, chargeEnd } from '../../src/modules/rentals/lifecycle/metering.js';
import { createRentalLifecycle, type RentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { assertLedgerConsistent } from '../helpers/ledger.js';
import { account, offerIds, rentOk, stepUntil } from '../helpers/rentals.js';

// A cent a second: a 60 s lease costs 60 cents, and 72 s would cost 72.
const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'lease-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 3600,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
    create: 'ok',
    destroy: 'ok',
  },
];

describe('a lease bounds what is charged: never past endsAt, however late its end is acted on', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let life: RentalLifecycle;
  let offerId: string;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    offerId = (await offerIds(ctx))['lease-h100'];
    life = createRentalLifecycle(lifecycleDepsOf(ctx.services), {
      activeBoundMs: 60_000,
      adoptBoundMs: 5000,
      sshTimeoutMs: 3000,
    });
  });
  after(() => ctx.close());

  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const usageEntries = async (rentalId: string) =>
    (await ctx.services.ds.getRepository(LedgerEntry).findBy({ rentalId, kind: 'USAGE' })).map((e) => e.amountMinor);

  /** A metered rental with a 60 s lease, ACTIVE now. */
  async function leased(): Promise<{ accountId: string; rentalId: string; deploymentId: string; endsAt: Date }> {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 10_000 });
    const r = await rentOk(ctx, who, { offerId, terminateAfterSeconds: 60 });
    await stepUntil(ctx, r.deploymentId, 'ACTIVE', (id) => life.provision(id));
    const d = await dep(r.deploymentId);
    assert.equal(d.endsAt!.getTime() - d.startedAt!.getTime(), 60_000);
    return { accountId: who.accountId, rentalId: r.rentalId, deploymentId: r.deploymentId, endsAt: d.endsAt! };
  }

  async function terminated(deploymentId: string): Promise<Deployment> {
    await stepUntil(ctx, deploymentId, 'TERMINATED', (id) => life.terminate(id));
    return dep(deploymentId);
  }

  it('cuts every charge at endsAt, before termination is requested as after', () => {
    const startedAt = new Date(1_700_000_000_000);
    const d = {
      startedAt,
      meteredUntil: startedAt,
      usageMinor: 0,
      hourlyPriceMinor: 3600,
      spendCapMinor: null,
      endsAt: new Date(startedAt.getTime() + 60_000),
      terminateRequestedAt: null,
    };
    assert.deepEqual(accrual(d, startedAt.getTime() + 72_000), { amount: 60, untilMs: startedAt.getTime() + 60_000 });
    // A request made after the end does not move it; one made before it ends the charge there.
    assert.equal(
      chargeEnd({ ...d, terminateRequestedAt: new Date(startedAt.getTime() + 72_000) }, startedAt.getTime() + 80_000),
      startedAt.getTime() + 60_000,
    );
    assert.equal(
      chargeEnd({ ...d, terminateRequestedAt: new Date(startedAt.getTime() + 30_000) }, startedAt.getTime() + 80_000),
      startedAt.getTime() + 30_000,
    );
    assert.equal(chargeEnd({ endsAt: null, terminateRequestedAt: null }, 5), 5);
  });

  it('a lease whose expiry job runs 12 s late, with no sweep in between, is charged exactly its 60 s', async () => {
    const r = await leased();
    ctx.clock.advance(72_000);
    await life.expire(r.deploymentId);
    const d = await terminated(r.deploymentId);
    assert.equal(d.terminationReason, 'EXPIRED');
    assert.equal(d.terminateRequestedAt!.getTime() - r.endsAt.getTime(), 12_000, 'the request came late');
    assert.equal(d.usageMinor, 60);
    assert.equal(d.meteredUntil!.getTime(), r.endsAt.getTime());
    assert.deepEqual(await usageEntries(r.rentalId), [-60]);
    assert.equal(
      (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: r.accountId })).balanceMinor,
      10_000 - 60,
    );
    await assertLedgerConsistent(ctx.services.ds);
  });

  it('a sweep after endsAt charges up to endsAt only, and so does the settlement of the late termination', async () => {
    const r = await leased();
    ctx.clock.advance(72_000);
    // The sweep finds the rental past its end: it charges the lease and asks for termination (EXPIRED).
    await life.meter();
    const swept = await dep(r.deploymentId);
    assert.equal(swept.usageMinor, 60);
    assert.equal(swept.meteredUntil!.getTime(), r.endsAt.getTime());
    assert.equal(swept.terminationReason, 'EXPIRED');
    ctx.clock.advance(30_000);
    await life.meter();
    await life.expire(r.deploymentId);
    const d = await terminated(r.deploymentId);
    assert.equal(d.usageMinor, 60);
    assert.equal(
      (await usageEntries(r.rentalId)).reduce((a, b) => a + b, 0),
      -60,
    );
    await assertLedgerConsistent(ctx.services.ds);
  });
});
