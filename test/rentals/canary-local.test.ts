import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { verifyReceipt } from '../../clients/sdk/src/receipts.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { sandboxDirFor } from '../../plugins/local/sandbox.js';
import { runCanaryCommand } from '../../src/cli/owner-canary.js';
import { CANARY_ACCOUNT_ID, CANARY_KEY_ORIGIN } from '../../src/modules/canary/canary-account.js';
import type { CanaryPhase } from '../../src/modules/canary/canary-report.js';
import type { CanaryOptions, CanarySignals } from '../../src/modules/canary/canary-deps.js';
import { driveCanary } from '../helpers/canary.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { account, credit } from '../helpers/rentals.js';
import { waitFor } from '../helpers/wait.js';

const base = { category: 'datacenter', maximumDurationSeconds: 86400, provisionSeconds: 5 };
/**
 * Prices low enough that $5 covers the canary's expected ten minutes, except the H100's, and high
 * enough that a minute costs cents.
 */
const OFFERS: LocalInventoryOffer[] = [
  { ...base, key: 'canary-l4', name: 'NVIDIA L4', vramGb: 24, gpuCount: 1, pricePerHourMinor: 2900 },
  { ...base, key: 'canary-a100', name: 'NVIDIA A100 80GB', vramGb: 80, gpuCount: 2, pricePerHourMinor: 2950 },
  {
    ...base,
    key: 'canary-fail',
    name: 'NVIDIA RTX A6000',
    vramGb: 48,
    gpuCount: 1,
    pricePerHourMinor: 2990,
    create: 'fail',
  },
  { ...base, key: 'canary-h100', name: 'NVIDIA H100 SXM', vramGb: 80, gpuCount: 1, pricePerHourMinor: 9000 },
];

interface Row {
  [k: string]: unknown;
}

/**
 * The canary on the local provider (each instance a real SSH endpoint on loopback with a simulated
 * nvidia-smi), through the whole service: the rental path, the worker's jobs, the ledger. The run
 * function takes AbortSignals, so the interrupts here need no real signals.
 */
describe('owner providers canary on the local provider (rental path + worker + local machines)', function () {
  this.timeout(120_000);
  let ctx: TestContext;
  let worker: TestWorker;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { RENTAL_POLL_MS: '50' } });
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
  });
  after(async () => {
    await worker?.stop();
    await ctx?.close();
  });

  const q = (sql: string, params: unknown[] = []): Promise<Row[]> => ctx.services.ds.query(sql, params);

  /** The canary on the local provider, the clock moving 500 ms a look (see OFFERS) while `clockMoves()` allows. */
  const canary = (
    options: Partial<CanaryOptions> = {},
    signals: CanarySignals = {},
    onPhase?: (p: CanaryPhase) => void,
    clockMoves?: () => Promise<boolean>,
  ) => driveCanary(ctx, { options: { provider: 'local', ...options }, signals, onPhase, clockMoves, stepMs: 500 });

  const phasesOf = (said: CanaryPhase[]) => said.map((p) => p.phase);

  async function deploymentOf(rentalId: string): Promise<Row> {
    const [d] = await q(`SELECT * FROM deployments WHERE order_id = ?`, [rentalId]);
    assert.ok(d, `a deployment of rental ${rentalId}`);
    return d;
  }

  /** The local provider knows no instance of the rental's label: nothing is left running. */
  async function assertNoInstance(rentalId: string): Promise<void> {
    const d = await deploymentOf(rentalId);
    assert.ok(d.label, 'the rental had a machine');
    assert.equal(await ctx.services.providers.get('local').findByLabel(String(d.label)), null, 'no instance is left');
  }

  it('rents the cheapest offer within the cap on its own account, lists the GPUs over SSH, ends TERMINATED within the cap; the ledger holds it all', async () => {
    // Someone else's money, which the canary must not touch.
    const bystander = (await account(ctx)).accountId;
    await credit(ctx, bystander, 12_345);

    // The canary account may exist already (another file of this worker's database ran a canary).
    const [mark] = await q(`SELECT COALESCE(MAX(id), 0) AS id FROM ledger_entries WHERE account_id = ?`, [
      CANARY_ACCOUNT_ID,
    ]);
    // What an earlier run left on it (one stopped twice leaves its cap until the next run): funding tops that up.
    const [held] = await q(`SELECT balance_minor FROM accounts WHERE id = ?`, [CANARY_ACCOUNT_ID]);
    const before = held ? Number(held.balance_minor) : 0;
    // A minute of ACTIVE time on the service's clock, so the charge is cents whatever the machine's pace.
    const { report, said } = await canary({}, {}, (p) => {
      if (p.phase === 'ACTIVE') ctx.clock.advance(60_000);
    });
    assert.equal(report.ok, true, JSON.stringify(report, null, 2));
    assert.equal(report.outcome, 'completed');
    assert.equal(report.problem, null);
    assert.match(report.offer?.name ?? '', /L4/);
    assert.equal(report.offer?.pricePerHourMinor, 2900);
    const phases = phasesOf(said);
    // Phases are seen as the canary reads them: a short one may pass between two reads, these may not.
    for (const p of ['offer_chosen', 'created', 'PENDING', 'ACTIVE', 'nvidia_smi', 'TERMINATED'])
      assert.ok(phases.includes(p), `phase ${p} in ${phases.join(', ')}`);
    assert.ok(phases.indexOf('ACTIVE') < phases.indexOf('nvidia_smi'));
    assert.ok(phases.indexOf('nvidia_smi') < phases.indexOf('TERMINATED'));
    assert.deepEqual(report.phases, said, 'the report carries every phase said, with its time');
    for (let i = 1; i < said.length; i++) assert.ok(said[i].sinceStartMs >= said[i - 1].sinceStartMs);
    assert.equal(report.gpus.length, 1);
    assert.match(report.gpus[0], /^GPU 0: NVIDIA L4/);
    assert.equal(report.status, 'TERMINATED');
    assert.equal(report.terminationReason, 'USER');
    assert.equal(report.destructionVerified, true);

    // The normal rental path, metered with the cap as its budget, on the canary's account and key.
    const rentalId = report.rentalId!;
    const d = await deploymentOf(rentalId);
    assert.equal(d.account_id, CANARY_ACCOUNT_ID);
    assert.equal(d.billing_model, 'MAX_SPEND_METERED');
    assert.equal(Number(d.spend_cap_minor), 500);
    assert.ok(Number(d.lease_seconds) >= 60, 'the rental carries the time bound as its lease');
    assert.equal(new Date(d.ended_at as Date).toISOString(), report.endedAt);
    const [key] = await q(`SELECT * FROM api_keys WHERE id = ?`, [d.key_id]);
    assert.equal(key.origin, CANARY_KEY_ORIGIN);
    assert.equal(Number(key.max_per_rental_minor), 500);
    assert.equal(Number(key.budget_limit_minor), 500);
    assert.ok(key.revoked_at, "the run's key is revoked once the rental is over");
    const [reveals] = await q(`SELECT COUNT(*) AS n FROM credential_reveals WHERE deployment_id = ?`, [d.id]);
    assert.equal(Number(reveals.n), 1, 'the credentials were revealed as an agent reveals them, audited');
    await assertNoInstance(rentalId);

    // What it cost is what the ledger holds for the rental, within the cap; the account is
    // funded for exactly the cap and the rest goes back, leaving it at zero.
    const [sum] = await q(`SELECT COALESCE(SUM(amount_minor), 0) AS s FROM ledger_entries WHERE rental_id = ?`, [
      rentalId,
    ]);
    assert.equal(report.costMinor, 0 - Number(sum.s));
    assert.ok(report.costMinor! >= 48 && report.costMinor! <= 500, `cost ${report.costMinor}`);
    assert.deepEqual(
      report.charges.map((c) => c.kind),
      ['USAGE'],
    );
    const entries = await q(
      `SELECT kind, amount_minor FROM ledger_entries WHERE account_id = ? AND id > ? ORDER BY id`,
      [CANARY_ACCOUNT_ID, mark.id],
    );
    assert.deepEqual(
      entries.map((e) => [e.kind, Number(e.amount_minor)]),
      [
        ...(before === 500 ? [] : [['ADJUSTMENT', 500 - before]]),
        ['USAGE', -report.costMinor!],
        ['ADJUSTMENT', -(500 - report.costMinor!)],
      ],
    );
    // The teardown receipt, as the rental's key reads it, verifies against the published keys.
    assert.ok(report.receipt, 'the report carries the teardown receipt');
    assert.deepEqual(
      [report.receipt.receipt.rentalId, report.receipt.receipt.charged.totalMinor],
      [rentalId, report.costMinor],
    );
    assert.equal(verifyReceipt(report.receipt, await ctx.services.receipts.keySet()).valid, true);
    const [canaryAccount] = await q(`SELECT balance_minor FROM accounts WHERE id = ?`, [CANARY_ACCOUNT_ID]);
    assert.equal(Number(canaryAccount.balance_minor), 0);
    const [other] = await q(`SELECT balance_minor FROM accounts WHERE id = ?`, [bystander]);
    assert.equal(Number(other.balance_minor), 12_345, "nobody else's balance moved");
  });

  it('--gpu rents that model; a second run finds the same account and funds it again for its own cap', async () => {
    const { report } = await canary({ gpu: 'A100', maxSpendMinor: 750 });
    assert.equal(report.ok, true, JSON.stringify(report, null, 2));
    assert.match(report.offer?.name ?? '', /A100/);
    assert.equal(report.gpus.length, 2, 'both GPUs of the offer are listed');
    const accounts = await q(`SELECT COUNT(*) AS n FROM accounts WHERE id = ?`, [CANARY_ACCOUNT_ID]);
    assert.equal(Number(accounts[0].n), 1);
    const [fund] = await q(
      `SELECT amount_minor FROM ledger_entries WHERE account_id = ? AND kind = 'ADJUSTMENT' ORDER BY id DESC LIMIT 1 OFFSET 1`,
      [CANARY_ACCOUNT_ID],
    );
    assert.equal(Number(fund.amount_minor), 750);
    await assertNoInstance(report.rentalId!);
  });

  it('an interrupt after the machine exists still ends it: TERMINATED with verified destruction, reported as interrupted', async () => {
    const stop = new AbortController();
    // The machine cannot boot while the test clock stands still: it stands until the stop.
    const { report, said } = await canary(
      { gpu: 'A100' },
      { stop: stop.signal },
      (p) => {
        if (p.phase === 'booting') stop.abort();
      },
      async () => stop.signal.aborted,
    );
    assert.equal(report.ok, false);
    assert.equal(report.outcome, 'interrupted', JSON.stringify(report, null, 2));
    assert.ok(!phasesOf(said).includes('ACTIVE'), 'stopped before ACTIVE');
    assert.equal(report.status, 'TERMINATED');
    assert.equal(report.destructionVerified, true);
    assert.ok(report.endedAt);
    assert.equal(report.receipt?.receipt.rentalId, report.rentalId, 'an interrupted run still reports its receipt');
    await assertNoInstance(report.rentalId!);
    const [d] = await q(`SELECT instance_id, ended_at FROM deployments WHERE order_id = ?`, [report.rentalId]);
    assert.ok(d.instance_id && d.ended_at, 'a machine was created, and its destruction verified');
  });

  it('a failure mid-way (nvidia-smi fails over SSH once ACTIVE) still ends the machine, and the run fails saying why', async () => {
    let instanceId: string | null = null;
    let rentalId: string | undefined;
    const { report } = await canary(
      {},
      {},
      (p) => {
        if (p.phase === 'created') rentalId = /rental (\S+)/.exec(p.detail)?.[1];
        // Synchronously, before the canary goes on to log in: the machine's nvidia-smi breaks.
        if (p.phase === 'ACTIVE')
          writeFileSync(
            join(sandboxDirFor(instanceId!), 'bin', 'nvidia-smi'),
            '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the driver" >&2\nexit 9\n',
            { mode: 0o755 },
          );
      },
      // The machine boots on the test clock: it stays down until its instance id is known here.
      async () => {
        if (instanceId === null && rentalId)
          instanceId = ((await q(`SELECT instance_id FROM deployments WHERE order_id = ?`, [rentalId]))[0]
            ?.instance_id ?? null) as string | null;
        return instanceId !== null;
      },
    );
    assert.equal(report.ok, false);
    assert.equal(report.outcome, 'failed');
    assert.match(report.problem ?? '', /nvidia-smi -L over SSH exited 9 and listed 0 GPU\(s\): NVIDIA-SMI has failed/);
    assert.equal(report.status, 'TERMINATED');
    assert.equal(report.destructionVerified, true);
    await assertNoInstance(report.rentalId!);
    const [balance] = await q(`SELECT balance_minor FROM accounts WHERE id = ?`, [CANARY_ACCOUNT_ID]);
    assert.equal(Number(balance.balance_minor), 0, 'a failed run returns what it did not spend too');
  });

  it('a rental that FAILED is reported with its reason, and its machine is known gone', async () => {
    const { report } = await canary({ gpu: 'A6000' });
    assert.equal(report.outcome, 'failed', JSON.stringify(report, null, 2));
    assert.match(report.problem ?? '', /FAILED before ACTIVE: PROVISIONING_FAILED/);
    assert.equal(report.status, 'FAILED');
    assert.equal(report.destructionVerified, true);
    assert.equal(report.receipt, null, 'a FAILED rental has no teardown receipt');
    await assertNoInstance(report.rentalId!);
  });

  it('a second stop leaves the machine ending in the service, which ends it; the next run finds nothing left', async () => {
    const stop = new AbortController();
    const leave = new AbortController();
    const { report } = await canary(
      { gpu: 'A100' },
      { stop: stop.signal, leave: leave.signal },
      (p) => {
        if (p.phase === 'booting') {
          stop.abort();
          leave.abort();
        }
      },
      async () => stop.signal.aborted,
    );
    assert.equal(report.outcome, 'left', JSON.stringify(report, null, 2));
    assert.match(report.problem ?? '', /stays in the service and ends there/);
    assert.match(report.problem ?? '', new RegExp(`Rental ${report.rentalId}`));
    const rentalId = report.rentalId!;
    // The termination was written before the run left; the worker finishes it.
    await waitFor(
      async () => {
        ctx.clock.advance(200);
        return (await deploymentOf(rentalId)).status === 'TERMINATED';
      },
      { timeoutMs: 30_000, intervalMs: 20, what: 'the left rental to be TERMINATED by the worker' },
    );
    assert.ok((await deploymentOf(rentalId)).ended_at);
    await assertNoInstance(rentalId);
    const keyId = (await deploymentOf(rentalId)).key_id;
    const revokedAt = async () => (await q(`SELECT revoked_at FROM api_keys WHERE id = ?`, [keyId]))[0].revoked_at;
    assert.equal(await revokedAt(), null, 'a left run keeps its key until its rental is over');
    // The next run finds nothing unfinished any more, revokes the left run's key, and funds its own cap.
    const next = await canary();
    assert.equal(next.report.ok, true, JSON.stringify(next.report, null, 2));
    assert.equal(next.report.phases.filter((p) => p.phase === 'previous').length, 0);
    assert.ok(await revokedAt());
  });

  it('the cap bounds what it costs: ten hours passing while it is ACTIVE cost exactly --max-spend', async () => {
    const { report } = await canary({}, {}, (p) => {
      // Before the canary logs in: as far as the service's clock goes, the machine runs ten hours.
      if (p.phase === 'ACTIVE') ctx.clock.advance(10 * 3600_000);
    });
    assert.equal(report.ok, true, JSON.stringify(report, null, 2));
    assert.equal(report.costMinor, 500, 'charged up to its budget, the cap, and no further');
    const [d] = await q(`SELECT usage_minor, spend_cap_minor FROM deployments WHERE order_id = ?`, [report.rentalId]);
    assert.deepEqual([Number(d.usage_minor), Number(d.spend_cap_minor)], [500, 500]);
    const [balance] = await q(`SELECT balance_minor FROM accounts WHERE id = ?`, [CANARY_ACCOUNT_ID]);
    assert.equal(Number(balance.balance_minor), 0, 'the whole cap was spent, nothing more');
  });

  it("refuses an offer the cap cannot cover for the canary's ten minutes, renting nothing", async () => {
    const [before] = await q(`SELECT COUNT(*) AS n FROM deployments WHERE account_id = ?`, [CANARY_ACCOUNT_ID]);
    const { report } = await canary({ gpu: 'H100' });
    assert.equal(report.outcome, 'failed');
    assert.equal(report.rentalId, null);
    assert.match(
      report.problem ?? '',
      /--max-spend \$5\.00 does not cover 10 minutes .*pass --max-spend of at least \$15\.00/,
    );
    const [after] = await q(`SELECT COUNT(*) AS n FROM deployments WHERE account_id = ?`, [CANARY_ACCOUNT_ID]);
    assert.equal(Number(after.n), Number(before.n));
  });

  it('the command refuses to start without --max-spend (exit 2, saying it is the cap on real money), renting nothing', async () => {
    const [before] = await q(`SELECT COUNT(*) AS n FROM deployments`);
    let out = '';
    let err = '';
    const code = await runCanaryCommand(['--provider', 'local'], ctx.config, {
      out: (t) => (out += t),
      err: (t) => (err += t),
    });
    assert.equal(code, 2);
    assert.equal(out, '');
    assert.match(err, /--max-spend is required: it is the cap on real money/);
    const [after] = await q(`SELECT COUNT(*) AS n FROM deployments`);
    assert.equal(Number(after.n), Number(before.n));
  });
});
