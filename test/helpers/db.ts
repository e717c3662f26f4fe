import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import {
  createDatabaseIfMissing,
  createDataSource,
  dropDatabase,
  migrate,
  parseDatabaseUrl,
} from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';

const BASE = process.env.TEST_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/';

/**
 * What one test run shares, kept on `globalThis` rather than in this module: mocha loads a test
 * file with require() unless something it imports needs ESM (a module with top-level await),
 * and then with import(), so a run can hold two copies of this file. Each copy used to name,
 * create and keep a database of its own while only the root hooks' copy dropped one.
 */
interface RunState {
  url: string;
  /** Every copy's DataSource, closed before the database is dropped. */
  sources: Set<DataSource>;
  /** Work to do when the run ends, whichever test registered it (see {@link atRunEnd}). */
  cleanups: Array<() => Promise<void> | void>;
}

/**
 * Set by the root hooks' global setup (test/helpers/root-hooks.ts) in a parallel run's main
 * process, so that every worker's database shares one prefix and the global teardown can drop them
 * all, whichever worker made them.
 */
export const RUN_FAMILY_VARIABLE = 'GPU_RENTAL_TEST_RUN';
const DATABASE_PREFIX = 'gpu_rental_test_';

const RUN_KEY = Symbol.for('gpu-rental.test-run');
const run = ((globalThis as Record<symbol, unknown>)[RUN_KEY] ??= {
  url: (() => {
    const u = new URL(BASE);
    const family = process.env[RUN_FAMILY_VARIABLE] ?? Date.now().toString(36);
    // The random tail keeps one run's name from being the prefix of another's (pid 12 and 123).
    u.pathname = `/${DATABASE_PREFIX}${family}_${process.pid}_${randomBytes(3).toString('hex')}`;
    return u.toString();
  })(),
  sources: new Set(),
  cleanups: [],
} satisfies RunState) as RunState;

/** One fresh database per test run (never the dev database), dropped at the end of the run with its children. */
export const testDatabaseUrl = run.url;

/**
 * A database URL of the run's family (`<run database>_<tag><random>`): whatever creates it, the
 * end of the run drops it, even when the test that made it never got to its own clean-up.
 */
export function childDatabaseUrl(tag: string): string {
  const u = new URL(testDatabaseUrl);
  u.pathname = `${u.pathname}_${tag}${randomBytes(4).toString('hex')}`;
  return u.toString();
}

/** Registers work for the end of the run (after every file), e.g. removing a server's data directory. */
export function atRunEnd(cleanup: () => Promise<void> | void): void {
  run.cleanups.push(cleanup);
}

// Per copy of this module: each copy's entities are its own classes, so each needs its own DataSource.
let shared: Promise<DataSource> | undefined;

/** The run's migrated DataSource, created on first use. */
export function testDataSource(): Promise<DataSource> {
  shared ??= (async () => {
    await createDatabaseIfMissing(testDatabaseUrl);
    const ds = createDataSource(testDatabaseUrl, 20, entities);
    await ds.initialize();
    run.sources.add(ds);
    await migrate(ds);
    return ds;
  })();
  return shared;
}

/** The run's database and every child database still on the server (names from {@link childDatabaseUrl} and alike). */
export function runDatabases(): Promise<string[]> {
  return databasesStartingWith(parseDatabaseUrl(testDatabaseUrl).database);
}

/** The databases on the test server whose names start with `prefix`. */
async function databasesStartingWith(prefix: string): Promise<string[]> {
  const t = parseDatabaseUrl(testDatabaseUrl);
  const conn = await mysql.createConnection({ host: t.host, port: t.port, user: t.user, password: t.password });
  try {
    // `_` is a LIKE wildcard; the run's name contains several.
    const pattern = `${prefix.replace(/[\\_%]/g, (c) => `\\${c}`)}%`;
    const [rows] = await conn.query('SHOW DATABASES LIKE ?', [pattern]);
    return (rows as Record<string, string>[]).map((r) => Object.values(r)[0]);
  } finally {
    await conn.end();
  }
}

/**
 * Connections one run may hold at its peak (two workers, each with contexts, pools and the services
 * it spawns), with room for a second run beside it: MariaDB's default of 151 is about one run's peak.
 */
export const RUN_CONNECTIONS = 300;

/**
 * Raises the test server's `max_connections` to leave every run beside this one its
 * {@link RUN_CONNECTIONS}, when it is lower (never lowers it); says so in one line. A server that
 * refuses (no privilege) is told in one line naming the statement, and the run goes on.
 */
export async function ensureConnectionHeadroom(log: (line: string) => void = console.error): Promise<void> {
  const t = parseDatabaseUrl(testDatabaseUrl);
  const conn = await mysql.createConnection({ host: t.host, port: t.port, user: t.user, password: t.password });
  try {
    const want = 2 * RUN_CONNECTIONS;
    const [rows] = await conn.query('SELECT @@GLOBAL.max_connections AS n');
    const now = Number((rows as { n: number | string }[])[0].n);
    if (now >= want) return;
    try {
      await conn.query('SET GLOBAL max_connections = ?', [want]);
      log(`test setup: raised the test server's max_connections from ${now} to ${want}, for two runs side by side`);
    } catch (err) {
      log(
        `test setup: max_connections is ${now}, below ${want} for two runs side by side, and could not be raised ` +
          `(${(err as { code?: string }).code ?? err}); run SET GLOBAL max_connections = ${want} as an administrator`,
      );
    }
  } finally {
    await conn.end();
  }
}

/** Drops every database of the run family `family` (all the workers' of a parallel run), and their children. */
export async function dropRunFamily(family: string): Promise<void> {
  if (process.env.KEEP_TEST_DATABASE) return;
  const base = new URL(testDatabaseUrl);
  for (const name of await databasesStartingWith(`${DATABASE_PREFIX}${family}_`)) {
    base.pathname = `/${name}`;
    await dropDatabase(base.toString());
  }
}

/** Runs the clean-ups registered so far (with {@link atRunEnd}), the last first; throws what failed once all have run. */
export async function runCleanups(): Promise<void> {
  const failures = await cleanUp();
  if (failures.length) throw new AggregateError(failures, 'clean-ups at the end of the test run failed');
}

async function cleanUp(): Promise<unknown[]> {
  const failures: unknown[] = [];
  for (const cleanup of run.cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch (err) {
      failures.push(err);
    }
  }
  return failures;
}

/** Ends the run: registered clean-ups, every DataSource on the run's database, then the database and its children. */
export async function closeTestDatabase(): Promise<void> {
  const failures = await cleanUp();
  for (const ds of [...run.sources]) {
    run.sources.delete(ds);
    if (ds.isInitialized) await ds.destroy();
  }
  shared = undefined;
  if (!process.env.KEEP_TEST_DATABASE) {
    const base = new URL(testDatabaseUrl);
    for (const name of await runDatabases()) {
      base.pathname = `/${name}`;
      await dropDatabase(base.toString());
    }
  }
  if (failures.length) throw new AggregateError(failures, 'clean-ups at the end of the test run failed');
}
