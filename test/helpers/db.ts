import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../../src/db/data-source.js';

const BASE = process.env.TEST_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/';

/** One fresh database per test run (never the dev database), dropped at the end of the run. */
export const testDatabaseUrl = (() => {
  const u = new URL(BASE);
  u.pathname = `/gpu_rental_test_${Date.now().toString(36)}_${process.pid}_${randomBytes(3).toString('hex')}`;
  return u.toString();
})();

let shared: DataSource | undefined;

/** The run's migrated DataSource, created on first use. */
export async function testDataSource(): Promise<DataSource> {
  if (!shared) {
    await createDatabaseIfMissing(testDatabaseUrl);
    const ds = createDataSource(testDatabaseUrl, 20);
    await ds.initialize();
    await migrate(ds);
    shared = ds;
  }
  return shared;
}

export async function closeTestDatabase(): Promise<void> {
  if (shared) {
    await shared.destroy();
    shared = undefined;
  }
  if (!process.env.KEEP_TEST_DATABASE) await dropDatabase(testDatabaseUrl);
}
