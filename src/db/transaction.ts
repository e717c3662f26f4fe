import type { DataSource, EntityManager } from 'typeorm';
import type { IsolationLevel } from 'typeorm/driver/types/IsolationLevel.js';

const RETRYABLE = new Set(['ER_LOCK_DEADLOCK', 'ER_LOCK_WAIT_TIMEOUT']);

/**
 * Tries of one transaction before its deadlock or lock-wait error is thrown. Eight, for the
 * busiest caller: the job claims and unique enqueues of many workers on one table
 * (test/jobs' claim races) lose more often than any other transaction, and the rest only gain
 * from the extra tries.
 */
export const TRANSACTION_ATTEMPTS = 8;

export function isRetryableTxError(err: unknown): boolean {
  const e = err as { code?: string; driverError?: { code?: string } };
  return RETRYABLE.has(e?.code ?? '') || RETRYABLE.has(e?.driverError?.code ?? '');
}

/**
 * Runs `fn` in a transaction and reruns it when InnoDB picks it as a deadlock victim or a lock
 * wait times out: both roll back the whole transaction, so running it again is safe.
 * `isolation` applies to this transaction only (the server's default otherwise).
 */
export function inTransaction<T>(
  ds: DataSource,
  fn: (m: EntityManager) => Promise<T>,
  isolation?: IsolationLevel,
): Promise<T> {
  return retryingTransaction(() => (isolation ? ds.transaction(isolation, fn) : ds.transaction(fn)));
}

/**
 * Runs one whole transaction (`once`) and runs it again, a little later, when it is retryable:
 * the one retry rule of the service (TypeORM transactions, plain mysql2 ones, job claims).
 */
export async function retryingTransaction<T>(once: () => Promise<T>, attempts = TRANSACTION_ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await once();
    } catch (err) {
      if (attempt >= attempts || !isRetryableTxError(err)) throw err;
      await backoff(attempt);
    }
  }
}

/**
 * The wait before retry number `attempt`: longer each time, and random, so two victims of one
 * deadlock do not meet again at once (2 to 12 ms times the attempt; under 0.4 s in all).
 */
function backoff(attempt: number): Promise<void> {
  return new Promise((r) => setTimeout(r, attempt * (2 + Math.random() * 10)));
}
