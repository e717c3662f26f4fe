import assert from 'node:assert/strict';
import { createVerdictOf, matchErrorRule, readErrorOf, type ErrorRule } from '../../src/providers/kit/error-table.js';

/** A table written in the order a careless author might: status rows before the rows of meaning. */
const TABLE: readonly ErrorRule[] = [
  { match: { status: 400 }, create: 'rejected', read: 'request', note: 'any other bad request' },
  { match: { status: '5xx' }, create: 'ambiguous', read: 'unavailable', note: 'server error' },
  {
    match: { codes: ['offer_gone'] },
    create: 'unavailable',
    read: 'request',
    note: 'the offer is gone, whatever the status',
  },
  { match: { status: 404, codes: ['not_found'] }, create: 'unavailable', read: 'gone', note: 'the object is gone' },
  { match: { codes: ['upstream/*'] }, create: 'ambiguous', read: 'unavailable', note: 'a family of transient codes' },
  {
    match: { status: 400, text: /no capacity/i },
    create: 'unavailable',
    read: 'unavailable',
    note: 'capacity, told in text only',
  },
  { match: { status: [401, 403] }, create: 'rejected', read: 'auth', note: 'credentials' },
  { match: { status: 429 }, create: 'throttled', read: 'rate_limited', note: 'rate limit' },
  { match: {}, create: 'ambiguous', read: 'bad_response', note: 'anything else' },
];

const note = (status: number, code?: string, text?: string) => matchErrorRule(TABLE, { status, code, text }).note;

describe('kit: error table matcher', () => {
  it('matches a code by meaning whatever the status, before the status rows', () => {
    assert.equal(note(400, 'offer_gone'), 'the offer is gone, whatever the status');
    assert.equal(note(503, 'offer_gone'), 'the offer is gone, whatever the status');
    assert.equal(note(200, 'offer_gone'), 'the offer is gone, whatever the status');
  });

  it('a rule of meaning that also names a status needs both', () => {
    assert.equal(note(404, 'not_found'), 'the object is gone');
    assert.equal(note(400, 'not_found'), 'any other bad request');
  });

  it('matches a code family by prefix, and text patterns', () => {
    assert.equal(note(400, 'upstream/timeout'), 'a family of transient codes');
    assert.equal(note(400, 'upstreamx'), 'any other bad request');
    assert.equal(note(400, undefined, 'There is No Capacity left'), 'capacity, told in text only');
    assert.equal(note(400, undefined, 'bad image'), 'any other bad request');
  });

  it('falls back to status rows in order: exact, lists, classes, then the catch-all', () => {
    assert.equal(note(500), 'server error');
    assert.equal(note(599), 'server error');
    assert.equal(note(403), 'credentials');
    assert.equal(note(429), 'rate limit');
    assert.equal(note(302), 'anything else');
  });

  it('refuses a table without a catch-all for an answer it does not cover', () => {
    assert.throws(() => matchErrorRule(TABLE.slice(0, -1), { status: 302 }), /catch-all/);
  });

  it('turns a rule into a create outcome and a read error', () => {
    const throttle = matchErrorRule(TABLE, { status: 429 });
    assert.deepEqual(createVerdictOf(throttle, 'slow down', 7000), {
      kind: 'throttled',
      reason: 'slow down',
      retryAfterMs: 7000,
    });
    assert.deepEqual(createVerdictOf(throttle, 'slow down'), {
      kind: 'throttled',
      reason: 'slow down',
      retryAfterMs: 1000,
    });
    assert.deepEqual(createVerdictOf(matchErrorRule(TABLE, { status: 400, code: 'offer_gone' }), 'gone'), {
      kind: 'unavailable',
      reason: 'gone',
    });
    const err = readErrorOf(matchErrorRule(TABLE, { status: 401 }), 'acme GET /x: 401', 401);
    assert.deepEqual([err.errorClass, err.message, err.status], ['auth', 'acme GET /x: 401', 401]);
    // A gone the caller did not expect (a list, a catalog read) is a request error.
    assert.equal(readErrorOf(matchErrorRule(TABLE, { status: 404, code: 'not_found' }), 'm').errorClass, 'request');
  });
});
