import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import supertest from 'supertest';
import { createApp } from '../../src/app.js';
import { createServices } from '../../src/container.js';
import { createDataSource } from '../../src/db/data-source.js';
import { PAGE_RETRY_AFTER_SECONDS } from '../../src/modules/billing/payment-pages.html.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { signup } from '../helpers/factories.js';
import { createTopup } from '../helpers/payments.js';

describe('HTML pages while the database is unreachable', () => {
  // A TCP relay in front of MariaDB: cutting it takes the database away from this app only.
  let relay: Server;
  const sockets = new Set<Socket>();
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
    relay = createServer((client) => {
      const upstream = connect(3306, '127.0.0.1');
      sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      const drop = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', () => r()));
  });
  after(() => ctx.close());

  it('answers the payment and approval pages with a short 503 page and Retry-After, not 500', async () => {
    const url = new URL(testDatabaseUrl);
    url.port = String((relay.address() as { port: number }).port);
    const ds = createDataSource(url.toString(), 2);
    await ds.initialize();
    const services = createServices({ config: ctx.config, ds, clock: ctx.clock, logger: ctx.services.logger, providers: ctx.services.providers });
    const api = supertest.agent(createApp(services));
    try {
      const { topup } = await createTopup({ ...ctx, api }, await signup({ ...ctx, api }), 1500);
      const begun = await api.post('/api/v1/agent-authorizations');
      const approvePath = new URL(begun.body.data.approvalUrl).pathname;
      const approvePage = await api.get(approvePath);
      assert.equal(approvePage.status, 200);
      const csrf = /name="csrf" value="([^"]+)"/.exec(approvePage.text)![1];
      const origin = new URL(ctx.config.publicBaseUrl).origin;
      assert.equal((await api.get(`/pay/${topup.topupId}`)).status, 200);

      const closed = new Promise<void>((r) => relay.close(() => r()));
      for (const s of sockets) s.destroy();
      await closed;

      const pages = {
        'development payment page': await api.get(`/pay/${topup.topupId}`),
        'paying on it': await api.post(`/pay/${topup.topupId}`),
        'success page': await api.get(`/checkout/${topup.topupId}/success`),
        'cancel page': await api.get(`/checkout/${topup.topupId}/cancel`),
        'approval page': await api.get(approvePath),
        'approving on it': await api
          .post(approvePath)
          .type('form')
          .set('Origin', origin)
          .set('Sec-Fetch-Site', 'same-origin')
          .send({ perRentalUsd: '10', totalUsd: '50', concurrent: '1', ownerKey: 'gpr_whatever', csrf }),
      };
      for (const [name, res] of Object.entries(pages)) {
        assert.equal(res.status, 503, `${name}: ${res.status} ${res.text.slice(0, 300)}`);
        assert.equal(res.headers['retry-after'], String(PAGE_RETRY_AFTER_SECONDS), name);
        assert.match(res.headers['content-type'], /text\/html/, name);
        assert.equal(res.headers['cache-control'], 'no-store', name);
        assert.match(res.text, /Temporarily unavailable/, name);
        assert.match(res.text, /try again in a minute/, name);
        assert.doesNotMatch(res.text, /ECONN|Error:|at .*\.ts/, `${name}: no internals`);
      }
    } finally {
      await ds.destroy().catch(() => undefined);
    }
  });
});
