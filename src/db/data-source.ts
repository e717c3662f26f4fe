import mysql from 'mysql2/promise';
import { DataSource } from 'typeorm';
import { migrations } from '../../migrations/index.js';
import { entities } from './entities.js';

export interface DatabaseTarget {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

export function parseDatabaseUrl(databaseUrl: string): DatabaseTarget {
  const u = new URL(databaseUrl);
  const database = decodeURIComponent(u.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_$]{1,64}$/.test(database)) {
    throw new Error(`DATABASE_URL must name a database of letters, digits and underscores, got "${database}"`);
  }
  return {
    host: u.hostname || '127.0.0.1',
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username || 'root'),
    password: decodeURIComponent(u.password),
    database,
  };
}

/** Where we tried to connect, without the password, for messages and logs. */
export function describeTarget(t: DatabaseTarget): string {
  return `mysql://${t.user}@${t.host}:${t.port}/${t.database}`;
}

export function createDataSource(databaseUrl: string, poolSize = 10): DataSource {
  const t = parseDatabaseUrl(databaseUrl);
  return new DataSource({
    type: 'mysql',
    host: t.host,
    port: t.port,
    username: t.user,
    password: t.password,
    database: t.database,
    timezone: 'Z',
    charset: 'utf8mb4_bin',
    supportBigNumbers: true,
    bigNumberStrings: false,
    entities,
    migrations,
    migrationsRun: false,
    synchronize: false,
    logging: false,
    poolSize,
    // mysql2's `trace` (on by default) allocates an Error per query to capture the caller's stack;
    // only its promise API does so, and TypeORM drives the callback API, but the pool is shared
    // with whatever else reaches it, so it is off: errors carry the SQL and driver code instead.
    //
    // multipleStatements lets SqlTransaction (src/db/sql.ts) send a tick's statements in one round
    // trip. No statement of this service is built from a value: values are `?` parameters, which
    // mysql2 escapes, and only constants of our own code (table and column names, placeholder
    // lists) are spliced into SQL text, which test/unit/architecture.test.ts holds to.
    extra: { connectionLimit: poolSize, trace: false, multipleStatements: true },
  });
}

/** Creates the database unless it exists; true when this call created it. */
export async function createDatabaseIfMissing(databaseUrl: string): Promise<boolean> {
  const t = parseDatabaseUrl(databaseUrl);
  const conn = await mysql.createConnection({ host: t.host, port: t.port, user: t.user, password: t.password, connectTimeout: 5000 });
  try {
    const [result] = await conn.query(`CREATE DATABASE IF NOT EXISTS \`${t.database}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
    // MySQL answers an existing database with a warning instead of an error.
    return (result as { warningStatus?: number }).warningStatus === 0;
  } finally {
    await conn.end();
  }
}

/**
 * Runs pending migrations (returning their names) under a MySQL named lock, so several processes starting at once
 * migrate exactly once and the others wait for it.
 */
export async function migrate(ds: DataSource, lockTimeoutSeconds = 120): Promise<string[]> {
  const runner = ds.createQueryRunner();
  await runner.connect();
  try {
    const lockName = `${ds.options.database}.migrations`;
    const [row] = await runner.query('SELECT GET_LOCK(?, ?) AS ok', [lockName, lockTimeoutSeconds]);
    if (Number(row.ok) !== 1) throw new Error(`timed out after ${lockTimeoutSeconds}s waiting for the migration lock`);
    try {
      return (await ds.runMigrations({ transaction: 'each' })).map((m) => m.name);
    } finally {
      await runner.query('SELECT RELEASE_LOCK(?)', [lockName]);
    }
  } finally {
    await runner.release();
  }
}

export async function dropDatabase(databaseUrl: string): Promise<void> {
  const t = parseDatabaseUrl(databaseUrl);
  const conn = await mysql.createConnection({ host: t.host, port: t.port, user: t.user, password: t.password });
  try {
    await conn.query(`DROP DATABASE IF EXISTS \`${t.database}\``);
  } finally {
    await conn.end();
  }
}
