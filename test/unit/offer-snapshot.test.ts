import assert from 'node:assert/strict';
import { liveUntil } from '../../src/modules/inventory/offers.repository.js';

describe('offer snapshot recovery after the worker was away', () => {
  it('holds no copy, an empty one included, past OFFER_MAX_AGE_SECONDS from its loading', () => {
    const loadedAt = new Date('2030-01-01T00:00:00Z');
    assert.equal(liveUntil([], loadedAt, 600), loadedAt.getTime() + 600_000);
    assert.equal(
      liveUntil([{ staleAt: new Date(loadedAt.getTime() + 5_000) }], loadedAt, 600),
      loadedAt.getTime() + 5_000,
    );
  });
});
