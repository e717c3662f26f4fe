import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, offerIds } from '../helpers/rentals.js';
import type { SignedUp } from '../helpers/factories.js';
import { httpRequests } from '../../src/metrics/registry.js';
import { bodyLimitOf } from '../../src/http/body-shape.js';

// POST /api/v1/rentals is run ahead of the router (src/http/direct-route.ts); `/api/v1/rentals/`
// (Express ignores the trailing slash) still walks the router to the same handlers. Whatever the
// request, both must answer alike.

/** Headers whose value differs between any two answers. */
const PER_RESPONSE = new Set(['date', 'x-request-id', 'content-length']);

function sameAnswer(direct: Response, walked: Response, what: string): void {
  assert.equal(direct.status, walked.status, `${what}: status (${JSON.stringify(direct.body)})`);
  const headers = (r: Response) => Object.fromEntries(Object.entries(r.headers).filter(([k]) => !PER_RESPONSE.has(k)));
  assert.deepEqual(headers(direct), headers(walked), `${what}: headers`);
  assert.match(direct.headers['x-request-id'], /^req_/, `${what}: a request id`);
  assert.equal(
    direct.body.meta?.requestId ?? direct.body.error?.requestId,
    direct.headers['x-request-id'],
    `${what}: the envelope carries the header's request id`,
  );
}

/** The rental's fields with its ids and times blanked: two admissions of the same offer then read alike. */
function shapeOf(body: { data: Record<string, unknown> }): unknown {
  return JSON.parse(JSON.stringify(body.data), (k, v: unknown) =>
    /(^id$|Id$|At$)/.test(k) && typeof v === 'string' ? '*' : v,
  );
}

describe('POST /api/v1/rentals ahead of the router', () => {
  let ctx: TestContext;
  let who: SignedUp;
  let offerId: string;
  before(async () => {
    ctx = await createTestContext();
    who = await account(ctx, { creditsMinor: 100_000 });
    offerId = Object.values(await offerIds(ctx))[0];
  });
  after(() => ctx.close());

  const post = (path: string, opts: { auth?: string; key?: string | null; body?: string; type?: string } = {}) => {
    let req = ctx.api.post(path).set('Authorization', opts.auth ?? who.auth.Authorization);
    if (opts.key !== null) req = req.set('Idempotency-Key', opts.key ?? randomUUID());
    return req.set('Content-Type', opts.type ?? 'application/json').send(opts.body ?? JSON.stringify({ offerId }));
  };
  const both = async (opts: Parameters<typeof post>[1] = {}) =>
    [await post('/api/v1/rentals', opts), await post('/api/v1/rentals/', opts)] as const;

  it('admits with the same status, headers and rental as the routed path', async () => {
    const [direct, walked] = await both();
    sameAnswer(direct, walked, 'admission');
    assert.equal(direct.status, 201);
    assert.deepEqual(shapeOf(direct.body), shapeOf(walked.body));
    assert.equal(direct.headers['cache-control'], 'no-store');
    assert.equal(direct.headers['x-content-type-options'], 'nosniff');
  });

  it('counts each admission once in the request metrics, under the route template', async () => {
    const counted = async (status: string) =>
      (await httpRequests.get()).values.find(
        (v) => v.labels.method === 'POST' && v.labels.route === '/api/v1/rentals' && v.labels.status === status,
      )?.value ?? 0;
    const [admitted, refused] = [await counted('201'), await counted('401')];
    assert.equal((await post('/api/v1/rentals')).status, 201);
    assert.equal((await post('/api/v1/rentals', { auth: 'Bearer gpr_nope' })).status, 401);
    assert.equal(await counted('201'), admitted + 1);
    assert.equal(await counted('401'), refused + 1);
  });

  it('replays a key with 200 and the first rental', async () => {
    const key = randomUUID();
    const first = await post('/api/v1/rentals', { key });
    const again = await post('/api/v1/rentals', { key });
    const walked = await post('/api/v1/rentals/', { key });
    assert.equal(first.status, 201);
    sameAnswer(again, walked, 'replay');
    assert.equal(again.status, 200);
    assert.equal(again.body.data.rentalId, first.body.data.rentalId);
  });

  it('refuses alike: a bad key, no Idempotency-Key, unknown properties, a bad body, malformed JSON, another charset', async () => {
    const cases: [string, Parameters<typeof post>[1], number, string][] = [
      ['a bad key', { auth: 'Bearer gpr_nope' }, 401, 'UNAUTHENTICATED'],
      ['no Idempotency-Key', { key: null }, 400, 'INVALID_REQUEST'],
      ['an unknown property', { body: JSON.stringify({ offerId, colour: 'red' }) }, 422, 'VALIDATION_FAILED'],
      ['a wrong type', { body: JSON.stringify({ offerId: 7 }) }, 422, 'VALIDATION_FAILED'],
      ['malformed JSON', { body: '{"offerId":' }, 400, 'INVALID_REQUEST'],
      ['another charset', { type: 'application/json; charset=latin1' }, 415, 'UNSUPPORTED_MEDIA_TYPE'],
      ['an unknown offer', { body: JSON.stringify({ offerId: randomUUID() }) }, 404, 'OFFER_NOT_FOUND'],
    ];
    for (const [what, opts, status, code] of cases) {
      const [direct, walked] = await both(opts);
      sameAnswer(direct, walked, what);
      assert.equal(direct.status, status, `${what}: ${JSON.stringify(direct.body)}`);
      assert.equal(direct.body.error.code, code, what);
      assert.equal(direct.body.error.message, walked.body.error.message, what);
    }
    const [direct] = await both({ auth: 'Bearer gpr_nope' });
    assert.equal(direct.headers['www-authenticate'], 'Bearer');
  });

  it('refuses a body over the route limit with 413 before reading it all', async () => {
    const [direct, walked] = await both({
      body: JSON.stringify({ offerId, pad: 'x'.repeat(bodyLimitOf('/api/v1/rentals').bytes) }),
    });
    sameAnswer(direct, walked, 'too large');
    assert.equal(direct.status, 413);
  });
});
