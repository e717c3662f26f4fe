import type { DataSource } from 'typeorm';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { closeTestDatabase, testDataSource } from './db.js';
import { assertLedgerConsistent } from './ledger.js';

/**
 * Drops one-off jobs nobody holds: what an earlier file queued (rentals made in API tests queue
 * provisioning) must not run in a later file's test worker on the same database. Locked rows
 * belong to a worker still draining and are left to it.
 */
export async function clearLeftoverJobs(ds: DataSource): Promise<void> {
  await ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE} WHERE type = 'normal' AND locked_at IS NULL`);
}

let currentFile: string | undefined;

/** Mocha root hooks: one database per run, no jobs carried from one file to the next, and the money invariant after every test. */
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
    await closeTestDatabase();
  },
};
