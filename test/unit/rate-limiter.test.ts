import assert from 'node:assert/strict';
import { ManualClock } from '../../src/clock.js';
import { bucketKey, RateLimiter } from '../../src/http/rate-limiter.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';
import { refusal } from '../fakes/accounts-services.js';

describe('RateLimiter (memory store)', () => {
  let store: ReturnType<typeof memoryStore>;
  let clock: ManualClock;
  let limiter: RateLimiter;
  beforeEach(() => {
    store = memoryStore();
    // 15 s into a minute: a one-minute window has 45 s left.
    clock = new ManualClock(new Date('2026-05-01T12:00:15.000Z'));
    limiter = new RateLimiter(store, clock);
  });

  it('lets a bucket hit its limit in a window, then refuses with the seconds left in it', async () => {
    for (let i = 0; i < 3; i++) await limiter.hit('signup', 3, 60, 'signups');
    const err = await refusal(limiter.hit('signup', 3, 60, 'signups'));
    assert.equal(err.code, 'RATE_LIMITED');
    assert.equal(err.headers['Retry-After'], '45');
    assert.match(err.message, /Too many signups; try again in 45 s\./);
  });

  it('starts each window afresh, and keeps buckets apart', async () => {
    await limiter.hit('a', 1, 60, 'x');
    await limiter.hit('b', 1, 60, 'x');
    await refusal(limiter.hit('a', 1, 60, 'x'));
    clock.advance(45_000);
    await limiter.hit('a', 1, 60, 'x');
  });

  it('counts refused hits too, so a client hammering a full window stays refused', async () => {
    await limiter.hit('a', 1, 60, 'x');
    await refusal(limiter.hit('a', 1, 60, 'x'));
    await refusal(limiter.hit('a', 1, 60, 'x'));
    assert.equal(await store.read((r) => r.rateLimits.hitsInWindow('a', new Date('2026-05-01T12:00:00Z'))), 3);
  });

  it('checks a limit without counting, refusing once the hits reach it', async () => {
    await limiter.check('fails', 2, 60, 'failures');
    await limiter.hit('fails', 99, 60, 'failures');
    await limiter.check('fails', 2, 60, 'failures');
    await limiter.hit('fails', 99, 60, 'failures');
    const err = await refusal(limiter.check('fails', 2, 60, 'failures'));
    assert.equal(err.code, 'RATE_LIMITED');
    assert.equal(err.headers['Retry-After'], '45');
    assert.equal(await store.read((r) => r.rateLimits.hitsInWindow('fails', new Date('2026-05-01T12:00:00Z'))), 2);
  });

  it('answers at least one second of Retry-After at the very end of a window', async () => {
    clock.set(new Date('2026-05-01T12:00:59.900Z'));
    await limiter.hit('edge', 1, 60, 'x');
    assert.equal((await refusal(limiter.hit('edge', 1, 60, 'x'))).headers['Retry-After'], '1');
  });

  it('drops windows that ended long ago and keeps the recent ones', async () => {
    await limiter.hit('old', 5, 60, 'x');
    clock.advance(2 * 3600_000);
    await limiter.hit('new', 5, 60, 'x');
    await limiter.prune();
    assert.equal(await store.read((r) => r.rateLimits.hitsInWindow('old', new Date('2026-05-01T12:00:00Z'))), null);
    assert.equal(await store.read((r) => r.rateLimits.hitsInWindow('new', new Date('2026-05-01T14:00:00Z'))), 1);
  });

  it('keys a long bucket name by its start and a hash: never truncated into another bucket', async () => {
    const long = `agent-setup:${'1.2.3.4,'.repeat(40)}`;
    const key = bucketKey(long);
    assert.equal(key.length, 128);
    assert.notEqual(bucketKey(`${long}x`), key);
    assert.equal(bucketKey('short'), 'short');
    await limiter.hit(long, 1, 60, 'x');
    await limiter.hit(`${long}x`, 1, 60, 'x');
    await refusal(limiter.hit(long, 1, 60, 'x'));
  });
});
