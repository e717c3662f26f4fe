import type { Executor } from '../db/mysql-store.js';

// The only code that reads or writes `rate_limit_counters`: one row per bucket and fixed window,
// shared by every api process.

/** The fixed-window hit counters of the rate limiter: the aggregate of `rate_limit_counters`. */
export interface RateLimitsRepository {
  /**
   * Counts one hit in the bucket's window and reads the window's count, this hit included. In a
   * transaction: the count's row lock, taken by the write, holds until commit, so each hit sees
   * its own exact position in the window.
   */
  countHit(bucket: string, windowStart: Date): Promise<number>;
  /** The hits counted so far in the bucket's window, without counting one; null when the window has none. */
  hitsInWindow(bucket: string, windowStart: Date): Promise<number | null>;
  /** Drops the windows that started before `before`. Stands alone. */
  dropWindowsBefore(before: Date): Promise<void>;
}

export class MysqlRateLimitsRepository implements RateLimitsRepository {
  constructor(private readonly sql: Executor) {}

  async countHit(bucket: string, windowStart: Date): Promise<number> {
    await this.sql.query(
      `INSERT INTO rate_limit_counters (bucket, window_start, count) VALUES (?, ?, 1)
           ON DUPLICATE KEY UPDATE count = count + 1`,
      [bucket, windowStart],
    );
    const [row] = await this.sql.query(`SELECT count FROM rate_limit_counters WHERE bucket = ? AND window_start = ?`, [
      bucket,
      windowStart,
    ]);
    return Number(row.count);
  }

  async hitsInWindow(bucket: string, windowStart: Date): Promise<number | null> {
    const [row] = await this.sql.query(`SELECT count FROM rate_limit_counters WHERE bucket = ? AND window_start = ?`, [
      bucket,
      windowStart,
    ]);
    return row ? Number(row.count) : null;
  }

  async dropWindowsBefore(before: Date): Promise<void> {
    await this.sql.query(`DELETE FROM rate_limit_counters WHERE window_start < ?`, [before]);
  }
}
