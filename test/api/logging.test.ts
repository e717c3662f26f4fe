import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import supertest from 'supertest';
import { createApp } from '../../src/app.js';
import { createLogger } from '../../src/logger.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

describe('structured logs', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  function captured(level: string) {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        cb();
      },
    });
    const logger = createLogger(level, stream);
    const app = createApp({ ...ctx.services, logger });
    return { lines, api: supertest(app) };
  }

  it('writes one JSON line per request with its request id, and never the token', async () => {
    const { lines, api } = captured('info');
    const signup = await api.post('/api/v1/signup').set('Idempotency-Key', randomUUID()).send({});
    const token: string = signup.body.data.token;
    const me = await api
      .get('/api/v1/me')
      .set('Authorization', `Bearer ${token}`)
      .set('X-Request-Id', 'trace-me-000001');
    assert.equal(me.status, 200);
    const line = lines.find((l) => l.requestId === 'trace-me-000001');
    assert.ok(line, 'request line carries the request id');
    assert.equal((line.req as { method: string }).method, 'GET');
    assert.equal((line.res as { statusCode: number }).statusCode, 200);
    const all = JSON.stringify(lines);
    assert.ok(!all.includes(token.split('.')[1]), 'secret part of the token is not logged');
    assert.ok(!all.includes(token), 'token is not logged');
  });
});
