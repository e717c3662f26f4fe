import assert from 'node:assert/strict';
import { lifecycleDepsOf } from '../../src/container.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { LedgerEntry } from '../../src/modules/billing/ledger-entry.entity.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { createRentalLifecycle, type RentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import {
  answered,
  runsRentersSettings,
  timeBeforeActive,
} from '../../src/modules/rentals/lifecycle/time-before-active.js';
import { FAILED_AFTER_USE_WINDOW_MS } from '../../src/modules/rentals/admission/rental-limits.js';
import { STARTUP_MARKER_PATH } from '../../src/providers/provider.js';
import { sshExec } from '../../src/providers/ssh-probe.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { assertLedgerConsistent } from '../helpers/ledger.js';
import { waitFor } from '../helpers/wait.js';
import { account, addKey, offerIds, rent, rentOk, stepUntil } from '../helpers/rentals.js';

// 3,600 cents an hour: a cent a second, so every charge below reads as the seconds it covers.
const base = {
  category: 'datacenter',
  vramGb: 80,
  maximumDurationSeconds: 86400,
  provisionSeconds: 0,
  create: 'ok' as const,
  destroy: 'ok' as const,
};
const OFFERS: LocalInventoryOffer[] = [
  { ...base, key: 'fc-h100', name: 'NVIDIA H100 SXM', gpuCount: 1, pricePerHourMinor: 3600 },
  { ...base, key: 'fc-blind', name: 'NVIDIA H100 SXM', gpuCount: 1, pricePerHourMinor: 3600, actualGpuCount: 0 },
  {
    ...base,
    key: 'fc-short',
    name: 'NVIDIA L40S',
    vramGb: 48,
    gpuCount: 2,
    pricePerHourMinor: 3600,
    actualGpuCount: 1,
  },
];
const BOUND_MS = 15 * 60_000;
const TIMING = { activeBoundMs: BOUND_MS, adoptBoundMs: 5000, sshTimeoutMs: 3000 };

/**
 * The audit's script: the machine works for its renter while the check never sees the marker. (The
 * local machine keeps `nvidia-smi` out of its renter's reach; on a cloud, root hides the GPUs too.)
 */
const HIDE = ['#!/bin/sh', `while :; do rm -f "$HOME/${STARTUP_MARKER_PATH}"; sleep 0.1; done`, ''].join('\n');
/** Keeps the marker away until the renter (here the test, over SSH) drops `~/release`, then lets the check pass. */
const HIDE_UNTIL_RELEASED = [
  '#!/bin/sh',
  `while [ ! -f "$HOME/release" ]; do rm -f "$HOME/${STARTUP_MARKER_PATH}"; sleep 0.1; done`,
  `date > "$HOME/${STARTUP_MARKER_PATH}"`,
  '',
].join('\n');

describe('no free compute: a machine that worked for its renter is charged whether or not its check passed', function () {
  this.timeout(120_000);
  let ctx: TestContext;
  let life: RentalLifecycle;
  let ids: Record<string, string>;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    ids = await offerIds(ctx);
    life = createRentalLifecycle(lifecycleDepsOf(ctx.services), TIMING);
  });
  after(() => ctx.close());

  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const order = (id: string) => ctx.services.ds.getRepository(Order).findOneByOrFail({ id });
  const balance = async (accountId: string) =>
    (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: accountId })).balanceMinor;
  const entries = (rentalId: string) =>
    ctx.services.ds.getRepository(LedgerEntry).find({ where: { rentalId }, order: { id: 'ASC' } });
  const read = async (who: SignedUp, rentalId: string) =>
    (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data;

  /** Runs provisioning (as the worker's polls would) until the check first got into the machine; it must not have passed. */
  async function untilAnswered(deploymentId: string): Promise<Deployment> {
    return waitFor(
      async () => {
        await life.provision(deploymentId);
        const d = await dep(deploymentId);
        assert.equal(d.status, 'PROVISIONING', `the check must not pass (phase ${d.phase})`);
        return d.usableAt ? d : undefined;
      },
      { timeoutMs: 60_000, what: 'the check logs in to the machine' },
    );
  }

  /** Provisioning past the bound: the rental fails. */
  async function pastTheBound(deploymentIds: string[]): Promise<void> {
    ctx.clock.advance(BOUND_MS + 1000);
    await Promise.all(deploymentIds.map((id) => life.provision(id)));
  }

  it("charges the audit's hidden machines from the first SSH answer to the failure, shows it on the rental, and refuses the key's next rental", async () => {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 50_000 });
    const rentals = await Promise.all(
      [1, 2, 3].map(() => rentOk(ctx, who, { offerId: ids['fc-h100'], machine: { startupScript: HIDE } })),
    );
    const firstAnswers = await Promise.all(rentals.map((r) => untilAnswered(r.deploymentId)));
    for (const d of firstAnswers) assert.equal(d.phase, 'starting');
    await pastTheBound(rentals.map((r) => r.deploymentId));

    let charged = 0;
    for (const r of rentals) {
      const d = await dep(r.deploymentId);
      const o = await order(r.rentalId);
      assert.equal(d.status, 'FAILED');
      assert.equal(o.failureCode, 'PROVISIONING_TIMEOUT');
      assert.equal(o.reversalStatus, 'SUCCEEDED');
      // The machine's clock stood still between its first answer and the bound: exactly the bound plus a second.
      const expected = timeBeforeActive(d, d.statusChangedAt!.getTime())!;
      assert.equal(expected.amount, (BOUND_MS + 1000) / 1000);
      const usage = (await entries(r.rentalId)).filter((e) => e.kind === 'USAGE');
      assert.equal(usage.length, 1);
      assert.equal(usage[0].amountMinor, -expected.amount);
      assert.equal(usage[0].externalRef, `usage:${d.id}:${expected.toMs}`);
      assert.match(usage[0].description, /before it passed the service's check/);
      const shown = await read(who, r.rentalId);
      assert.equal(shown.status, 'FAILED');
      assert.equal(shown.failureCode, 'PROVISIONING_TIMEOUT');
      assert.match(shown.failureReason, /charged/);
      assert.equal(shown.deployment.usageMinor, expected.amount);
      charged += expected.amount;
    }
    assert.equal(await balance(who.accountId), 50_000 - charged);
    // Settling again (the reconciler's retry) charges nothing more.
    for (const r of rentals) await life.fail(r.deploymentId, 'PROVISIONING_TIMEOUT', 'again');
    assert.equal(await balance(who.accountId), 50_000 - charged);
    await assertLedgerConsistent(ctx.services.ds);

    const refused = await rent(ctx, who, { offerId: ids['fc-h100'] });
    assert.equal(refused.status, 429, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'RATE_LIMITED');
    const oldest = Math.min(...firstAnswers.map((d) => d.usableAt!.getTime()));
    const wait = Math.ceil((oldest + FAILED_AFTER_USE_WINDOW_MS - ctx.clock.now().getTime()) / 1000);
    assert.equal(refused.headers['retry-after'], String(wait));
    assert.match(refused.body.error.message, /startup marker or the GPUs were missing/);
    assert.ok(
      refused.body.error.message.includes(new Date(oldest + FAILED_AFTER_USE_WINDOW_MS).toISOString()),
      refused.body.error.message,
    );

    // The limit is the key's: another key of the account rents, and the key itself once the window has passed.
    const other = await addKey(ctx, who.accountId);
    assert.equal((await rent(ctx, other, { offerId: ids['fc-h100'] })).status, 201);
    ctx.clock.advance(wait * 1000);
    assert.equal((await rent(ctx, who, { offerId: ids['fc-h100'] })).status, 201);
  });

  it("a prepaid rental gets back only the part of its debit its machine's time did not use", async () => {
    const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 10_000 });
    const r = await rentOk(ctx, who, { offerId: ids['fc-h100'], budgetMinor: 3600, machine: { startupScript: HIDE } });
    assert.equal(await balance(who.accountId), 10_000 - 3600);
    await untilAnswered(r.deploymentId);
    await pastTheBound([r.deploymentId]);
    assert.equal((await dep(r.deploymentId)).status, 'FAILED');
    const used = (BOUND_MS + 1000) / 1000;
    const reversal = (await entries(r.rentalId)).filter((e) => e.kind === 'REVERSAL');
    assert.equal(reversal.length, 1);
    assert.equal(reversal[0].amountMinor, 3600 - used);
    assert.equal(await balance(who.accountId), 10_000 - used);
    assert.equal((await read(who, r.rentalId)).deployment.usageMinor, used);
    await assertLedgerConsistent(ctx.services.ds);
  });

  it("a rental ended before ACTIVE is charged its machine's time up to the termination request", async () => {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 10_000 });
    const r = await rentOk(ctx, who, { offerId: ids['fc-h100'], machine: { startupScript: HIDE } });
    await untilAnswered(r.deploymentId);
    ctx.clock.advance(300_000);
    assert.equal((await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(who.auth)).status, 202);
    ctx.clock.advance(60_000);
    await stepUntil(ctx, r.deploymentId, 'TERMINATED', (id) => life.terminate(id));
    const usage = (await entries(r.rentalId)).filter((e) => e.kind === 'USAGE');
    assert.deepEqual(
      usage.map((e) => e.amountMinor),
      [-300],
    );
    assert.equal(await balance(who.accountId), 10_000 - 300);
    assert.equal((await read(who, r.rentalId)).deployment.usageMinor, 300);
    await assertLedgerConsistent(ctx.services.ds);
  });

  it('a check that passes only after the machine has worked unchecked charges that time too', async () => {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 10_000 });
    const r = await rentOk(ctx, who, { offerId: ids['fc-h100'], machine: { startupScript: HIDE_UNTIL_RELEASED } });
    const d = await untilAnswered(r.deploymentId);
    ctx.clock.advance(600_000);
    // The renter lets the check pass at last (the test holds the rental's key, as the service does).
    const target = {
      host: d.sshHost!,
      port: d.sshPort!,
      user: d.sshUser!,
      privateKey: SecretBox.fromConfig(ctx.config).open(d.sshPrivateKeyEnc!, d.sshKeyKid!, d.id),
    };
    await sshExec(target, 'touch "$HOME/release"');
    await waitFor(
      async () => (await sshExec(target, `test -f "$HOME/${STARTUP_MARKER_PATH}" && echo yes`)).stdout.trim() === 'yes',
      { timeoutMs: 10_000, what: 'the marker back' },
    );
    await stepUntil(ctx, r.deploymentId, 'ACTIVE', (id) => life.provision(id));
    const active = await dep(r.deploymentId);
    assert.equal(active.startedAt!.getTime() - d.usableAt!.getTime(), 600_000);
    const usage = (await entries(r.rentalId)).filter((e) => e.kind === 'USAGE');
    assert.deepEqual(
      usage.map((e) => e.amountMinor),
      [-600],
    );
    assert.match(usage[0].description, /before it passed the service's check/);
    assert.equal(await balance(who.accountId), 10_000 - 600);
    await assertLedgerConsistent(ctx.services.ds);
    assert.equal((await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(who.auth)).status, 202);
    await stepUntil(ctx, r.deploymentId, 'TERMINATED', (id) => life.terminate(id));
  });

  it("counts a login as an answer whatever the check found, and only machines given the renter's settings", () => {
    assert.equal(answered({ kind: 'not_yet', phase: 'starting', detail: '' }), true);
    assert.equal(answered({ kind: 'not_yet', phase: 'checking_gpus', detail: '' }), true);
    assert.equal(answered({ kind: 'gpu_mismatch', listed: 1, promised: 2 }), true);
    assert.equal(
      answered({ kind: 'misbehaved', phase: 'checking_gpus', cut: 'timeout', detail: '' }),
      true,
      'a check the machine held up got in',
    );
    assert.equal(answered({ kind: 'not_yet', phase: 'waiting_for_ssh', detail: 'refused' }), false);
    assert.equal(answered({ kind: 'host_key_changed', phase: 'waiting_for_ssh', pinned: 'a', seen: 'b' }), false);
    const none = {
      startupScriptSha256: null as string | null,
      machineImage: null as string | null,
      machineEnvNames: null as string[] | null,
    };
    assert.equal(runsRentersSettings(none), false);
    assert.equal(runsRentersSettings({ ...none, startupScriptSha256: 'f'.repeat(64) }), true);
    assert.equal(runsRentersSettings({ ...none, machineImage: 'pytorch/pytorch:latest' }), true);
    const withEnv = { ...none, machineEnvNames: ['A'] };
    assert.equal(runsRentersSettings(withEnv), false, 'variables alone run nothing');
  });

  it("charges nothing for the cloud's faults: a plain machine whose GPUs never show, or one with fewer GPUs at its first answer", async () => {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 10_000 });
    // No settings of the renter's: nothing of theirs ran, whatever the machine did.
    const blind = await rentOk(ctx, who, { offerId: ids['fc-blind'] });
    await waitFor(
      async () => {
        await life.provision(blind.deploymentId);
        return (await dep(blind.deploymentId)).phase === 'checking_gpus';
      },
      { timeoutMs: 60_000, what: 'the check finds no GPU' },
    );
    // Fewer GPUs than promised at the first answer: the cloud's machine, not what was sold.
    const short = await rentOk(ctx, who, { offerId: ids['fc-short'], machine: { startupScript: 'echo started\n' } });
    await waitFor(
      async () => {
        await life.provision(short.deploymentId);
        return (await dep(short.deploymentId)).status === 'FAILED';
      },
      { timeoutMs: 60_000, what: 'GPU_MISMATCH' },
    );
    assert.equal((await order(short.rentalId)).failureCode, 'GPU_MISMATCH');
    await pastTheBound([blind.deploymentId]);
    const b = await dep(blind.deploymentId);
    assert.equal(b.status, 'FAILED');
    assert.equal(b.usableAt, null);
    assert.match((await order(blind.rentalId)).failureReason!, /not started/);
    for (const r of [blind, short]) {
      assert.deepEqual(
        (await entries(r.rentalId)).filter((e) => e.kind === 'USAGE'),
        [],
      );
      assert.equal((await dep(r.deploymentId)).usageMinor, 0);
    }
    assert.equal(await balance(who.accountId), 10_000);
  });
});
