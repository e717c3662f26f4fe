import { randomUUID } from 'node:crypto';
import assert from 'node:assert/strict';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';

describe('envelope and errors', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('wraps success in { data, meta } and echoes the request id header', async () => {
    const res = await ctx.api.get('/api/v1/offers');
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(res.body).sort(), ['data', 'meta']);
    assert.equal(res.body.meta.apiVersion, 'v1');
    assert.match(res.body.meta.requestId, /^req_/);
    assert.equal(res.headers['x-request-id'], res.body.meta.requestId);
  });

  it('honours a sane incoming X-Request-Id and replaces an insane one', async () => {
    const good = await ctx.api.get('/api/v1/gpus').set('X-Request-Id', 'client-trace-0001');
    assert.equal(good.body.meta.requestId, 'client-trace-0001');
    assert.equal(good.headers['x-request-id'], 'client-trace-0001');
    const bad = await ctx.api.get('/api/v1/gpus').set('X-Request-Id', 'x<script>');
    assert.match(bad.body.meta.requestId, /^req_/);
  });

  it('answers unknown routes with 404 NOT_FOUND in the envelope', async () => {
    const res = await ctx.api.get('/api/v1/nope');
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'NOT_FOUND');
    assert.equal(res.body.error.requestId, res.headers['x-request-id']);
    assert.equal(typeof res.body.error.message, 'string');
  });

  it('rejects malformed JSON with 400 INVALID_REQUEST and no parser internals', async () => {
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', '3b241101-e2bb-4255-8caf-4136c566a962')
      .set('Content-Type', 'application/json')
      .send('{"maxPerRentalMinor": 5');
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'INVALID_REQUEST');
    assert.doesNotMatch(JSON.stringify(res.body), /SyntaxError|at JSON\.parse|node_modules/);
  });

  it('treats well-formed JSON that is not an object as a schema violation (422), not as malformed', async () => {
    for (const body of ['null', '5', '"text"', 'true']) {
      const res = await ctx.api
        .post('/api/v1/signup')
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'application/json')
        .send(body);
      assert.equal(res.status, 422, body);
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.match(res.body.error.message, /body: must be a JSON object/);
    }
  });

  it('answers a bad header with 400 even when the body is wrong too', async () => {
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Content-Type', 'application/json')
      .send('{"maxPerRentalMinor": 1}');
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'INVALID_REQUEST');
    assert.match(res.body.error.message, /Idempotency-Key/);
  });

  it('names the offending fields on schema violations (422 VALIDATION_FAILED)', async () => {
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', 'a3b2c1d0-0000-4000-8000-000000000001')
      .send({ maxPerRentalMinor: 100, maxConcurrentDeployments: 'two' });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'VALIDATION_FAILED');
    assert.match(res.body.error.message, /maxPerRentalMinor/);
    assert.match(res.body.error.message, /maxConcurrentDeployments/);
    assert.doesNotMatch(res.body.error.message, /requestBody|\{/);
  });

  it('rejects unknown properties', async () => {
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', 'a3b2c1d0-0000-4000-8000-000000000002')
      .send({ maxPerRentalMinor: 600, freeCredits: 1000 });
    assert.equal(res.status, 422);
    assert.match(res.body.error.message, /unknown property "freeCredits"/);
  });

  it('refuses bodies over the size limit', async () => {
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', 'a3b2c1d0-0000-4000-8000-000000000003')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ pad: 'x'.repeat(200_000) }));
    assert.equal(res.status, 413);
    assert.equal(res.body.error.code, 'PAYLOAD_TOO_LARGE');
    assert.match(res.body.error.message, /larger than this route's \d+ KiB limit/);
  });

  it('hides internal failures behind INTERNAL with no stack or SQL', async () => {
    const a = await signup(ctx);
    const original = ctx.services.accounts.describe.bind(ctx.services.accounts);
    ctx.services.accounts.describe = async () => {
      throw new Error("ER_BAD_FIELD_ERROR: Unknown column 'x' in 'SELECT * FROM accounts'");
    };
    try {
      const res = await ctx.api.get('/api/v1/me').set(a.auth);
      assert.equal(res.status, 500);
      assert.equal(res.body.error.code, 'INTERNAL');
      assert.doesNotMatch(JSON.stringify(res.body), /SELECT|ER_BAD|at /);
    } finally {
      ctx.services.accounts.describe = original;
    }
  });

  it('serves /healthz as liveness (200 whatever the database says) and /readyz as 503 UNAVAILABLE when a readiness check fails', async () => {
    const ok = await ctx.api.get('/healthz');
    assert.equal(ok.status, 200);
    assert.equal(ok.body.data.status, 'ok');
    assert.equal((await ctx.api.get('/readyz')).status, 200);
    const failing = await createTestContext({
      app: {
        readiness: async () => ({
          ready: false,
          checks: { database: 'failed' },
          reason: 'the database is not reachable (connect ECONNREFUSED)',
        }),
      },
    });
    const live = await failing.api.get('/healthz');
    assert.equal(live.status, 200);
    const down = await failing.api.get('/readyz');
    assert.equal(down.status, 503);
    assert.equal(down.body.error.code, 'UNAVAILABLE');
    assert.equal(down.body.checks.database, 'failed');
    await failing.close();
  });
});
