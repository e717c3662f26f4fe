import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DataSource } from 'typeorm';
import { createApp } from '../../src/app.js';
import { READINESS_REUSE_MS, readinessProbe } from '../../src/readiness.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { sentRequests } from '../helpers/sql-requests.js';

// /readyz is public, needs no key and has no rate limit: what a flood of it costs the database
// is bounded by the process (one round of checks per READINESS_REUSE_MS, shared by everyone
// asking meanwhile), and a failing database's own words never reach the public answer.

const TOKEN = 'readyz-cost-metrics-token-0123456789';
/** What the driver says when the database is gone: an address, a user name, a code. */
const DRIVER_TEXT = "connect ECONNREFUSED 10.20.30.40:3306 (user 'gpu_rental_svc')";

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('GET /readyz cost and disclosure', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  const logLines: string[] = [];
  before(async () => {
    ctx = await createTestContext({ env: { METRICS_TOKEN: TOKEN }, logTo: (l) => logLines.push(l) });
  });
  after(() => ctx.close());

  it('answers 200 concurrent requests with at most a couple of queries, and asks again once the answer is a period old', async () => {
    let t = 0;
    const readiness = readinessProbe(ctx.services, ['api'], { nowMs: () => t });
    const { server, url } = await listen(createApp(ctx.services, { readiness }));
    try {
      // Migrations are asked once per process; the flood below is what every later period costs.
      assert.equal((await fetch(`${url}/readyz`)).status, 200);
      t += READINESS_REUSE_MS;
      const { result, sent } = await sentRequests(() =>
        Promise.all(
          Array.from({ length: 200 }, () =>
            fetch(`${url}/readyz`).then(async (r) => ({
              status: r.status,
              body: (await r.json()) as { data: { checks: unknown } },
            })),
          ),
        ),
      );
      assert.deepEqual(new Set(result.map((r) => r.status)), new Set([200]));
      assert.deepEqual(result[199].body.data.checks, { database: 'ok', migrations: 'ok', inventory: 'ok' });
      assert.ok(
        sent.length >= 1 && sent.length <= 2,
        `200 probes sent ${sent.length} queries: ${JSON.stringify(sent)}`,
      );
      assert.ok(
        sent.some((q) => /^SELECT 1$/.test(q.trim())),
        'the database was asked once',
      );

      // Within the period nothing is asked; past it, the next probe asks again.
      const within = await sentRequests(() => fetch(`${url}/readyz`).then((r) => r.status));
      assert.deepEqual([within.result, within.sent.length], [200, 0]);
      t += READINESS_REUSE_MS;
      const past = await sentRequests(() => fetch(`${url}/readyz`).then((r) => r.status));
      assert.equal(past.result, 200);
      assert.ok(
        past.sent.some((q) => /^SELECT 1$/.test(q.trim())),
        JSON.stringify(past.sent),
      );
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  describe('with a database that fails', () => {
    let broken = true;
    let t = 0;
    let url: string;
    let server: Server;
    before(async () => {
      const ds = ctx.services.ds;
      // The real DataSource, except that its queries fail the way a driver's do while `broken`.
      const failing = new Proxy(ds, {
        get(target, prop, receiver) {
          if (prop === 'query') {
            return (...args: Parameters<DataSource['query']>) =>
              broken
                ? Promise.reject(Object.assign(new Error(DRIVER_TEXT), { code: 'ECONNREFUSED' }))
                : target.query(...args);
          }
          return Reflect.get(target, prop, receiver);
        },
      });
      const readiness = readinessProbe({ ...ctx.services, ds: failing }, ['api'], { nowMs: () => t });
      ({ server, url } = await listen(createApp(ctx.services, { readiness })));
    });
    after(() => new Promise((resolve) => server.close(resolve)));

    const probe = async (headers: Record<string, string> = {}) => {
      t += READINESS_REUSE_MS;
      const res = await fetch(`${url}/readyz`, { headers });
      return { status: res.status, text: await res.text() };
    };
    const notReadyLogs = () => logLines.filter((l) => JSON.parse(l).msg === 'not ready');

    it('says "the database is not reachable" without its error text, logs the text once per outage, and shows it only with the metrics token', async () => {
      for (let i = 0; i < 3; i++) {
        const down = await probe();
        assert.equal(down.status, 503);
        const body = JSON.parse(down.text);
        assert.equal(body.error.code, 'UNAVAILABLE');
        assert.equal(body.error.message, 'Not ready: the database is not reachable.');
        assert.deepEqual(body.checks, { database: 'failed', migrations: 'skipped', inventory: 'skipped' });
        assert.doesNotMatch(down.text, /ECONNREFUSED|10\.20\.30\.40|gpu_rental_svc|3306/);
      }
      const logged = notReadyLogs();
      assert.equal(logged.length, 1, 'three failed probes of one kind, one log line');
      assert.equal(JSON.parse(logged[0]).detail, DRIVER_TEXT);

      const wrongToken = await probe({ Authorization: 'Bearer not-the-metrics-token-at-all-0000' });
      assert.doesNotMatch(wrongToken.text, /ECONNREFUSED/);
      const operator = JSON.parse((await probe({ Authorization: `Bearer ${TOKEN}` })).text);
      assert.equal(operator.detail, DRIVER_TEXT);

      // Back, then down again: a new outage is logged again.
      broken = false;
      assert.equal((await probe()).status, 200);
      broken = true;
      assert.equal((await probe()).status, 503);
      assert.equal(notReadyLogs().length, 2);
    });
  });
});
