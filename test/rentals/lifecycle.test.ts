import assert from 'node:assert/strict';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, sshProbe } from '../../src/providers/ssh-probe.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import { LedgerEntry } from '../../src/modules/billing/ledger-entry.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { DeploymentAttempt } from '../../src/modules/rentals/store/deployment-attempt.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import {
  createRentalLifecycle,
  instanceLabel,
  type LifecycleTiming,
  type RentalLifecycle,
} from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { lifecycleDepsOf } from '../../src/container.js';
import type { CreateMode, DestroyMode, LocalInventoryOffer } from '../../plugins/local/inventory.js';
import type { CreateResult } from '../../src/providers/provider.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, offerIds, queuedJobs, rentOk } from '../helpers/rentals.js';
import { CardRentalHandoff } from '../../src/modules/rentals/lifecycle/rental-handoff.service.js';
import type { SignedUp } from '../helpers/factories.js';

const TIMING: Partial<LifecycleTiming> = {
  adoptBoundMs: 5000,
  activeBoundMs: 60_000,
  sshTimeoutMs: 1500,
  verifyAlertAfter: 2,
};

function offers(
  modes: { a?: CreateMode; b?: CreateMode; c?: CreateMode; destroy?: DestroyMode } = {},
): LocalInventoryOffer[] {
  const base = {
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
    destroy: modes.destroy ?? 'ok',
  };
  return [
    { ...base, key: 'lc-a', pricePerHourMinor: 300, create: modes.a ?? 'ok' },
    { ...base, key: 'lc-b', pricePerHourMinor: 360, create: modes.b ?? 'ok' },
    { ...base, key: 'lc-c', pricePerHourMinor: 420, create: modes.c ?? 'ok' },
  ];
}

describe('rental lifecycle (job handlers)', function () {
  this.timeout(30_000);
  let ctx: TestContext;
  let ids: Record<string, string>;
  let life: RentalLifecycle;
  const intent = { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 1000 };

  before(async () => {
    ctx = await createTestContext({ offers: offers() });
    ids = await offerIds(ctx);
    life = createRentalLifecycle(lifecycleDepsOf(ctx.services), TIMING);
  });
  after(() => ctx.close());

  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const order = (id: string) => ctx.services.ds.getRepository(Order).findOneByOrFail({ id });
  const attempts = (id: string) =>
    ctx.services.ds.getRepository(DeploymentAttempt).find({ where: { deploymentId: id }, order: { attempt: 'ASC' } });
  const balance = async (accountId: string) =>
    (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: accountId })).balanceMinor;
  const instancesOf = async (deploymentId: string): Promise<number> =>
    Number(
      (
        await ctx.services.ds.query(`SELECT COUNT(*) AS n FROM local_provider_instances WHERE label LIKE ?`, [
          `%${deploymentId}%`,
        ])
      )[0].n,
    );
  const keyOf = (d: Deployment) => SecretBox.fromConfig(ctx.config).open(d.sshPrivateKeyEnc!, d.sshKeyKid!, d.id);
  const target = (d: Deployment) => ({ host: d.sshHost!, port: d.sshPort!, user: d.sshUser!, privateKey: keyOf(d) });

  async function legacy(
    body: object,
    credits = 5000,
  ): Promise<{ who: SignedUp; rentalId: string; deploymentId: string }> {
    const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: credits });
    const r = await rentOk(ctx, who, { ...body, budgetMinor: 600 });
    return { who, rentalId: r.rentalId, deploymentId: r.deploymentId };
  }
  async function metered(body: object, credits = 5000, extra: object = {}) {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: credits });
    const r = await rentOk(ctx, who, { ...body, ...extra });
    return { who, rentalId: r.rentalId, deploymentId: r.deploymentId };
  }
  /** Runs provisioning as the worker would (each run may re-schedule itself) until it settles. */
  async function activate(id: string) {
    for (let i = 0; i < 10; i++) {
      await life.provision(id);
      if ((await dep(id)).status !== 'PROVISIONING') break;
    }
    assert.equal((await dep(id)).status, 'ACTIVE');
  }
  async function terminateViaApi(who: SignedUp, deploymentId: string) {
    const res = await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(who.auth);
    assert.equal(res.status, 202, JSON.stringify(res.body));
  }

  it('explicit offer ok: sealed key, attempt recorded, ACTIVE with endsAt; a second run changes nothing; terminate verifies and refuses the key', async () => {
    await ctx.setInventory(offers());
    const { who, deploymentId } = await legacy({ offerId: ids['lc-a'] });
    await life.provision(deploymentId);
    await life.provision(deploymentId);
    const d = await dep(deploymentId);
    assert.equal(d.status, 'ACTIVE');
    assert.equal((await order(d.orderId)).status, 'ACTIVE');
    assert.ok(d.startedAt && d.endsAt);
    assert.equal(d.endsAt.getTime() - d.startedAt.getTime(), 2 * 3600 * 1000);
    assert.equal(d.sshKeyKid, ctx.config.secrets.keyId);
    assert.ok(!d.sshPrivateKeyEnc!.toString('latin1').includes('PRIVATE KEY'));
    const as = await attempts(deploymentId);
    assert.deepEqual(
      as.map((a) => [a.attempt, a.outcome, a.label]),
      [[1, 'CREATED', instanceLabel(deploymentId, 1)]],
    );
    assert.equal(await instancesOf(deploymentId), 1);
    const smi = await sshExec(target(d), 'nvidia-smi');
    assert.match(smi.stdout, /H100/);

    await terminateViaApi(who, deploymentId);
    await life.terminate(deploymentId);
    await life.terminate(deploymentId);
    const t = await dep(deploymentId);
    assert.equal(t.status, 'TERMINATED');
    assert.equal((await order(t.orderId)).status, 'TERMINATED');
    assert.ok(t.endedAt);
    assert.equal((await sshProbe(target(d), { timeoutMs: 1500 })).ok, false);
    // Voluntary legacy termination returns no credit.
    assert.equal(await balance(who.accountId), 5000 - 600);
  });

  it('explicit offer unavailable: FAILED with OFFER_NOT_FOUND, debit reversed exactly once across two runs, nothing else tried', async () => {
    await ctx.setInventory(offers({ a: 'unavailable' }));
    const { who, deploymentId, rentalId } = await legacy({ offerId: ids['lc-a'] });
    assert.equal(await balance(who.accountId), 4400);
    await life.provision(deploymentId);
    await life.provision(deploymentId);
    const o = await order(rentalId);
    assert.equal(o.status, 'FAILED');
    assert.equal(o.failureCode, 'OFFER_NOT_FOUND');
    assert.equal(o.reversalStatus, 'SUCCEEDED');
    assert.ok(o.failureReason && !/gpr-|local/.test(o.failureReason));
    assert.equal((await dep(deploymentId)).status, 'FAILED');
    assert.equal(await balance(who.accountId), 5000);
    const reversals = await ctx.services.ds.getRepository(LedgerEntry).findBy({ rentalId, kind: 'REVERSAL' });
    assert.equal(reversals.length, 1);
    assert.equal((await attempts(deploymentId)).length, 1);
  });

  it('fail (for the sweeps): a PENDING legacy rental FAILED with its debit back once across two calls', async () => {
    const { who, deploymentId, rentalId } = await legacy({ offerId: ids['lc-a'] });
    assert.equal(await balance(who.accountId), 4400);
    await life.fail(deploymentId, 'PROVISIONING_TIMEOUT', 'The machine could not be started.');
    await life.fail(deploymentId, 'PROVISIONING_TIMEOUT', 'The machine could not be started.');
    const o = await order(rentalId);
    assert.equal(o.status, 'FAILED');
    assert.equal(o.reversalStatus, 'SUCCEEDED');
    assert.equal((await dep(deploymentId)).status, 'FAILED');
    assert.equal(await balance(who.accountId), 5000);
    assert.equal((await ctx.services.ds.getRepository(LedgerEntry).findBy({ rentalId, kind: 'REVERSAL' })).length, 1);
  });

  it('GPU intent: falls back on unavailable to the next candidate in price order', async () => {
    await ctx.setInventory(offers({ a: 'unavailable' }));
    const { deploymentId } = await metered(intent);
    await life.provision(deploymentId);
    const d = await dep(deploymentId);
    assert.equal(d.status, 'ACTIVE');
    assert.equal(d.offerId, ids['lc-b']);
    assert.equal(d.hourlyPriceMinor, 360);
    assert.ok(d.meteredUntil && d.meteredUntil.getTime() === d.startedAt!.getTime());
    assert.deepEqual(
      (await attempts(deploymentId)).map((a) => a.outcome),
      ['UNAVAILABLE', 'CREATED'],
    );
  });

  it('GPU intent: all three unavailable → FAILED, metered reversal SUCCEEDED with nothing charged', async () => {
    await ctx.setInventory(offers({ a: 'unavailable', b: 'unavailable', c: 'unavailable' }));
    const { who, deploymentId, rentalId } = await metered(intent);
    await life.provision(deploymentId);
    const o = await order(rentalId);
    assert.equal(o.status, 'FAILED');
    assert.equal(o.reversalStatus, 'SUCCEEDED');
    assert.equal((await attempts(deploymentId)).length, 3);
    assert.equal(await balance(who.accountId), 5000);
  });

  it('ambiguous-created: stops the search and adopts the instance by label; exactly one instance', async () => {
    await ctx.setInventory(offers({ a: 'ambiguous-created' }));
    const { deploymentId } = await metered(intent);
    await life.provision(deploymentId);
    await life.provision(deploymentId);
    const d = await dep(deploymentId);
    assert.equal(d.status, 'ACTIVE');
    assert.deepEqual(
      (await attempts(deploymentId)).map((a) => a.outcome),
      ['ADOPTED'],
    );
    assert.equal(await instancesOf(deploymentId), 1);
  });

  it('ambiguous-none: keeps looking by label within the bound, never creates another, then FAILED with reversal', async () => {
    await ctx.setInventory(offers({ a: 'ambiguous-none' }));
    const { who, deploymentId, rentalId } = await legacy(intent);
    await life.provision(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'PROVISIONING');
    ctx.clock.advance(2000);
    await life.provision(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'PROVISIONING');
    ctx.clock.advance(5000);
    await life.provision(deploymentId);
    const o = await order(rentalId);
    assert.equal(o.status, 'FAILED');
    assert.equal(o.reversalStatus, 'SUCCEEDED');
    assert.deepEqual(
      (await attempts(deploymentId)).map((a) => a.outcome),
      ['NOT_FOUND'],
    );
    assert.equal(await instancesOf(deploymentId), 0);
    assert.equal(await balance(who.accountId), 5000);
  });

  it('fail: the provider reports failed → FAILED, instance destroyed, reversal', async () => {
    await ctx.setInventory(offers({ a: 'fail' }));
    const { who, deploymentId, rentalId } = await legacy({ offerId: ids['lc-a'] });
    await life.provision(deploymentId);
    const o = await order(rentalId);
    assert.equal(o.status, 'FAILED');
    assert.equal(o.failureCode, 'PROVISIONING_FAILED');
    const live = await ctx.services.ds.query(`SELECT state FROM local_provider_instances WHERE label LIKE ?`, [
      `%${deploymentId}%`,
    ]);
    assert.deepEqual(
      live.map((r: { state: string }) => r.state),
      ['destroyed'],
    );
    assert.equal(await balance(who.accountId), 5000);
  });

  it('a re-run after a crash mid-create adopts the instance by label instead of creating another', async () => {
    await ctx.setInventory(offers());
    const { deploymentId } = await metered({ offerId: ids['lc-a'] });
    // Simulate a crash after the provider created the machine but before its answer was recorded.
    await life.provision(deploymentId);
    const d = await dep(deploymentId);
    await ctx.services.ds
      .getRepository(DeploymentAttempt)
      .update({ deploymentId }, { outcome: 'STARTED', instanceId: null });
    await ctx.services.ds
      .getRepository(Deployment)
      .update({ id: deploymentId }, { instanceId: null, status: 'PROVISIONING' });
    // Asking create again instead of looking the label up would fail this test, whatever the provider did.
    const provider = ctx.services.providers.get('local');
    const create = provider.create;
    let creates = 0;
    provider.create = (...args) => {
      creates++;
      return create.apply(provider, args);
    };
    try {
      await life.provision(deploymentId);
    } finally {
      provider.create = create;
    }
    assert.equal(creates, 0, 'the re-run called create');
    const again = await dep(deploymentId);
    assert.equal(again.instanceId, d.instanceId);
    assert.equal(await instancesOf(deploymentId), 1);
  });

  /** Answers the next create calls of the local provider as a cloud's 429 or 4xx would, then lets it create. */
  async function withCreateAnswers<T>(answers: CreateResult[], run: (calls: string[]) => Promise<T>): Promise<T> {
    const provider = ctx.services.providers.get('local');
    const create = provider.create;
    const calls: string[] = [];
    provider.create = async (label, ...rest) => {
      calls.push(label);
      return answers.shift() ?? create.call(provider, label, ...rest);
    };
    try {
      return await run(calls);
    } finally {
      provider.create = create;
    }
  }

  it('throttled: asks again with the same label once the wait is over, and never before', async () => {
    await ctx.setInventory(offers());
    const { deploymentId } = await metered(intent);
    await withCreateAnswers(
      [{ kind: 'throttled', reason: '429 Too Many Requests', retryAfterMs: 30_000 }],
      async (calls) => {
        await life.provision(deploymentId);
        assert.deepEqual(
          (await attempts(deploymentId)).map((a) => [a.attempt, a.outcome]),
          [[1, 'THROTTLED']],
        );
        await life.provision(deploymentId);
        assert.equal(calls.length, 1, 'not asked again before retryAfter');
        ctx.clock.advance(30_000);
        await activate(deploymentId);
        assert.deepEqual(calls, [instanceLabel(deploymentId, 1), instanceLabel(deploymentId, 1)]);
      },
    );
    assert.deepEqual(
      (await attempts(deploymentId)).map((a) => [a.attempt, a.outcome]),
      [[1, 'CREATED']],
    );
  });

  it('rejected: FAILED with PROVIDER_REJECTED at once, the reason logged for the operator, no other candidate tried', async () => {
    await ctx.setInventory(offers());
    const { who, deploymentId, rentalId } = await legacy(intent);
    const errors: unknown[] = [];
    const logger = Object.create(ctx.services.logger, { error: { value: (o: unknown) => void errors.push(o) } });
    const watched = createRentalLifecycle({ ...lifecycleDepsOf(ctx.services), logger }, TIMING);
    await withCreateAnswers([{ kind: 'rejected', reason: 'image refused: invalid image name' }], async (calls) => {
      await watched.provision(deploymentId);
      assert.equal(calls.length, 1);
    });
    const o = await order(rentalId);
    assert.equal(o.status, 'FAILED');
    assert.equal(o.failureCode, 'PROVIDER_REJECTED');
    assert.ok(o.failureReason && !/image/.test(o.failureReason));
    assert.equal(o.reversalStatus, 'SUCCEEDED');
    assert.equal(await balance(who.accountId), 5000);
    assert.ok(errors.some((e) => (e as { reason?: string }).reason === 'image refused: invalid image name'));
  });

  it('afterDestroyed: called with the label once destruction is verified; a failure never holds up TERMINATED and the reconciler calls again', async () => {
    await ctx.setInventory(offers());
    const { who, deploymentId } = await metered({ offerId: ids['lc-a'] });
    await activate(deploymentId);
    const provider = ctx.services.providers.get('local');
    const calls: string[] = [];
    let fail = true;
    provider.afterDestroyed = async (label) => {
      calls.push(label);
      if (fail) throw new Error('key registry unreachable');
    };
    try {
      await terminateViaApi(who, deploymentId);
      await life.terminate(deploymentId);
      assert.equal((await dep(deploymentId)).status, 'TERMINATED');
      assert.deepEqual(calls, [instanceLabel(deploymentId, 1)]);
      fail = false;
      await life.reconcile();
      assert.deepEqual(calls, [instanceLabel(deploymentId, 1), instanceLabel(deploymentId, 1)]);
      await life.reconcile();
      assert.equal(calls.length, 2, 'not called again once it went through');
    } finally {
      delete provider.afterDestroyed;
    }
  });

  it('terminating a PENDING deployment stops provisioning: no create call, TERMINATED', async () => {
    await ctx.setInventory(offers());
    const { who, deploymentId } = await metered({ offerId: ids['lc-a'] });
    await terminateViaApi(who, deploymentId);
    await life.provision(deploymentId);
    assert.equal(await instancesOf(deploymentId), 0);
    await life.terminate(deploymentId);
    const d = await dep(deploymentId);
    assert.equal(d.status, 'TERMINATED');
    assert.equal(d.terminationReason, 'REQUESTED');
  });

  for (const mode of ['ignore', 'ghost'] as const) {
    it(`destroy ${mode}: never TERMINATED while the instance lives, alerts, then TERMINATED once destruction works`, async () => {
      await ctx.setInventory(offers({ destroy: mode }));
      const { who, deploymentId } = await metered({ offerId: ids['lc-a'] });
      await activate(deploymentId);
      const active = await dep(deploymentId);
      await terminateViaApi(who, deploymentId);
      const alerts: unknown[] = [];
      const logger = Object.create(ctx.services.logger, { error: { value: (o: unknown) => void alerts.push(o) } });
      const watched = createRentalLifecycle({ ...lifecycleDepsOf(ctx.services), logger }, TIMING);
      await watched.terminate(deploymentId);
      assert.equal(alerts.length, 0);
      await watched.terminate(deploymentId);
      // verifyAlertAfter is 2 here: the second failed check alerts, naming the deployment.
      assert.equal((alerts[0] as { deploymentId: string }).deploymentId, deploymentId);
      const stuck = await dep(deploymentId);
      assert.equal(stuck.status, 'TERMINATING');
      assert.equal(stuck.endedAt, null);
      assert.equal(stuck.verifyAttempts, 2);
      if (mode === 'ghost') assert.equal((await sshProbe(target(active), { timeoutMs: 1500 })).ok, true);
      await ctx.setInventory(offers());
      await life.terminate(deploymentId);
      const done = await dep(deploymentId);
      assert.equal(done.status, 'TERMINATED');
      assert.ok(done.endedAt);
      assert.equal((await sshProbe(target(active), { timeoutMs: 1500 })).ok, false);
      const endedAt = done.endedAt.getTime();
      ctx.clock.advance(10_000);
      await life.terminate(deploymentId);
      assert.equal((await dep(deploymentId)).endedAt!.getTime(), endedAt);
    });
  }

  it('terminated while PROVISIONING with its machine up: the SSH probe still runs, so a ghost is never TERMINATED', async () => {
    await ctx.setInventory(offers({ destroy: 'ghost' }).map((o) => ({ ...o, provisionSeconds: 2 })));
    const { who, deploymentId } = await metered({ offerId: ids['lc-a'] });
    await life.provision(deploymentId);
    const created = await dep(deploymentId);
    assert.equal(created.status, 'PROVISIONING');
    assert.ok(created.instanceId);
    ctx.clock.advance(3000);
    await terminateViaApi(who, deploymentId);
    await life.terminate(deploymentId);
    const stuck = await dep(deploymentId);
    assert.equal(stuck.status, 'TERMINATING', stuck.lastCheckDetail ?? '');
    assert.ok(stuck.sshHost && stuck.sshPort, 'the address was learned before the destroy');
    assert.equal((await sshProbe(target(stuck), { timeoutMs: 1500 })).ok, true, 'the ghost still lets the key in');
    await ctx.setInventory(offers().map((o) => ({ ...o, provisionSeconds: 2 })));
    await life.terminate(deploymentId);
    const done = await dep(deploymentId);
    assert.equal(done.status, 'TERMINATED');
    assert.equal(done.startedAt, null);
    assert.equal((await sshProbe(target(stuck), { timeoutMs: 1500 })).ok, false);
  });

  it('legacy rentals expire at endsAt with reason EXPIRED', async () => {
    await ctx.setInventory(offers());
    const { deploymentId } = await legacy({ offerId: ids['lc-a'] });
    await activate(deploymentId);
    await life.expire(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'ACTIVE');
    ctx.clock.advance(2 * 3600 * 1000);
    await life.expire(deploymentId);
    const d = await dep(deploymentId);
    assert.equal(d.status, 'TERMINATING');
    assert.equal(d.terminationReason, 'EXPIRED');
    await life.terminate(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'TERMINATED');
  });

  it('reconciler ends an overdue legacy rental whose expiry job was lost', async () => {
    await ctx.setInventory(offers());
    const { deploymentId } = await legacy({ offerId: ids['lc-a'] });
    await activate(deploymentId);
    await ctx.services.ds.query(`DELETE FROM agenda_jobs WHERE unique_key = ?`, [deploymentId]);
    assert.equal((await life.reconcile()).redriven.includes(deploymentId), false, 'not before endsAt');
    assert.equal((await dep(deploymentId)).status, 'ACTIVE');
    ctx.clock.advance(2 * 3600 * 1000);
    const out = await life.reconcile();
    assert.ok(out.redriven.includes(deploymentId));
    const d = await dep(deploymentId);
    assert.equal(d.status, 'TERMINATING');
    assert.equal(d.terminationReason, 'EXPIRED');
    await life.terminate(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'TERMINATED');
  });

  describe('metering', () => {
    it('charges per-second usage, posts it once per rental-hour, stops at the termination request and settles the rest', async () => {
      await ctx.setInventory(offers());
      const one = await metered({ offerId: ids['lc-a'] }, 100_000);
      const two = await metered({ offerId: ids['lc-a'] }, 100_000);
      await activate(one.deploymentId);
      await activate(two.deploymentId);
      ctx.clock.advance(3600 * 1000);
      await life.meter();
      assert.equal((await dep(one.deploymentId)).usageMinor, 300);
      assert.equal(await balance(one.who.accountId), 100_000 - 300);
      ctx.clock.advance(12_000); // 12 s at 300/h = 1 cent
      await life.meter();
      await life.meter();
      assert.equal((await dep(one.deploymentId)).usageMinor, 301);
      // The first hour's entry; the cent of the next hour is charged, not yet posted.
      const entries = await ctx.services.ds
        .getRepository(LedgerEntry)
        .findBy({ rentalId: one.rentalId, kind: 'USAGE' });
      assert.deepEqual(
        entries.map((e) => e.amountMinor),
        [-300],
      );
      assert.equal(await balance(one.who.accountId), 100_000 - 301);

      await terminateViaApi(one.who, one.deploymentId);
      ctx.clock.advance(24_000);
      await life.terminate(one.deploymentId);
      const t = await dep(one.deploymentId);
      assert.equal(t.status, 'TERMINATED');
      // Accrual stopped at the request: the 24 s after it are not charged.
      assert.equal(t.usageMinor, 301);
      const settled = await ctx.services.ds
        .getRepository(LedgerEntry)
        .find({ where: { rentalId: one.rentalId, kind: 'USAGE' }, order: { id: 'ASC' } });
      assert.deepEqual(
        settled.map((e) => e.amountMinor),
        [-300, -1],
      );
      ctx.clock.advance(3600 * 1000);
      await life.meter();
      assert.equal((await dep(one.deploymentId)).usageMinor, 301);
      assert.equal((await dep(two.deploymentId)).usageMinor, 603); // 7236 s at 300/h
    });

    it('terminates at the spend cap (SPEND_CAP), charging no more than the cap', async () => {
      await ctx.setInventory(offers());
      const r = await metered({ offerId: ids['lc-a'] }, 100_000, { budgetMinor: 550 });
      await activate(r.deploymentId);
      ctx.clock.advance(3 * 3600 * 1000);
      await life.meter();
      const d = await dep(r.deploymentId);
      assert.equal(d.usageMinor, 550, 'three hours at 300 c/h would be 900');
      assert.equal(d.status, 'TERMINATING');
      assert.equal(d.terminationReason, 'SPEND_CAP');
    });

    it("terminates at the key's budget (KEY_BUDGET)", async () => {
      await ctx.setInventory(offers());
      const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 100_000, budgetLimitMinor: 400 });
      const r = await rentOk(ctx, who, { offerId: ids['lc-a'] });
      await activate(r.deploymentId);
      ctx.clock.advance(2 * 3600 * 1000);
      await life.meter();
      const d = await dep(r.deploymentId);
      assert.equal(d.status, 'TERMINATING');
      assert.equal(d.terminationReason, 'KEY_BUDGET');
    });

    it('terminates at the end of the credits (CREDITS)', async () => {
      await ctx.setInventory(offers());
      const r = await metered({ offerId: ids['lc-a'] }, 400);
      await activate(r.deploymentId);
      ctx.clock.advance(2 * 3600 * 1000);
      await life.meter();
      const d = await dep(r.deploymentId);
      assert.equal(d.status, 'TERMINATING');
      assert.equal(d.terminationReason, 'CREDITS');
      await life.terminate(r.deploymentId);
      assert.equal((await dep(r.deploymentId)).status, 'TERMINATED');
    });
  });

  it('reconciler destroys orphaned instances, keeps live ones, and re-drives stuck deployments', async () => {
    await ctx.setInventory(offers());
    const live = await metered({ offerId: ids['lc-a'] });
    await activate(live.deploymentId);
    const provider = ctx.services.providers.get('local');
    const orphan = await provider.create(
      'gpr-orphan-1',
      { id: ids['lc-a'], key: 'lc-a', name: 'x', gpuCount: 1 },
      generateDeploymentKeyPair().publicKey,
    );
    assert.equal(orphan.kind, 'created');
    const stuck = await metered({ offerId: ids['lc-a'] });
    ctx.clock.advance(10 * 60 * 1000);
    const out = await life.reconcile();
    assert.ok(out.destroyed.includes((orphan as { instanceId: string }).instanceId));
    assert.equal((await provider.get((orphan as { instanceId: string }).instanceId)).state, 'gone');
    assert.equal((await provider.get((await dep(live.deploymentId)).instanceId!)).state, 'running');
    assert.ok(out.redriven.includes(stuck.deploymentId));
  });

  it('card-funded legacy order: the paid hand-off queues provisioning once; TERMINATED keeps endedAt null', async () => {
    await ctx.setInventory(offers());
    const { who, deploymentId, rentalId } = await legacy({ offerId: ids['lc-a'] });
    await ctx.services.ds.query(`DELETE FROM agenda_jobs WHERE unique_key = ?`, [deploymentId]);
    await ctx.services.ds.getRepository(Order).update({ id: rentalId }, { funding: 'CARD' });
    const handoff = new CardRentalHandoff(ctx.services.store, ctx.services.jobs);
    await handoff.cardOrderPaid(rentalId);
    await handoff.cardOrderPaid(rentalId);
    assert.deepEqual(await queuedJobs(ctx, deploymentId), [{ name: 'rental.provision', deploymentId }]);
    await life.provision(deploymentId);
    assert.equal((await dep(deploymentId)).status, 'ACTIVE');
    await terminateViaApi(who, deploymentId);
    await life.terminate(deploymentId);
    const d = await dep(deploymentId);
    assert.equal(d.status, 'TERMINATED');
    assert.equal(d.endedAt, null);
  });

  it('defines every lifecycle job', () => {
    const rentalJobs = ctx.services.jobDefinitions.filter((j) => j.name.startsWith('rental.'));
    assert.deepEqual(rentalJobs.map((j) => j.name).sort(), [
      'rental.expire',
      'rental.expiring',
      'rental.idle',
      'rental.meter',
      'rental.provision',
      'rental.reconcile',
      'rental.terminate',
    ]);
  });
});
