import type { DataSource } from 'typeorm';
import { inTransaction } from '../db/transaction.js';

// The only code that reads or writes `rate_limit_counters`: one row per bucket and fixed window,
// shared by every api process.

/**
 * Counts one hit in the bucket's window and reads the window's count, this hit included. Both
 * happen in one transaction holding the counter row lock, so each hit sees its own exact
 * position in the window.
 */
export async function countHit(ds: DataSource, bucket: string, windowStart: Date): Promise<number> {
  return inTransaction(ds, async (m) => {
    await m.query(
      `INSERT INTO rate_limit_counters (bucket, window_start, count) VALUES (?, ?, 1)
           ON DUPLICATE KEY UPDATE count = count + 1`,
      [bucket, windowStart],
    );
    const [row] = await m.query(`SELECT count FROM rate_limit_counters WHERE bucket = ? AND window_start = ?`, [
      bucket,
      windowStart,
    ]);
    return Number(row.count);
  });
}

/** The hits counted so far in the bucket's window, without counting one; null when the window has none. */
export async function hitsInWindow(ds: DataSource, bucket: string, windowStart: Date): Promise<number | null> {
  const [row] = await ds.query(`SELECT count FROM rate_limit_counters WHERE bucket = ? AND window_start = ?`, [
    bucket,
    windowStart,
  ]);
  return row ? Number(row.count) : null;
}

/** Drops the windows that started before `before`. */
export async function dropWindowsBefore(ds: DataSource, before: Date): Promise<void> {
  await ds.query(`DELETE FROM rate_limit_counters WHERE window_start < ?`, [before]);
}
