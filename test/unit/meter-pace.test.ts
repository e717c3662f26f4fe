import assert from 'node:assert/strict';
import { meterPauseMs } from '../../src/modules/rentals/lifecycle/lifecycle-deps.js';

/** The metering sweep's pace: chunks take their share of the sweep's time, and the sweep still ends within its budget. */
describe('meterPauseMs', () => {
  const base = {
    chunkMs: 10,
    busyShare: 0.25,
    elapsedMs: 40,
    busyMs: 10,
    done: 300,
    total: 30_000,
    budgetMs: 10_500,
    lanes: 1,
    chunkRentals: 300,
  };

  it("pauses three times a chunk's time for a quarter share, while the budget allows it", () => {
    assert.equal(meterPauseMs(base), 30);
  });

  it('pauses less when the rest would not end within the budget at that pace, and not at all past it', () => {
    // 99 chunks of 10 ms left take 990 ms; 10,500 − 9,000 − 990 = 510 ms left for 99 pauses.
    assert.equal(meterPauseMs({ ...base, elapsedMs: 9000 }), 510 / 99);
    assert.equal(meterPauseMs({ ...base, elapsedMs: 10_400 }), 0);
  });

  it('never pauses after the last chunk, nor when the share is the whole time', () => {
    assert.equal(meterPauseMs({ ...base, done: 30_000 }), 0);
    assert.equal(meterPauseMs({ ...base, busyShare: 1 }), 0);
  });

  it('counts the work left as shared by the lanes', () => {
    // Two lanes: 495 ms of wall time of work left and 50 pauses each: 10,500 − 9,000 − 495 = 1,005 ms to share.
    assert.equal(meterPauseMs({ ...base, lanes: 2, elapsedMs: 9000 }), 1005 / 50);
  });
});
