import assert from 'node:assert/strict';
import { LATE_COMMIT_LOOKBACK, nextPosition } from '../../src/modules/events/event-tail.js';
import type { StoredEvent } from '../../src/modules/events/events.repository.js';

const events = (...ids: number[]) => ids.map((id) => ({ id: String(id) }) as StoredEvent);

/** The late-commit rule's bookkeeping (events/event-tail.ts): the newest id handled, and the ids it passed. */
describe('event tail: the position after a batch', () => {
  it('remembers the ids a batch skipped over, and forgets each one when it comes', () => {
    const p = nextPosition({ lastId: '10', unseen: [] }, events(11, 13, 16));
    assert.deepEqual(p, { lastId: '16', unseen: ['12', '14', '15'] });
    assert.deepEqual(nextPosition(p, events(14, 17)), { lastId: '17', unseen: ['12', '15'] });
  });

  it('stays where it was for a batch of late ones only', () => {
    assert.deepEqual(nextPosition({ lastId: '20', unseen: ['12', '15'] }, events(15)), {
      lastId: '20',
      unseen: ['12'],
    });
  });

  it('gives up on ids further behind than the lookback, however far a batch jumps', () => {
    const far = 5n + LATE_COMMIT_LOOKBACK * 3n;
    const p = nextPosition({ lastId: '5', unseen: ['3'] }, events(Number(far)));
    assert.equal(p.lastId, String(far));
    assert.equal(BigInt(p.unseen.length), LATE_COMMIT_LOOKBACK - 1n);
    assert.equal(p.unseen[0], String(far - LATE_COMMIT_LOOKBACK + 1n));
    assert.equal(p.unseen[p.unseen.length - 1], String(far - 1n));
  });
});
