import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { RateLimitsRepository } from '../../src/http/rate-limits.repository.js';

type RateLimitsStore = Store<{ rateLimits: RateLimitsRepository }>;

/** Windows on whole seconds, as the limiter starts them (`window_start` is a DATETIME without fractions). */
const window = (minute: number) => new Date(Date.UTC(2026, 4, 1, 12, minute));

/**
 * What every store's rate-limit counters do, run on MariaDB (test/store/) and on the memory store
 * (test/unit/). Buckets are unique per test: the MariaDB database is shared.
 */
export function rateLimitsContract(kind: string, makeStore: () => Promise<RateLimitsStore>): void {
  describe(`rate limits repository (${kind})`, () => {
    let store: RateLimitsStore;
    let bucket: string;
    before(async () => (store = await makeStore()));
    beforeEach(() => (bucket = `contract:${randomUUID()}`));

    const hit = (b: string, start: Date) => store.transaction((r) => r.rateLimits.countHit(b, start));
    const hits = (b: string, start: Date) => store.read((r) => r.rateLimits.hitsInWindow(b, start));

    it('counts each hit of a window and answers its position, this hit included', async () => {
      assert.deepEqual(
        [await hit(bucket, window(0)), await hit(bucket, window(0)), await hit(bucket, window(0))],
        [1, 2, 3],
      );
      assert.equal(await hit(bucket, window(1)), 1);
      assert.equal(await hit(`${bucket}:other`, window(0)), 1);
    });

    it('reads the hits of a window without counting one; null for a window with none', async () => {
      assert.equal(await hits(bucket, window(0)), null);
      await hit(bucket, window(0));
      await hit(bucket, window(0));
      assert.equal(await hits(bucket, window(0)), 2);
      assert.equal(await hits(bucket, window(0)), 2);
      assert.equal(await hits(bucket, window(1)), null);
    });

    it('gives concurrent hits of one window each its own position', async () => {
      const positions = await Promise.all(Array.from({ length: 8 }, () => hit(bucket, window(0))));
      assert.deepEqual(
        positions.sort((a, b) => a - b),
        [1, 2, 3, 4, 5, 6, 7, 8],
      );
    });

    it('drops the windows that started before a time, and keeps the rest', async () => {
      // Far in the past, so no other test's windows (nor the limiter's own) are dropped with them.
      const old = new Date(Date.UTC(2001, 0, 1, 0, 0));
      const older = new Date(Date.UTC(2001, 0, 1, 0, 0, 59));
      const kept = new Date(Date.UTC(2001, 0, 1, 0, 1));
      for (const start of [old, older, kept]) await hit(bucket, start);
      await store.read((r) => r.rateLimits.dropWindowsBefore(kept));
      assert.deepEqual([await hits(bucket, old), await hits(bucket, older), await hits(bucket, kept)], [null, null, 1]);
      assert.equal(await hit(bucket, old), 1);
    });

    it('forgets a hit whose transaction rolled back', async () => {
      await hit(bucket, window(0));
      const seen = await store.transaction(async (r, tx) => {
        tx.rollBackAtEnd();
        return r.rateLimits.countHit(bucket, window(0));
      });
      assert.equal(seen, 2);
      assert.equal(await hits(bucket, window(0)), 1);
    });
  });
}
