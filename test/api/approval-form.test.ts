import assert from 'node:assert/strict';
import { createTestContext, type TestContext } from '../helpers/context.js';

const ORIGIN = 'https://gpu.example.test';

describe('approval page form: cross-site requests', () => {
  let ctx: TestContext;
  let ownerToken: string;
  before(async () => {
    ctx = await createTestContext({ env: { PUBLIC_BASE_URL: ORIGIN, AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
    ({ token: ownerToken } = await ctx.services.accounts.createOwner({
      name: 'form owner',
      scopes: ['read', 'rent', 'manage'],
      isAdmin: false,
      maxPerRentalMinor: 100_000,
      budgetLimitMinor: 1_000_000,
      maxConcurrentDeployments: 10,
    }));
  });
  after(() => ctx.close());

  async function pageFor(): Promise<{ path: string; setupCode: string; cookie: string; csrf: string }> {
    const begun = await ctx.api.post('/api/v1/agent-authorizations');
    const path = new URL(begun.body.data.approvalUrl).pathname;
    const page = await ctx.api.get(path);
    assert.equal(page.status, 200);
    const setCookie = ([] as string[]).concat(page.headers['set-cookie'] ?? []);
    assert.equal(setCookie.length, 1);
    assert.match(setCookie[0], /HttpOnly/);
    assert.match(setCookie[0], /SameSite=Strict/);
    assert.match(setCookie[0], /Secure/);
    assert.match(setCookie[0], /Path=\/approve/);
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)![1];
    return { path, setupCode: begun.body.data.setupCode, cookie: setCookie[0].split(';')[0], csrf };
  }
  const form = (csrf?: string) => ({ perRentalUsd: '10', totalUsd: '50', concurrent: '1', ownerKey: ownerToken, ...(csrf ? { csrf } : {}) });
  const pending = async (setupCode: string) => (await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode })).body.error?.code === 'AGENT_AUTHORIZATION_PENDING';

  it('refuses a cross-site POST without the token, with a foreign Origin, or with another page\'s token', async () => {
    const p = await pageFor();
    const other = await pageFor();
    const attempts = [
      ctx.api.post(p.path).type('form').set('Origin', 'https://evil.example').send(form()),
      ctx.api.post(p.path).type('form').send(form()),
      ctx.api.post(p.path).type('form').set('Cookie', p.cookie).send(form()),
      ctx.api.post(p.path).type('form').set('Cookie', p.cookie).set('Origin', 'https://evil.example').send(form(p.csrf)),
      ctx.api.post(p.path).type('form').set('Cookie', p.cookie).set('Sec-Fetch-Site', 'cross-site').send(form(p.csrf)),
      ctx.api.post(p.path).type('form').set('Cookie', other.cookie).send(form(p.csrf)),
      ctx.api.post(p.path).type('form').set('Cookie', p.cookie).send(form(other.csrf)),
    ];
    for (const res of await Promise.all(attempts)) {
      assert.equal(res.status, 403, res.text);
      assert.match(res.text, /nothing was approved/);
    }
    assert.ok(await pending(p.setupCode), 'the session is still pending');

    const ok = await ctx.api.post(p.path).type('form').set('Cookie', p.cookie).set('Origin', ORIGIN).set('Sec-Fetch-Site', 'same-origin').send(form(p.csrf));
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.text, /Agent approved/);
    assert.equal((await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: p.setupCode })).status, 200);
  });

  it('applies the API\'s rules: an agent key cannot approve, and limits above the owner key\'s own are refused', async () => {
    const p = await pageFor();
    const signup = await ctx.api.post('/api/v1/signup').set('Idempotency-Key', crypto.randomUUID()).send({});
    const asAgent = await ctx.api.post(p.path).type('form').set('Cookie', p.cookie).send({ ...form(p.csrf), ownerKey: signup.body.data.token });
    assert.equal(asAgent.status, 403);
    assert.match(asAgent.text, /Only owner keys/);
    const fresh = await pageFor();
    const tooMuch = await ctx.api.post(fresh.path).type('form').set('Cookie', fresh.cookie).send({ ...form(fresh.csrf), concurrent: '11' });
    assert.equal(tooMuch.status, 403);
    assert.match(tooMuch.text, /may not exceed your owner key(&#39;|')s own: the number of machines at once is 11, your key allows at most 10\./);
    assert.ok(await pending(fresh.setupCode));
  });

  it('speaks dollars to the owner: the bounds on the page, a limit out of range and limits above the owner key, never cents or field names', async () => {
    const p = await pageFor();
    const page = await ctx.api.get(p.path);
    assert.match(page.text, /\$5\.00 to \$100,000\.00/);
    const low = await ctx.api.post(p.path).type('form').set('Cookie', p.cookie).send({ ...form(p.csrf), perRentalUsd: '4.99', totalUsd: '100001' });
    assert.equal(low.status, 422, low.text);
    const alert = /role="alert"[^>]*>([^<]*)</.exec(low.text)![1];
    assert.equal(
      alert,
      'Please check the form: the per-rental limit must be from $5.00 to $100,000.00; the total limit must be from $5.00 to $100,000.00.',
    );
    const over = await pageFor();
    const tooMuch = await ctx.api.post(over.path).type('form').set('Cookie', over.cookie).send({ ...form(over.csrf), perRentalUsd: '1500', concurrent: '11' });
    assert.equal(tooMuch.status, 403, tooMuch.text);
    assert.match(tooMuch.text, /the per-rental limit is \$1,500\.00, your key allows at most \$1,000\.00; the number of machines at once is 11, your key allows at most 10/);
    for (const res of [low, tooMuch]) assert.doesNotMatch(res.text, /Minor|integer from|cents/);
    assert.ok(await pending(p.setupCode) && (await pending(over.setupCode)));
  });
});
