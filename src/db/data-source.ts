import mysql from 'mysql2/promise';
import mysqlCallbacks from 'mysql2';
import type { Pool, PoolConnection, PoolOptions } from 'mysql2';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { migrations } from '../../migrations/index.js';
import { withMigrationLock } from './migration-lock.js';

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

/**
 * The session `sql_mode` every connection of ours runs under. mysql2 formats values into SQL text
 * on the client, escaping a quote as `\'`; a server whose mode holds NO_BACKSLASH_ESCAPES reads that
 * backslash as a literal and the quote as the string's end, so a value could close its string and
 * (with multiple statements) run SQL of its own. A server's global mode is the operator's to choose;
 * our sessions pin theirs so that the escaping mysql2 does is the escaping the server reads, and
 * strict, as the schema expects. Every mode named here also exists on MySQL 8.
 */
export const SESSION_SQL_MODE = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

/** Modes under which client-side escaping, or our SQL text, would mean something else. */
const UNSAFE_SQL_MODES = ['NO_BACKSLASH_ESCAPES', 'ANSI_QUOTES', 'PIPES_AS_CONCAT', 'ANSI'];

/** Sets {@link SESSION_SQL_MODE} on a new connection before anything else can use it. */
function pinSessionMode(conn: PoolConnection): void {
  // A connection's commands run in the order they were issued, and the pool hands the connection
  // out only after this event, so the SET runs before any statement of ours. If it fails the
  // connection is destroyed before the next command starts, so nothing runs under the server's mode.
  conn.query(`SET SESSION sql_mode = '${SESSION_SQL_MODE}'`, (err) => {
    if (err) conn.destroy();
  });
}

/**
 * mysql2 as TypeORM's driver module, with pools that pin every new connection's session mode.
 * (TypeORM opens its first connection inside `createPool`, so the listener must be there first.)
 */
const pinnedMysql = {
  ...mysqlCallbacks,
  createPool(options: PoolOptions): Pool {
    const pool = mysqlCallbacks.createPool(options);
    pool.on('connection', pinSessionMode);
    return pool;
  },
};

/**
 * Refuses to go on when a connection of `ds` does not run under the pinned mode (a proxy that
 * resets sessions, a driver change): the service would otherwise start on a server where the
 * values it sends are read differently from how they were escaped.
 */
export async function assertSessionSqlMode(ds: DataSource): Promise<void> {
  const [row] = (await ds.query('SELECT @@SESSION.sql_mode AS mode')) as { mode: string }[];
  const modes = String(row?.mode ?? '')
    .toUpperCase()
    .split(',');
  const unsafe = UNSAFE_SQL_MODES.filter((m) => modes.includes(m));
  if (unsafe.length > 0) {
    throw new Error(
      `the database session runs with sql_mode ${unsafe.join(', ')}, under which this service's escaping of values is unsafe; ` +
        `the service sets sql_mode='${SESSION_SQL_MODE}' on each connection and something undid it (a proxy that resets sessions?)`,
    );
  }
}

/** The entity classes a DataSource maps (src/entities.ts lists the service's). */
/** Whether the database answers a query now (health checks); throws what the driver throws. */
export async function databaseAnswers(ds: DataSource): Promise<boolean> {
  return (await ds.query('SELECT 1')).length === 1;
}

export type EntityList = NonNullable<DataSourceOptions['entities']>;

/**
 * A DataSource on `databaseUrl` with `poolSize` connections, mapping `entities`. The caller names
 * the entities, so that this layer knows no module: src/entities.ts lists the service's.
 */
export function createDataSource(databaseUrl: string, poolSize: number, entities: EntityList): DataSource {
  const t = parseDatabaseUrl(databaseUrl);
  return new DataSource({
    type: 'mysql',
    driver: pinnedMysql,
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
    // mysql2 escapes (safely only under the session mode pinned above), and only constants of our
    // own code (table and column names, placeholder lists) are spliced into SQL text, which
    // test/unit/architecture.test.ts holds to.
    extra: { connectionLimit: poolSize, trace: false, multipleStatements: true },
  });
}

/** Creates the database unless it exists; true when this call created it. */
export async function createDatabaseIfMissing(databaseUrl: string): Promise<boolean> {
  const t = parseDatabaseUrl(databaseUrl);
  const conn = await mysql.createConnection({
    host: t.host,
    port: t.port,
    user: t.user,
    password: t.password,
    connectTimeout: 5000,
  });
  try {
    const [result] = await conn.query(
      `CREATE DATABASE IF NOT EXISTS \`${t.database}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
    );
    // MySQL answers an existing database with a warning instead of an error.
    return (result as { warningStatus?: number }).warningStatus === 0;
  } finally {
    await conn.end();
  }
}

/**
 * Runs pending migrations (returning their names) under the migration lock (a lock row, see
 * src/db/migration-lock.ts, which holds across the nodes of a Galera cluster too), so several
 * processes starting at once migrate exactly once and the others wait for it. Every process
 * migrates before it serves or works, so this is also where a session whose `sql_mode` would make
 * escaped values unsafe stops the start.
 */
export async function migrate(ds: DataSource, lockTimeoutSeconds = 120): Promise<string[]> {
  await assertSessionSqlMode(ds);
  return withMigrationLock(ds, lockTimeoutSeconds, async () =>
    (await ds.runMigrations({ transaction: 'each' })).map((m) => m.name),
  );
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
