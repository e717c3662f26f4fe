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
  const form = (csrf?: string) => ({
    perRentalUsd: '10',
    totalUsd: '50',
    concurrent: '1',
    ownerKey: ownerToken,
    ...(csrf ? { csrf } : {}),
  });
  const pending = async (setupCode: string) =>
    (await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode })).body.error?.code ===
    'AGENT_AUTHORIZATION_PENDING';

  it("refuses a cross-site POST without the token, with a foreign Origin, or with another page's token", async () => {
    const p = await pageFor();
    const other = await pageFor();
    const attempts = [
      ctx.api.post(p.path).type('form').set('Origin', 'https://evil.example').send(form()),
      ctx.api.post(p.path).type('form').send(form()),
      ctx.api.post(p.path).type('form').set('Cookie', p.cookie).send(form()),
      ctx.api
        .post(p.path)
        .type('form')
        .set('Cookie', p.cookie)
        .set('Origin', 'https://evil.example')
        .send(form(p.csrf)),
      ctx.api.post(p.path).type('form').set('Cookie', p.cookie).set('Sec-Fetch-Site', 'cross-site').send(form(p.csrf)),
      ctx.api.post(p.path).type('form').set('Cookie', other.cookie).send(form(p.csrf)),
      ctx.api.post(p.path).type('form').set('Cookie', p.cookie).send(form(other.csrf)),
    ];
    for (const res of await Promise.all(attempts)) {
      assert.equal(res.status, 403, res.text);
      assert.match(res.text, /nothing was approved/);
    }
    assert.ok(await pending(p.setupCode), 'the session is still pending');

    const ok = await ctx.api
      .post(p.path)
      .type('form')
      .set('Cookie', p.cookie)
      .set('Origin', ORIGIN)
      .set('Sec-Fetch-Site', 'same-origin')
      .send(form(p.csrf));
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.text, /Agent approved/);
    assert.equal((await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: p.setupCode })).status, 200);
  });

  it("applies the API's rules: an agent key cannot approve, and limits above the owner key's own are refused", async () => {
    const p = await pageFor();
    const signup = await ctx.api.post('/api/v1/signup').set('Idempotency-Key', crypto.randomUUID()).send({});
    const asAgent = await ctx.api
      .post(p.path)
      .type('form')
      .set('Cookie', p.cookie)
      .send({ ...form(p.csrf), ownerKey: signup.body.data.token });
    assert.equal(asAgent.status, 403);
    assert.match(asAgent.text, /Only owner keys/);
    const fresh = await pageFor();
    const tooMuch = await ctx.api
      .post(fresh.path)
      .type('form')
      .set('Cookie', fresh.cookie)
      .send({ ...form(fresh.csrf), concurrent: '11' });
    assert.equal(tooMuch.status, 403);
    assert.match(
      tooMuch.text,
      /may not exceed your owner key(&#39;|')s own: the number of machines at once is 11, your key allows at most 10\./,
    );
    assert.ok(await pending(fresh.setupCode));
  });

  it('speaks dollars to the owner: the bounds on the page, a limit out of range and limits above the owner key, never cents or field names', async () => {
    const p = await pageFor();
    const page = await ctx.api.get(p.path);
    assert.match(page.text, /\$5\.00 to \$100,000\.00/);
    const low = await ctx.api
      .post(p.path)
      .type('form')
      .set('Cookie', p.cookie)
      .send({ ...form(p.csrf), perRentalUsd: '4.99', totalUsd: '100001' });
    assert.equal(low.status, 422, low.text);
    const alert = /role="alert"[^>]*>([^<]*)</.exec(low.text)![1];
    assert.equal(
      alert,
      'Please check the form: the per-rental limit must be from $5.00 to $100,000.00; the total limit must be from $5.00 to $100,000.00.',
    );
    const over = await pageFor();
    const tooMuch = await ctx.api
      .post(over.path)
      .type('form')
      .set('Cookie', over.cookie)
      .send({ ...form(over.csrf), perRentalUsd: '1500', concurrent: '11' });
    assert.equal(tooMuch.status, 403, tooMuch.text);
    assert.match(
      tooMuch.text,
      /the per-rental limit is \$1,500\.00, your key allows at most \$1,000\.00; the number of machines at once is 11, your key allows at most 10/,
    );
    for (const res of [low, tooMuch]) assert.doesNotMatch(res.text, /Minor|integer from|cents/);
    assert.ok((await pending(p.setupCode)) && (await pending(over.setupCode)));
  });

  it('reads typed dollars by the one rule: a decimal comma is taken, anything else refused with the one hint', async () => {
    const p = await pageFor();
    const bad = await ctx.api
      .post(p.path)
      .type('form')
      .set('Cookie', p.cookie)
      .send({ ...form(p.csrf), perRentalUsd: '12.345', totalUsd: '100,5' });
    assert.equal(bad.status, 422, bad.text);
    assert.equal(
      /role="alert"[^>]*>([^<]*)</.exec(bad.text)![1],
      // "100,5" is $100.50, within the bounds: only the per-rental limit is wrong.
      'Please check the form: the per-rental limit must be an amount in US dollars (write dollars like 12.50).',
    );
  });

  it('takes an optional longest rental in hours or minutes, carries it onto the key, and says in words what is wrong', async () => {
    const p = await pageFor();
    const page = await ctx.api.get(p.path);
    assert.match(page.text, /Longest rental \(optional\)/);
    assert.match(page.text, /1 minute to 30 days; empty: no limit/);
    for (const [maxRental, alert] of [
      ['8', 'the longest rental must be a length such as 8h, 90m or 2d, or empty for no limit'],
      ['31d', 'the longest rental must be from 1 minute to 30 days'],
      ['30s', 'the longest rental must be a length such as 8h, 90m or 2d, or empty for no limit'],
    ]) {
      const res = await ctx.api
        .post(p.path)
        .type('form')
        .set('Cookie', p.cookie)
        .send({ ...form(p.csrf), maxRental });
      assert.equal(res.status, 422, res.text);
      assert.equal(/role="alert"[^>]*>([^<]*)</.exec(res.text)![1], `Please check the form: ${alert}.`);
      assert.doesNotMatch(res.text, /maxRentalSeconds|seconds/);
    }
    const ok = await ctx.api
      .post(p.path)
      .type('form')
      .set('Cookie', p.cookie)
      .send({ ...form(p.csrf), maxRental: '1h30m' });
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.text, /<dt>Longest rental<\/dt><dd>1 hour 30 minutes<\/dd>/);
    const issued = await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: p.setupCode });
    assert.equal(issued.body.data.key.maxRentalSeconds, 5400);

    const empty = await pageFor();
    const none = await ctx.api
      .post(empty.path)
      .type('form')
      .set('Cookie', empty.cookie)
      .send({ ...form(empty.csrf), maxRental: '' });
    assert.equal(none.status, 200, none.text);
    assert.match(none.text, /<dt>Longest rental<\/dt><dd>no limit<\/dd>/);
    assert.equal(
      (await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: empty.setupCode })).body.data.key
        .maxRentalSeconds,
      null,
    );
  });

  it("refuses in words a longest rental beyond the owner key's own, or none when the owner key has one", async () => {
    const { token } = await ctx.services.accounts.createOwner({
      name: 'short leases',
      scopes: ['read', 'rent', 'manage'],
      isAdmin: false,
      maxPerRentalMinor: 100_000,
      budgetLimitMinor: 1_000_000,
      maxConcurrentDeployments: 10,
      maxRentalSeconds: 8 * 3600,
    });
    for (const [maxRental, words] of [
      ['9h', 'the longest rental is 9 hours, your key allows at most 8 hours'],
      ['', 'the longest rental is unlimited, your key allows at most 8 hours'],
    ]) {
      const p = await pageFor();
      const res = await ctx.api
        .post(p.path)
        .type('form')
        .set('Cookie', p.cookie)
        .send({ ...form(p.csrf), ownerKey: token, maxRental });
      assert.equal(res.status, 403, res.text);
      assert.match(res.text, new RegExp(words));
      assert.ok(await pending(p.setupCode));
    }
  });
});
