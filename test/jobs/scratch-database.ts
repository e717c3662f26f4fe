import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import { testDatabaseUrl } from '../helpers/db.js';

/**
 * A migrated database of its own for job tests that purge or count the whole jobs table, so
 * they cannot touch rows other test files left in the run's shared database.
 */
export async function scratchDatabase(poolSize = 20): Promise<{ url: string; ds: DataSource; drop(): Promise<void> }> {
  const u = new URL(testDatabaseUrl);
  u.pathname = `${u.pathname}_j${randomBytes(2).toString('hex')}`;
  const url = u.toString();
  await createDatabaseIfMissing(url);
  const ds = createDataSource(url, poolSize, entities);
  await ds.initialize();
  await migrate(ds);
  return {
    url,
    ds,
    async drop() {
      await ds.destroy();
      if (!process.env.KEEP_TEST_DATABASE) await dropDatabase(url);
    },
  };
}
