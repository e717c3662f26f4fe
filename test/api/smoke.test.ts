import assert from 'node:assert/strict';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';

describe('smoke', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('signs up and reads /me', async () => {
    const a = await signup(ctx);
    const me = await ctx.api.get('/api/v1/me').set(a.auth);
    assert.equal(me.status, 200, JSON.stringify(me.body));
    assert.equal(me.body.data.billing.model, 'ACCOUNT_BALANCE');
    const offers = await ctx.api.get('/api/v1/offers');
    assert.equal(offers.status, 200);
    assert.equal(offers.body.data.length, 13);
  });
});
