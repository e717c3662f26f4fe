import type { DataSource, EntityManager } from 'typeorm';

const RETRYABLE = new Set(['ER_LOCK_DEADLOCK', 'ER_LOCK_WAIT_TIMEOUT']);

export function isRetryableTxError(err: unknown): boolean {
  const e = err as { code?: string; driverError?: { code?: string } };
  return RETRYABLE.has(e?.code ?? '') || RETRYABLE.has(e?.driverError?.code ?? '');
}

/**
 * Runs `fn` in a transaction and reruns it when InnoDB picks it as a deadlock victim or a lock
 * wait times out: both roll back the whole transaction, so running it again is safe.
 */
export function inTransaction<T>(ds: DataSource, fn: (m: EntityManager) => Promise<T>, attempts = 4): Promise<T> {
  return retryingTransaction(() => ds.transaction(fn), attempts);
}

/** Runs one whole transaction (`once`) and runs it again, a little later, when it is retryable. */
export async function retryingTransaction<T>(once: () => Promise<T>, attempts = 4): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await once();
    } catch (err) {
      if (i >= attempts || !isRetryableTxError(err)) throw err;
      await new Promise((r) => setTimeout(r, 5 * i + Math.random() * 20));
    }
  }
}
