import { randomBytes } from 'node:crypto';
import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { migrations } from '../../migrations/index.js';
import { createDatabaseIfMissing, createDataSource, dropDatabase } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import { testDatabaseUrl } from './db.js';

/** A database of a test's own, migrated up to just before one migration, for testing that migration on old rows. */
export interface DatabaseBefore {
  ds: DataSource;
  /** A query runner on it, for seeding rows of the old schema and running the migration's `up`. */
  runner: QueryRunner;
  /** Releases the runner, closes the DataSource and drops the database. */
  close(): Promise<void>;
}

/** Creates a child database of the run's and applies every migration before `stop`. */
export async function databaseBefore(stop: new () => MigrationInterface, tag: string): Promise<DatabaseBefore> {
  const url = new URL(testDatabaseUrl);
  url.pathname = `${url.pathname}_${tag}_${randomBytes(3).toString('hex')}`;
  await createDatabaseIfMissing(url.toString());
  const ds = createDataSource(url.toString(), 2, entities);
  await ds.initialize();
  const runner = ds.createQueryRunner();
  for (const M of migrations) {
    if (M === stop) break;
    await new M().up(runner);
  }
  return {
    ds,
    runner,
    async close() {
      await runner.release();
      await ds.destroy();
      await dropDatabase(url.toString());
    },
  };
}
