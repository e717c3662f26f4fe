import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import supertest from 'supertest';
import { createApp } from '../../src/app.js';
import { createLogger } from '../../src/logger.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

const signupFrom = (ctx: TestContext, address?: string) => {
  const req = ctx.api.post('/api/v1/signup').set('Idempotency-Key', randomUUID());
  return (address ? req.set('X-Forwarded-For', address) : req).send({});
};

/** A minute of the test's own, far from the real clock, so no other test's counters count. */
function ownMinute(...ctxs: TestContext[]): void {
  const minute = Date.UTC(2032, 0, 1, 0, Math.floor(Math.random() * 500_000));
  for (const c of ctxs) c.clock.set(new Date(minute + 5_000));
}

describe('per-address limits of public creates', () => {
  it('one client over its per-address budget does not block signup for anyone else; the global ceiling still holds', async () => {
    const ctx = await createTestContext({
      env: { TRUST_PROXY: 'loopback', SIGNUP_RATE_PER_MINUTE: '6', SIGNUP_RATE_PER_ADDRESS_PER_MINUTE: '2' },
    });
    try {
      ownMinute(ctx);
      const attacker = [];
      for (let i = 0; i < 30; i++) attacker.push((await signupFrom(ctx, '198.51.100.7')).status);
      assert.deepEqual(attacker.slice(0, 2), [201, 201]);
      assert.ok(
        attacker.slice(2).every((s) => s === 429),
        attacker.join(','),
      );
      // Everyone else still signs up: the attacker's refused requests never spent the ceiling.
      assert.equal((await signupFrom(ctx, '198.51.100.8')).status, 201);
      assert.equal((await signupFrom(ctx, '203.0.113.1')).status, 201);
      assert.equal((await signupFrom(ctx, '203.0.113.2')).status, 201);
      assert.equal((await signupFrom(ctx, '203.0.113.3')).status, 201);
      const ceiling = await signupFrom(ctx, '203.0.113.4');
      assert.equal(ceiling.status, 429, 'six signups in all this minute');
      assert.match(ceiling.body.error.message, /^Too many signups;/);
      const perAddress = await signupFrom(ctx, '198.51.100.7');
      assert.match(perAddress.body.error.message, /signups from this address/);
      assert.ok(Number(perAddress.headers['retry-after']) >= 1);
    } finally {
      await ctx.close();
    }
  });

  it('counts an IPv6 client by its /64, whatever address of it it uses', async () => {
    const ctx = await createTestContext({ env: { TRUST_PROXY: 'loopback', SIGNUP_RATE_PER_ADDRESS_PER_MINUTE: '2' } });
    try {
      ownMinute(ctx);
      const statuses = [];
      for (const a of ['2001:db8:1:2::1', '2001:db8:1:2:ffff::9', '2001:0db8:0001:0002:0:0:0:77'])
        statuses.push((await signupFrom(ctx, a)).status);
      assert.deepEqual(statuses, [201, 201, 429]);
      assert.equal((await signupFrom(ctx, '2001:db8:1:3::1')).status, 201, 'the next /64 is another client');
    } finally {
      await ctx.close();
    }
  });

  it('ignores X-Forwarded-For by default, so a client cannot choose its own address', async () => {
    const ctx = await createTestContext({ env: { SIGNUP_RATE_PER_ADDRESS_PER_MINUTE: '2' } });
    try {
      ownMinute(ctx);
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await signupFrom(ctx, `192.0.2.${i + 1}`)).status);
      assert.deepEqual(statuses, [201, 201, 429], 'every forged address is the same loopback client');
    } finally {
      await ctx.close();
    }
  });

  it('counts the limit before reading the body: a refused client gets 429 even for a body that would be invalid', async () => {
    const ctx = await createTestContext({ env: { SIGNUP_RATE_PER_ADDRESS_PER_MINUTE: '1' } });
    try {
      ownMinute(ctx);
      assert.equal((await signupFrom(ctx)).status, 201);
      const junk = await ctx.api
        .post('/api/v1/signup')
        .set('Idempotency-Key', 'not-a-uuid')
        .set('Content-Type', 'application/json')
        .send('{"x":');
      assert.equal(junk.status, 429);
      const shouted = await ctx.api.post('/API/V1/SIGNUP/').set('Idempotency-Key', randomUUID()).send({});
      assert.equal(shouted.status, 429, 'the same route in another spelling is the same budget');
    } finally {
      await ctx.close();
    }
  });
});

describe('unknown properties and body sizes', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('answers a body of 700 unknown keys with a short 422 naming five of them', async () => {
    const body: Record<string, number> = {};
    for (let i = 0; i < 700; i++) body[`k${i}`] = 1;
    const raw = JSON.stringify(body);
    assert.ok(raw.length < 8 * 1024);
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .send(raw);
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'VALIDATION_FAILED');
    assert.match(
      res.body.error.message,
      /unknown properties "k0", "k1", "k2", "k3", "k4" and 695 more; this route accepts maxPerRentalMinor/,
    );
    assert.ok(JSON.stringify(res.body).length < 500, `a short answer, got ${JSON.stringify(res.body).length} bytes`);
  });

  it('refuses the 58 KB body of the report with 413 before parsing it', async () => {
    const body: Record<string, number> = {};
    for (let i = 0; i < 6000; i++) body[`key${i}`] = 1;
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(body));
    assert.equal(res.status, 413);
    assert.equal(res.body.error.code, 'PAYLOAD_TOO_LARGE');
  });

  it('admits a shape-specific property of either rental shape to the validator', async () => {
    const who = await ctx.api.post('/api/v1/signup').set('Idempotency-Key', randomUUID()).send({});
    const auth = { Authorization: `Bearer ${who.body.data.token}` };
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: randomUUID(), gpuCount: 1 });
    assert.equal(res.status, 422);
    assert.doesNotMatch(
      res.body.error.message,
      /this route accepts/,
      "gpuCount is known; mixing shapes is the validator's to say",
    );
    const wrong = await ctx.api
      .post('/api/v1/rentals')
      .set(auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: randomUUID(), colour: 'red' });
    assert.match(
      wrong.body.error.message,
      /unknown property "colour"; this route accepts offerId, budgetMinor, machine, terminateAfterSeconds, gpuModel, gpuCount, maxHourlyPriceMinor, waitForCapacitySeconds\./,
    );
  });
});

describe('approval codes never reach the request log', () => {
  it('an absolute-form request and a capitalised path leave no part of the code in the log', async () => {
    const ctx = await createTestContext();
    try {
      const lines: string[] = [];
      const stream = new Writable({
        write(chunk, _enc, cb) {
          lines.push(String(chunk));
          cb();
        },
      });
      const app = createApp({ ...ctx.services, logger: createLogger('info', stream) });
      const api = supertest(app);
      const authz = await api.post('/api/v1/agent-authorizations');
      const code = new URL(authz.body.data.approvalUrl).pathname.split('/').pop()!;
      assert.equal((await api.get(`/Approve/${code}`)).status, 200);
      // supertest cannot send an absolute-form target; a raw request can.
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const { port } = server.address() as { port: number };
      const net = await import('node:net');
      await new Promise<void>((resolve, reject) => {
        const sock = net.connect(port, '127.0.0.1', () =>
          sock.end(`GET http://gpu.test/approve/${code} HTTP/1.1\r\nHost: gpu.test\r\nConnection: close\r\n\r\n`),
        );
        sock
          .on('data', () => undefined)
          .on('end', () => resolve())
          .on('error', reject);
      });
      server.close();
      const log = lines.join('');
      assert.ok((log.match(/\/approve\/\[redacted\]/g) ?? []).length >= 2, log);
      assert.ok(!log.includes(code.slice(4, 24)), 'no part of the approval code is logged');
    } finally {
      await ctx.close();
    }
  });
});
