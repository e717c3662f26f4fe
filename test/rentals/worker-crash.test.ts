import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { lifecycleDepsOf } from '../../src/container.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { spawnService, type Spawned } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { account, offerIds } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'crash-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 1,
  },
];

describe('rentals: a worker killed mid-provisioning', function () {
  this.timeout(90_000);
  let ctx: TestContext;
  const workers: Spawned[] = [];

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
  });
  after(async () => {
    for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await ctx.close();
  });

  const startWorker = () => {
    const w = spawnService(['--role', 'worker'], {
      DATABASE_URL: testDatabaseUrl,
      LOCAL_PROVIDER_INVENTORY: ctx.inventoryPath,
      RENTAL_POLL_MS: '100',
      JOBS_PROCESS_EVERY_MS: '100',
      PUBLIC_BASE_URL: 'http://gpu.test',
    });
    workers.push(w);
    return w;
  };
  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const instances = async (id: string) =>
    ctx.services.ds.query(`SELECT id, state FROM local_provider_instances WHERE label LIKE ?`, [`%${id}%`]) as Promise<
      { id: string; state: string }[]
    >;

  it('restarted, converges to ACTIVE with exactly one instance, then terminates', async () => {
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 5000 });
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: (await offerIds(ctx))['crash-h100'] });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { deploymentId } = res.body.data;

    const first = startWorker();
    // Killed as soon as the first create attempt is on record: before, during or just after the call.
    await waitFor(
      async () =>
        Number(
          (
            await ctx.services.ds.query(`SELECT COUNT(*) AS n FROM deployment_attempts WHERE deployment_id = ?`, [
              deploymentId,
            ])
          )[0].n,
        ) > 0,
      { timeoutMs: 30_000, what: () => `first create attempt (${first.stderr()})` },
    );
    first.child.kill('SIGKILL');
    await first.exited;
    assert.notEqual((await dep(deploymentId)).status, 'ACTIVE');

    const second = startWorker();
    // The dead worker's claimed job stays locked until its lock lifetime; the reconciler re-drives it sooner.
    // The dead worker wrote with the real clock; bring the manual one level with it.
    ctx.clock.set(new Date(Date.now() + 1000));
    const { redriven } = await createRentalLifecycle(lifecycleDepsOf(ctx.services), { stuckAfterMs: 0 }).reconcile();
    assert.ok(redriven.includes(deploymentId));
    try {
      await waitFor(async () => (await dep(deploymentId)).status === 'ACTIVE', { timeoutMs: 30_000, what: 'ACTIVE' });
    } catch (err) {
      const d = await dep(deploymentId);
      const jobs = await ctx.services.ds.query(
        `SELECT name, locked_at, next_run_at, last_finished_at, fail_reason FROM agenda_jobs WHERE unique_key = ?`,
        [deploymentId],
      );
      const atts = await ctx.services.ds.query(`SELECT * FROM deployment_attempts WHERE deployment_id = ?`, [
        deploymentId,
      ]);
      throw new Error(
        `${(err as Error).message}: ${d.status} ${d.instanceId} ${JSON.stringify(jobs)} ${JSON.stringify(atts)} ${second.stdout()} ${second.stderr()}`,
      );
    }
    const live = await instances(deploymentId);
    assert.equal(live.length, 1, JSON.stringify(live));
    assert.equal((await dep(deploymentId)).instanceId, live[0].id);

    assert.equal((await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(who.auth)).status, 202);
    await waitFor(async () => (await dep(deploymentId)).status === 'TERMINATED', {
      timeoutMs: 30_000,
      what: () => `TERMINATED (${second.stderr()})`,
    });
    assert.deepEqual(
      (await instances(deploymentId)).map((i) => i.state),
      ['destroyed'],
    );
    second.child.kill('SIGTERM');
    await second.exited;
  });
});
