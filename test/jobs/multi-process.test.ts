import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import type { DataSource } from 'typeorm';
import { JOB_CLAIM_MODES } from '../../src/config.js';
import { createAgenda } from '../../src/jobs/agenda.js';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { waitFor } from '../helpers/wait.js';
import { scratchDatabase } from './scratch-database.js';

interface WorkerProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  output: () => string;
}

for (const claim of JOB_CLAIM_MODES) {
  describe(`jobs: several worker processes on one MySQL (JOBS_CLAIM=${claim})`, function () {
    this.timeout(60_000);
    let db: Awaited<ReturnType<typeof scratchDatabase>>;
    let ds: DataSource;
    const children: WorkerProcess[] = [];

    function startWorker(env: Record<string, string> = {}): WorkerProcess {
      const child = spawn(process.execPath, ['--import', 'tsx', 'test/jobs/fixtures/job-worker.ts'], {
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '/tmp',
          DATABASE_URL: db.url,
          JOBS_CLAIM: claim,
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (out += d));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      const w = { child, exited, output: () => out };
      children.push(w);
      return w;
    }

    const ready = (w: WorkerProcess) =>
      waitFor(async () => w.output().includes('ready'), { what: () => `worker ready (${w.output()})` });
    const runs = (where = '1 = 1', params: unknown[] = []) =>
      ds.query(`SELECT job_key, phase, pid FROM job_runs_test WHERE ${where} ORDER BY id`, params) as Promise<
        Array<{ job_key: string; phase: string; pid: number }>
      >;

    before(async () => {
      db = await scratchDatabase(10);
      ds = db.ds;
      await ds.query(`CREATE TABLE job_runs_test (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, job_key VARCHAR(64) NOT NULL, phase VARCHAR(8) NOT NULL, pid INT NOT NULL
      )`);
    });
    afterEach(async () => {
      for (const w of children.splice(0)) {
        if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
        await w.exited;
      }
      await ds.query('DELETE FROM job_runs_test');
      await ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE}`);
    });
    after(async () => {
      await db.drop();
    });

    it('runs each of 500 one-off jobs exactly once across 4 worker processes', async () => {
      // Enqueued from a process that never processes, like the api role.
      const { queue } = createAgenda(ds, { jobs: { processEveryMs: 1000, claim } });
      const workers = [startWorker(), startWorker(), startWorker(), startWorker()];
      await Promise.all(workers.map(ready));
      for (let i = 0; i < 500; i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => queue.now('mp.record', { key: `job-${i + j}` })));
      }
      await waitFor(
        async () => {
          const [r] = await ds.query(
            `SELECT COUNT(*) AS n FROM ${AGENDA_JOBS_TABLE} WHERE name = 'mp.record' AND last_finished_at IS NOT NULL AND locked_at IS NULL`,
          );
          return Number(r.n) === 500;
        },
        { timeoutMs: 45_000, what: 'all 500 jobs to finish' },
      );
      const done = await runs();
      assert.equal(done.length, 500);
      assert.equal(new Set(done.map((r) => r.job_key)).size, 500);
      // The work was shared, not taken by whichever worker polled first.
      const pids = new Set(done.map((r) => r.pid));
      assert.ok(pids.size >= 2, `only ${pids.size} worker(s) ran jobs`);
      for (const w of workers) w.child.kill('SIGTERM');
      assert.deepEqual(await Promise.all(workers.map((w) => w.exited)), [0, 0, 0, 0]);
    });

    it('hands a job whose worker was SIGKILLed mid-run to another worker after its lock lifetime, and it completes once', async () => {
      const { queue } = createAgenda(ds, { jobs: { processEveryMs: 1000, claim } });
      const victim = startWorker({ HANG: '1', LOCK_LIFETIME_MS: '1500' });
      await ready(victim);
      await queue.now('mp.slow', { key: 'slow-1' });
      await waitFor(async () => (await runs("phase = 'start'")).length === 1, {
        timeoutMs: 10_000,
        what: 'the job to start',
      });
      victim.child.kill('SIGKILL');
      await victim.exited;
      const [locked] = await ds.query(`SELECT locked_at FROM ${AGENDA_JOBS_TABLE} WHERE name = 'mp.slow'`);
      assert.ok(locked.locked_at instanceof Date, 'the dead worker still holds the lock');

      const rescuer = startWorker({ LOCK_LIFETIME_MS: '1500' });
      await ready(rescuer);
      await waitFor(
        async () => {
          const [r] = await ds.query(
            `SELECT locked_at, last_finished_at FROM ${AGENDA_JOBS_TABLE} WHERE name = 'mp.slow'`,
          );
          return r.last_finished_at instanceof Date && r.locked_at === null;
        },
        { timeoutMs: 15_000, what: 'the takeover to complete' },
      );
      // With the last live worker drained and gone, no run can start any more: what is recorded is all there is.
      rescuer.child.kill('SIGTERM');
      assert.equal(await rescuer.exited, 0, rescuer.output());
      const all = await runs();
      assert.deepEqual(
        all.map((r) => [r.phase, r.pid]),
        [
          ['start', victim.child.pid],
          ['start', rescuer.child.pid],
          ['done', rescuer.child.pid],
        ],
      );
      const [row] = await ds.query(
        `SELECT locked_at, last_finished_at, next_run_at FROM ${AGENDA_JOBS_TABLE} WHERE name = 'mp.slow'`,
      );
      assert.equal(row.locked_at, null);
      assert.equal(row.next_run_at, null);
      assert.ok(row.last_finished_at instanceof Date);
    });

    it('keeps a repeating job as one row through restarts and overlapping workers, and it keeps running', async () => {
      const first = startWorker({ EVERY_MS: '200' });
      await ready(first);
      await waitFor(async () => (await runs("job_key = 'tick'")).length >= 2, {
        timeoutMs: 10_000,
        what: 'ticks from the first worker',
      });
      first.child.kill('SIGTERM');
      assert.equal(await first.exited, 0);
      const before = (await runs("job_key = 'tick'")).length;

      const second = startWorker({ EVERY_MS: '200' });
      const third = startWorker({ EVERY_MS: '200' });
      await Promise.all([ready(second), ready(third)]);
      await waitFor(async () => (await runs("job_key = 'tick'")).length >= before + 3, {
        timeoutMs: 10_000,
        what: 'ticks after the restart',
      });
      const rows = await ds.query(`SELECT id, type FROM ${AGENDA_JOBS_TABLE} WHERE name = 'mp.tick'`);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].type, 'single');
      const later = await runs("job_key = 'tick' AND pid IN (?, ?)", [second.child.pid, third.child.pid]);
      assert.ok(later.length >= 1);
    });
  });
}
