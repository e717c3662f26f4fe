import type { RateLimitsRepository } from '../../../src/http/rate-limits.repository.js';
import type { MemoryTables } from './memory-store.js';

interface CounterRow {
  bucket: string;
  windowStart: Date;
  count: number;
}

/** `window_start` is a DATETIME without fractions: MariaDB keeps whole seconds. */
const wholeSeconds = (d: Date) => new Date(Math.floor(d.getTime() / 1000) * 1000);

/** `rate_limit_counters` in memory: keyed by (bucket, window start), as its primary key is. */
export class MemoryRateLimitsRepository implements RateLimitsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<CounterRow>('rate_limit_counters');
  }

  private key(bucket: string, windowStart: Date): string {
    return `${bucket}\u0000${wholeSeconds(windowStart).getTime()}`;
  }

  async countHit(bucket: string, windowStart: Date): Promise<number> {
    const key = this.key(bucket, windowStart);
    const count = (this.rows.get(key)?.count ?? 0) + 1;
    this.rows.put(key, { bucket, windowStart: wholeSeconds(windowStart), count });
    return count;
  }

  async hitsInWindow(bucket: string, windowStart: Date): Promise<number | null> {
    return this.rows.get(this.key(bucket, windowStart))?.count ?? null;
  }

  async dropWindowsBefore(before: Date): Promise<void> {
    for (const key of this.rows.keysWhere((r) => r.windowStart.getTime() < before.getTime())) this.rows.delete(key);
  }
}
