import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import supertest from 'supertest';
import { JSON_BODY_LIMIT_BYTES } from '../../src/http/body-shape.js';
import { JSON_MAX_DEPTH } from '../../src/http/request-guards.js';
import { bucketKey } from '../../src/http/rate-limiter.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { appBehindRelay } from '../helpers/db-relay.js';
import { signup } from '../helpers/factories.js';

// superagent would JSON-encode a Buffer sent as application/json; these bodies go out as bytes.
const asIs = (b: Buffer) => b as unknown as string;

function assertError(res: supertest.Response, status: number, code: string): void {
  assert.equal(res.status, status, `${res.status} ${res.text}`);
  assert.equal(res.body.error?.code, code, res.text);
  assert.equal(res.body.error.requestId, res.headers['x-request-id']);
}

describe('bad input never gets a 500', () => {
  let ctx: TestContext;
  let token: string;
  before(async () => {
    ctx = await createTestContext();
    token = (await signup(ctx)).token;
  });
  after(() => ctx.close());

  it('answers a malformed percent-escape in any path with 400 INVALID_REQUEST', async () => {
    for (const path of [
      '/api/v1/rentals/%ff',
      '/approve/%E2',
      '/pay/%',
      '/api/v1/deployments/%zz/terminate',
      '/api/v1/gpus/%c3%28',
      '/nowhere/%',
    ]) {
      const res = await ctx.api.get(path).set('Authorization', `Bearer ${token}`);
      assertError(res, 400, 'INVALID_REQUEST');
    }
    const post = await ctx.api.post('/api/v1/deployments/%E2/terminate').set('Authorization', `Bearer ${token}`);
    assertError(post, 400, 'INVALID_REQUEST');
  });

  it('accepts every spelling of UTF-8 as the JSON charset and refuses others with 415', async () => {
    for (const type of [
      'application/json; charset=utf8',
      'application/json; charset=UTF-8',
      'application/json;charset=utf-8',
      'application/json; charset="utf-8"',
      'application/json; Charset=UTF8',
    ]) {
      const res = await ctx.api
        .post('/api/v1/signup')
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', type)
        .send('{"maxPerRentalMinor": 700}');
      assert.equal(res.status, 201, `${type}: ${res.text}`);
      assert.equal(res.body.data.account.key.maxPerRentalMinor, 700);
    }
    for (const type of [
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      'application/json; charset=""',
    ]) {
      const res = await ctx.api
        .post('/api/v1/signup')
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', type)
        .send('{}');
      assertError(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      assert.match(res.body.error.message, /UTF-8/);
    }
  });

  it('reads gzip bodies, refuses unknown encodings with 415 and corrupt ones with 400', async () => {
    const gz = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'gzip')
      .serialize(asIs)
      .send(gzipSync('{"maxPerRentalMinor": 800}'));
    assert.equal(gz.status, 201, gz.text);
    const unknown = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'compress')
      .send('{}');
    assertError(unknown, 415, 'UNSUPPORTED_MEDIA_TYPE');
    const corrupt = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'gzip')
      .serialize(asIs)
      .send(Buffer.from('this is not gzip at all'));
    assertError(corrupt, 400, 'INVALID_REQUEST');
  });

  it('answers a body over the limit with 413 PAYLOAD_TOO_LARGE naming the limit', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(JSON_BODY_LIMIT_BYTES + 10) });
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .send(big);
    assertError(res, 413, 'PAYLOAD_TOO_LARGE');
    assert.match(res.body.error.message, new RegExp(`${JSON_BODY_LIMIT_BYTES / 1024} KiB`));
  });

  it('refuses JSON nested deeper than the bound with 400, and takes it just under', async () => {
    const deep = '['.repeat(3000) + ']'.repeat(3000);
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .send(deep);
    assertError(res, 400, 'INVALID_REQUEST');
    assert.match(res.body.error.message, new RegExp(`deeper than ${JSON_MAX_DEPTH}`));
    const nested = (n: number): unknown => (n === 0 ? 1 : { a: nested(n - 1) });
    const ok = await ctx.api
      .post('/api/v1/rentals')
      .set('Authorization', `Bearer ${token}`)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: nested(JSON_MAX_DEPTH - 2) });
    assertError(ok, 422, 'VALIDATION_FAILED');
  });

  it('counts a client behind an X-Forwarded-For longer than the counter column, and keeps it apart', async () => {
    const forged = `203.0.113.${'9'.repeat(400)}`;
    const other = `203.0.113.${'9'.repeat(399)}8`;
    assert.ok(bucketKey(`agent-setup:${forged}`).length <= 128);
    assert.notEqual(bucketKey(`agent-setup:${forged}`), bucketKey(`agent-setup:${other}`));
    const limited = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '2', TRUST_PROXY: 'loopback' } });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++)
        statuses.push((await limited.api.post('/api/v1/agent-authorizations').set('X-Forwarded-For', forged)).status);
      assert.deepEqual(statuses, [200, 200, 429]);
      const neighbour = await limited.api.post('/api/v1/agent-authorizations').set('X-Forwarded-For', other);
      assert.equal(neighbour.status, 200, 'a different long address has its own counter');
    } finally {
      await limited.close();
    }
  });
});

describe('database unreachable', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('answers API routes with 503 UNAVAILABLE, not 500', async () => {
    const { token } = await signup(ctx);
    const relayed = await appBehindRelay(ctx);
    const { api } = relayed;
    assert.equal((await api.get('/api/v1/me').set('Authorization', `Bearer ${token}`)).status, 200);
    await relayed.cut();
    try {
      const me = await api.get('/api/v1/me').set('Authorization', `Bearer ${token}`);
      assertError(me, 503, 'UNAVAILABLE');
      const created = await api.post('/api/v1/signup').set('Idempotency-Key', randomUUID()).send({});
      assertError(created, 503, 'UNAVAILABLE');
      assert.equal((await api.get('/readyz')).status, 503);
      assert.equal((await api.get('/healthz')).status, 200, 'liveness does not depend on the database');
    } finally {
      await relayed.close();
    }
  });
});
