import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import {
  closeTestDatabase,
  dropRunFamily,
  ensureConnectionHeadroom,
  RUN_FAMILY_VARIABLE,
  runCleanups,
  testDataSource,
} from './db.js';
import { assertLedgerConsistent } from './ledger.js';
import { newRunUidSlot, RUN_UID_SLOT_VARIABLE } from './sandbox-uids.js';

/**
 * Drops one-off jobs nobody holds: what an earlier file queued (rentals made in API tests queue
 * provisioning) must not run in a later file's test worker on the same database. Locked rows
 * belong to a worker still draining and are left to it.
 */
export async function clearLeftoverJobs(ds: DataSource): Promise<void> {
  await deleteJobs(ds, `DELETE FROM ${AGENDA_JOBS_TABLE} WHERE type = 'normal' AND locked_at IS NULL`);
}

/**
 * Runs a clean-up DELETE of jobs, again when InnoDB chose it as a deadlock's victim: a worker of
 * the file before may still be writing its last rows on a loaded machine, and the deadlock leaves
 * nothing done, so running it again is the answer InnoDB asks for.
 */
async function deleteJobs(ds: DataSource, sql: string): Promise<void> {
  for (let tries = 1; ; tries++) {
    try {
      await ds.query(sql);
      return;
    } catch (err) {
      const e = err as { code?: string; driverError?: { code?: string } };
      if (tries >= 5 || (e.code ?? e.driverError?.code) !== 'ER_LOCK_DEADLOCK') throw err;
    }
  }
}

/**
 * Drops the rows of repeating jobs a file scheduled (`scheduleRepeating`), once its workers have
 * stopped: a later file's test worker on the same database would otherwise run them on their wall-
 * clock intervals (an idle sweep of its own beside the one its test drives, say).
 */
async function clearRepeatingJobs(ds: DataSource): Promise<void> {
  await deleteJobs(ds, `DELETE FROM ${AGENDA_JOBS_TABLE} WHERE type = 'single' AND locked_at IS NULL`);
}

let currentFile: string | undefined;

/**
 * In a parallel run (`--parallel`) each worker process runs many files, and mocha runs the root
 * hooks' beforeAll and afterAll around each file there: the worker keeps its database from one
 * file to the next (migrating it once), and only the file's clean-ups run after it. The databases
 * go in the global teardown, in mocha's main process, once every worker is done.
 */
const inWorker = process.env.MOCHA_WORKER_ID !== undefined;

/**
 * Mocha global fixtures (main process): one database name prefix for every worker of the run, and
 * their removal at its end. Always a new prefix: a mocha a test starts inherits this process's
 * environment, and its own teardown must not drop the databases of the run that started it.
 */
export async function mochaGlobalSetup(): Promise<void> {
  process.env[RUN_FAMILY_VARIABLE] = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  process.env[RUN_UID_SLOT_VARIABLE] = newRunUidSlot();
  await ensureConnectionHeadroom();
}

export async function mochaGlobalTeardown(): Promise<void> {
  const family = process.env[RUN_FAMILY_VARIABLE];
  if (family) await dropRunFamily(family);
}

/** Mocha root hooks: one database per run (per worker process in a parallel run), no jobs carried from one file to the next, and the money invariant after every test. */
export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await testDataSource();
  },
  async beforeEach(this: Mocha.Context) {
    const file = this.currentTest?.file;
    if (file === currentFile) return;
    currentFile = file;
    await clearLeftoverJobs(await testDataSource());
  },
  async afterEach() {
    await assertLedgerConsistent(await testDataSource());
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    if (inWorker) {
      await runCleanups();
      await clearRepeatingJobs(await testDataSource());
    } else await closeTestDatabase();
  },
};
