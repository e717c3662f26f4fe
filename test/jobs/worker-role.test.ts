import assert from 'node:assert/strict';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { spawnService } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { scratchDatabase } from './scratch-database.js';

describe('jobs: the worker role', function () {
  this.timeout(40_000);

  it('schedules the periodic jobs as single Agenda rows, runs them, and drains on SIGTERM', async () => {
    const db = await scratchDatabase(4);
    try {
      const env = { DATABASE_URL: db.url, JOBS_PROCESS_EVERY_MS: '100', INVENTORY_REFRESH_SECONDS: '1' };
      const svc = spawnService(['--role', 'worker'], env);
      const svcPids: { second?: number } = {};
      try {
        // A refresh finished by Agenda (not only the warm-up call at start) proves the job runs.
        await waitFor(
          async () => {
            const [r] = await db.ds.query(
              `SELECT last_finished_at FROM ${AGENDA_JOBS_TABLE} WHERE name = 'inventory.refresh'`,
            );
            return r?.last_finished_at instanceof Date;
          },
          { what: () => `inventory.refresh to run (${svc.stderr()})` },
        );
        // A second worker process declares the same jobs without adding rows.
        const other = spawnService(['--role', 'worker'], env);
        svcPids.second = other.child.pid;
        await waitFor(
          async () => {
            // Every periodic row, so its start-up is past the declarations before it is told to stop.
            const r = await db.ds.query(`SELECT 1 FROM ${AGENDA_JOBS_TABLE} WHERE last_modified_by LIKE ?`, [
              `%:${other.child.pid}`,
            ]);
            return r.length >= 4;
          },
          { what: () => `second worker to declare its jobs (${other.stderr()})` },
        );
        other.child.kill('SIGTERM');
        assert.equal(await other.exited, 0, other.stderr());
      } finally {
        svc.child.kill('SIGTERM');
      }
      assert.equal(await svc.exited, 0, svc.stderr());
      const rows: Array<{
        name: string;
        type: string;
        repeat_interval: string;
        locked_at: Date | null;
        last_modified_by: string | null;
        last_run_at: Date | null;
        last_finished_at: Date | null;
      }> = await db.ds.query(
        `SELECT name, type, repeat_interval, locked_at, last_modified_by, last_run_at, last_finished_at FROM ${AGENDA_JOBS_TABLE} ORDER BY name`,
      );
      // Who touched a row last and when it ran, should a lock ever be left behind.
      const evidence = JSON.stringify({
        rows,
        first: svc.child.pid,
        second: svcPids.second,
        logs: svc.stderr().slice(-2000),
      });
      assert.deepEqual(
        rows.map((r) => [r.name, r.type, r.repeat_interval, r.locked_at]),
        [
          ['inventory.refresh', 'single', '1000', null],
          ['oauth.purge', 'single', String(10 * 60 * 1000), null],
          ['payments.reconcile', 'single', String(5 * 60 * 1000), null],
          ['rental.idle', 'single', '10000', null],
          ['rental.meter', 'single', '15000', null],
          ['rental.reconcile', 'single', '60000', null],
          ['webhooks.dispatch', 'single', '1000', null],
        ],
        evidence,
      );
    } finally {
      await db.drop();
    }
  });
});
