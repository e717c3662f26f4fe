import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { isRetryableTxError } from './transaction.js';

/**
 * The lock row's table. Like TypeORM's own `migrations` table it exists before any migration
 * runs, so it is created here rather than by one. A row, not GET_LOCK: on a Galera cluster
 * GET_LOCK is local to the node that granted it, so processes on two nodes would both migrate;
 * a row is replicated and certified, so only one insert of it can commit cluster-wide.
 */
const CREATE_LOCK_TABLE =
  'CREATE TABLE IF NOT EXISTS migration_lock (' +
  'name VARCHAR(64) NOT NULL PRIMARY KEY, holder CHAR(36) NOT NULL, expires_at DATETIME(6) NOT NULL' +
  ') ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin';

const LOCK_NAME = 'migrations';

/**
 * How long a lock stays taken without being renewed. The holder renews it every quarter of
 * that; a holder that died (SIGKILL, a lost host) frees it when this runs out.
 */
export const MIGRATION_LEASE_SECONDS = 60;

function pause(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** One try at taking the lock: true when this holder now has it. */
async function tryTake(ds: DataSource, holder: string, leaseSeconds: number): Promise<boolean> {
  try {
    await ds.query('DELETE FROM migration_lock WHERE name = ? AND expires_at < NOW(6)', [LOCK_NAME]);
    await ds.query('INSERT INTO migration_lock (name, holder, expires_at) VALUES (?, ?, NOW(6) + INTERVAL ? SECOND)', [
      LOCK_NAME,
      holder,
      leaseSeconds,
    ]);
    return true;
  } catch (err) {
    const code =
      (err as { code?: string; driverError?: { code?: string } }).driverError?.code ?? (err as { code?: string }).code;
    // Taken by someone else: on one server a duplicate key; on a cluster, when two nodes insert at
    // once, the loser's insert fails certification (a deadlock error) instead.
    if (code === 'ER_DUP_ENTRY' || isRetryableTxError(err)) return false;
    throw err;
  }
}

/**
 * Runs `fn` while holding the database's migration lock, waiting up to `timeoutSeconds` for it:
 * whichever process comes first migrates, the others wait and then find nothing to do. Works the
 * same on one server and on a multi-primary (Galera) cluster.
 */
export async function withMigrationLock<T>(
  ds: DataSource,
  timeoutSeconds: number,
  fn: () => Promise<T>,
  leaseSeconds = MIGRATION_LEASE_SECONDS,
): Promise<T> {
  await ds.query(CREATE_LOCK_TABLE);
  const holder = randomUUID();
  const deadline = Date.now() + timeoutSeconds * 1000;
  while (!(await tryTake(ds, holder, leaseSeconds))) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutSeconds}s waiting for the migration lock`);
    await pause(100 + Math.random() * 200);
  }
  const renew = setInterval(
    () => {
      ds.query('UPDATE migration_lock SET expires_at = NOW(6) + INTERVAL ? SECOND WHERE name = ? AND holder = ?', [
        leaseSeconds,
        LOCK_NAME,
        holder,
      ]).catch(() => undefined); // a missed renewal is tried again at the next tick; the lease is 4 ticks long
    },
    (leaseSeconds * 1000) / 4,
  );
  renew.unref();
  try {
    return await fn();
  } finally {
    clearInterval(renew);
    await ds.query('DELETE FROM migration_lock WHERE name = ? AND holder = ?', [LOCK_NAME, holder]);
  }
}
