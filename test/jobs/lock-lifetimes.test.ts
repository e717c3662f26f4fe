import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createBotJobs } from '../../src/container.js';
import { agendaOf } from '../../src/jobs/agenda.js';
import { MAX_JOB_LOCK_LIFETIME_MS, type JobDefinition } from '../../src/jobs/job-queue.js';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { HostileSshServer } from '../helpers/hostile-ssh.js';
import { spawnService, type Spawned } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { account, makeActive, offerIds, rentOk } from '../helpers/rentals.js';
import { scratchDatabase } from './scratch-database.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'lock-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 100,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

// A repeating job whose lock lifetime is left out does not compile (run by `tsc --noEmit`, not by mocha).
// @ts-expect-error lockLifetimeMs is required with everyMs
const _withoutLifetime: JobDefinition = { name: 'x', handler: async () => undefined, everyMs: 1000 };

/** Every job states its lock lifetime, and a worker that dies leaves nothing locked past it (finding 17). */
describe('jobs: lock lifetimes', function () {
  this.timeout(120_000);
  let db: Awaited<ReturnType<typeof scratchDatabase>>;
  let ctx: TestContext;
  const workers: Spawned[] = [];

  before(async () => {
    db = await scratchDatabase(10);
    ctx = await createTestContext({ offers: OFFERS, database: { ds: db.ds, url: db.url } });
  });
  after(async () => {
    for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await ctx.close();
    await db.drop();
  });

  it('states a lock lifetime for every job of the worker and the bot, each within the bound, and hands it to Agenda', () => {
    const bot = createBotJobs(ctx.services, { send: async () => undefined } as never);
    for (const [defs, agenda] of [
      [ctx.services.jobDefinitions, agendaOf(ctx.services.jobs)],
      [bot.jobDefinitions, agendaOf(bot.jobs)],
    ] as const) {
      assert.ok(defs.length > 0);
      for (const def of defs) {
        assert.ok(def.lockLifetimeMs !== undefined && def.lockLifetimeMs > 0, `${def.name} states its lock lifetime`);
        assert.ok(
          def.lockLifetimeMs <= MAX_JOB_LOCK_LIFETIME_MS,
          `${def.name}: ${def.lockLifetimeMs} ms is within the bound`,
        );
        assert.equal(
          agenda.definitions[def.name].lockLifetime,
          def.lockLifetimeMs,
          `${def.name} is locked for what it states`,
        );
      }
    }
    const lifetime = (name: string) => ctx.services.jobDefinitions.find((d) => d.name === name)!.lockLifetimeMs!;
    // The sweeps every account waits on are locked for well under a minute or two.
    assert.ok(lifetime('webhooks.dispatch') <= 30_000);
    assert.ok(lifetime('rental.meter') <= 60_000);
    assert.ok(lifetime('rental.idle') <= 30_000);
  });

  it("hands the idle sweep of a SIGKILLed worker to another worker within the sweep's stated lifetime", async () => {
    // A watched rental whose machine never answers keeps the first worker's sweep running when it is killed.
    const machine = await HostileSshServer.start('hang');
    try {
      const who = await account(ctx, { creditsMinor: 1_000_000 });
      await ctx.services.ds.getRepository(ApiKey).update({ id: who.keyId }, { idleTerminateMinutes: 60 });
      const { deploymentId } = await rentOk(ctx, who, { offerId: (await offerIds(ctx))['lock-h100'] });
      await makeActive(ctx, deploymentId, { host: '127.0.0.1', port: machine.port, user: 'root' });
      await ctx.services.ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE} WHERE unique_key = ?`, [deploymentId]);
      const lifetime = ctx.services.jobDefinitions.find((d) => d.name === 'rental.idle')!.lockLifetimeMs!;

      const start = () => {
        const w = spawnService(['--role', 'worker'], {
          DATABASE_URL: db.url,
          LOCAL_PROVIDER_INVENTORY: ctx.inventoryPath,
          JOBS_PROCESS_EVERY_MS: '100',
          PUBLIC_BASE_URL: 'http://gpu.test',
        });
        workers.push(w);
        return w;
      };
      const victim = start();
      await waitFor(async () => machine.execs > 0, {
        timeoutMs: 60_000,
        what: () => `the first worker's sample (${victim.stderr()})`,
      });
      victim.child.kill('SIGKILL');
      const killedAt = Date.now();
      await victim.exited;
      const [row] = await ctx.services.ds.query(
        `SELECT locked_at FROM ${AGENDA_JOBS_TABLE} WHERE name = 'rental.idle'`,
      );
      assert.ok(row.locked_at instanceof Date, 'the dead worker still holds the sweep');

      const rescuer = start();
      await waitFor(async () => machine.execs > 1, {
        timeoutMs: lifetime + 60_000,
        what: () => `the second worker's sample (${rescuer.stderr()})`,
      });
      const waited = Date.now() - killedAt;
      // Its lifetime, the poll and a start of the service: not the ten minutes of Agenda's default.
      assert.ok(waited <= lifetime + 30_000, `taken over after ${waited} ms (lock lifetime ${lifetime} ms)`);
      rescuer.child.kill('SIGTERM');
      await rescuer.exited;
    } finally {
      await machine.close();
    }
  });
});
