import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import type { CanaryReport } from '../../src/modules/canary/canary-report.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { startTestWorker } from '../helpers/jobs.js';
import { spawnService } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

const offer = (provisionSeconds: number): LocalInventoryOffer => ({
  key: `canary-process-${provisionSeconds}`,
  name: 'NVIDIA L4',
  category: 'datacenter',
  vramGb: 24,
  gpuCount: 1,
  pricePerHourMinor: 80,
  maximumDurationSeconds: 86400,
  provisionSeconds,
});

/** The environment of the command and of a service beside it: the test database, the local provider with `offers`. */
function serviceEnv(offers: LocalInventoryOffer[]): Record<string, string> {
  const inventory = join(mkdtempSync(join(tmpdir(), 'gpu-rental-canary-')), 'inventory.json');
  writeFileSync(inventory, JSON.stringify({ offers }));
  return {
    DATABASE_URL: testDatabaseUrl,
    PROVIDERS: 'local',
    LOCAL_PROVIDER_INVENTORY: inventory,
    RENTAL_POLL_MS: '50',
  };
}

/** The command as an operator runs it (`owner providers canary …`), in a process of its own with its own worker. */
function canaryProcess(args: string[], offers: LocalInventoryOffer[]) {
  return spawnService(['owner', 'providers', 'canary', ...args], serviceEnv(offers));
}

describe('owner providers canary as a process (real signals, its own worker)', function () {
  this.timeout(120_000);
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx?.close());

  it('runs a full cycle with no service running: phases on stderr, only the JSON report on stdout, exit 0', async () => {
    const run = canaryProcess(['--provider', 'local', '--max-spend', '$5', '--json'], [offer(0.5)]);
    assert.equal(await run.exited, 0, `${run.stderr()}\n${run.stdout()}`);
    const report = JSON.parse(run.stdout()) as CanaryReport;
    assert.equal(report.ok, true);
    assert.equal(report.maxSpendMinor, 500, '--max-spend is read as dollars');
    assert.equal(report.gpus.length, 1);
    assert.match(run.stderr(), /^canary +\+[\d.]+s {2}offer chosen: /m);
    assert.match(run.stderr(), /^canary +\+[\d.]+s {2}ACTIVE/m);
    assert.match(run.stderr(), /^canary +\+[\d.]+s {2}TERMINATED: destruction verified/m);
    const [d] = await ctx.services.ds.query(`SELECT status, ended_at FROM deployments WHERE order_id = ?`, [
      report.rentalId,
    ]);
    assert.equal(d.status, 'TERMINATED');
    assert.ok(d.ended_at);
  });

  it("runs beside a running service's worker (jobs are locked in MySQL: either worker may take them), exit 0", async () => {
    const service = spawnService(['--role', 'worker'], { ...serviceEnv([offer(0.5)]), LOG_LEVEL: 'info' });
    try {
      await waitFor(() => /"msg":"inventory loaded/.test(service.stdout()), {
        timeoutMs: 60_000,
        what: () => `the worker up: ${service.stdout()}${service.stderr()}`,
      });
      const run = canaryProcess(['--provider', 'local', '--max-spend', '5', '--json'], [offer(0.5)]);
      assert.equal(await run.exited, 0, `${run.stderr()}\n${run.stdout()}`);
      const report = JSON.parse(run.stdout()) as CanaryReport;
      assert.equal(report.ok, true);
      assert.equal(report.destructionVerified, true);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  });

  it('Ctrl-C after the machine exists ends it and waits for its verified destruction, then exits 130', async () => {
    const run = canaryProcess(['--provider', 'local', '--max-spend', '5', '--json'], [offer(600)]);
    await waitFor(() => / {2}booting$/m.test(run.stderr()), {
      timeoutMs: 60_000,
      what: () => `booting in ${run.stderr()}`,
    });
    run.child.kill('SIGINT');
    assert.equal(await run.exited, 130, run.stderr());
    assert.match(run.stderr(), /Interrupted: ending the machine/);
    const report = JSON.parse(run.stdout()) as CanaryReport;
    assert.equal(report.outcome, 'interrupted');
    assert.equal(report.status, 'TERMINATED');
    assert.equal(report.destructionVerified, true);
  });

  it('a second Ctrl-C leaves the machine ending in the service, says how to check, and exits 130; a worker ends it', async () => {
    const run = canaryProcess(['--provider', 'local', '--max-spend', '5'], [offer(600)]);
    await waitFor(() => / {2}booting$/m.test(run.stderr()), {
      timeoutMs: 60_000,
      what: () => `booting in ${run.stderr()}`,
    });
    run.child.kill('SIGINT');
    await waitFor(() => /Interrupted: ending the machine/.test(run.stderr()), { what: 'the first interrupt taken' });
    run.child.kill('SIGINT');
    assert.equal(await run.exited, 130, run.stderr());
    assert.match(run.stderr(), /Interrupted again: the machine is still ending/);
    const rentalId = /^Rental: (\S+) /m.exec(run.stdout())?.[1];
    assert.ok(rentalId, run.stdout());
    assert.match(run.stdout(), /stays in the service and ends there/);
    // Whatever the process finished before it left, the rental's termination is written: a worker ends it.
    const worker = await startTestWorker(ctx, { processEveryMs: 50 });
    try {
      await waitFor(
        async () =>
          (await ctx.services.ds.query(`SELECT status FROM deployments WHERE order_id = ?`, [rentalId]))[0]?.status ===
          'TERMINATED',
        { timeoutMs: 60_000, what: 'the left rental TERMINATED' },
      );
    } finally {
      await worker.stop();
    }
  });
});
