import assert from 'node:assert/strict';
import { PAGE_RETRY_AFTER_SECONDS } from '../../src/modules/billing/payment-pages.html.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { appBehindRelay } from '../helpers/db-relay.js';
import { signup } from '../helpers/factories.js';
import { createTopup } from '../helpers/payments.js';

describe('HTML pages while the database is unreachable', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
  });
  after(() => ctx.close());

  it('answers the payment and approval pages with a short 503 page and Retry-After, not 500', async () => {
    const relayed = await appBehindRelay(ctx);
    const { api } = relayed;
    try {
      const { topup } = await createTopup({ ...ctx, api }, await signup({ ...ctx, api }), 1500);
      const begun = await api.post('/api/v1/agent-authorizations');
      const approvePath = new URL(begun.body.data.approvalUrl).pathname;
      const approvePage = await api.get(approvePath);
      assert.equal(approvePage.status, 200);
      const csrf = /name="csrf" value="([^"]+)"/.exec(approvePage.text)![1];
      const origin = new URL(ctx.config.http.publicBaseUrl).origin;
      assert.equal((await api.get(`/pay/${topup.topupId}`)).status, 200);

      await relayed.cut();

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
      await relayed.close();
    }
  });
});
