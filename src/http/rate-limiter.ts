import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Store } from '../db/store.js';
import { AppError } from '../errors/app-error.js';
import type { RateLimitsRepository } from './rate-limits.repository.js';

/** Width of `rate_limit_counters.bucket`. */
const BUCKET_COLUMN_CHARS = 128;

/**
 * The stored key of a bucket: the name itself when it fits the column, else its readable start
 * and a SHA-256 of the whole, so a long client address (a forged X-Forwarded-For) is still
 * counted on its own, never truncated into someone else's bucket or refused by the column.
 */
export function bucketKey(name: string): string {
  if (name.length <= BUCKET_COLUMN_CHARS) return name;
  const hash = createHash('sha256').update(name).digest('hex');
  return `${name.slice(0, BUCKET_COLUMN_CHARS - hash.length - 1)}#${hash}`;
}

/**
 * Fixed-window counters kept in MySQL, so the limit holds across every api process; each
 * request sees its own exact position in the window (see {@link RateLimitsRepository.countHit}).
 */
export class RateLimiter {
  constructor(
    private readonly store: Store<{ rateLimits: RateLimitsRepository }>,
    private readonly clock: Clock,
  ) {}

  async hit(name: string, limit: number, windowSeconds: number, what: string): Promise<void> {
    const bucket = bucketKey(name);
    const nowMs = this.clock.now().getTime();
    const windowMs = windowSeconds * 1000;
    const start = new Date(Math.floor(nowMs / windowMs) * windowMs);
    const count = await this.store.transaction((r) => r.rateLimits.countHit(bucket, start));
    if (count > limit) {
      const retryAfter = Math.max(1, Math.ceil((start.getTime() + windowMs - nowMs) / 1000));
      throw new AppError('RATE_LIMITED', `Too many ${what}; try again in ${retryAfter} s.`, {
        'Retry-After': String(retryAfter),
      });
    }
  }

  /**
   * Refuses (429) when `name` has already reached `limit` in the current window, without counting
   * this call: for limits on failures, which are counted with {@link hit} once a call has failed.
   */
  async check(name: string, limit: number, windowSeconds: number, what: string): Promise<void> {
    const nowMs = this.clock.now().getTime();
    const windowMs = windowSeconds * 1000;
    const start = new Date(Math.floor(nowMs / windowMs) * windowMs);
    const hits = await this.store.read((r) => r.rateLimits.hitsInWindow(bucketKey(name), start));
    if (hits !== null && hits >= limit) {
      const retryAfter = Math.max(1, Math.ceil((start.getTime() + windowMs - nowMs) / 1000));
      throw new AppError('RATE_LIMITED', `Too many ${what}; try again in ${retryAfter} s.`, {
        'Retry-After': String(retryAfter),
      });
    }
  }

  /** Drops windows that ended long ago; called by housekeeping. */
  async prune(olderThanSeconds = 3600): Promise<void> {
    const before = new Date(this.clock.now().getTime() - olderThanSeconds * 1000);
    await this.store.read((r) => r.rateLimits.dropWindowsBefore(before));
  }
}
