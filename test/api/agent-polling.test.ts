import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AppError } from '../../src/errors/app-error.js';
import { AUTHORIZATION_TTL_MS, pollIntervalSeconds } from '../../src/modules/agents/agents.service.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

describe('polling an agent authorization', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '60' } });
    // A minute of its own: other tests' calls from this address count in the same MySQL windows.
    ctx.clock.set(new Date(Date.now() + 400 * 86_400_000 + Math.floor(Math.random() * 1e6) * 60_000));
  });
  after(() => ctx.close());

  it('answers AGENT_AUTHORIZATION_PENDING with Retry-After, and begin tells the same pace', async () => {
    const begun = await ctx.api.post('/api/v1/agent-authorizations');
    assert.equal(begun.status, 200, JSON.stringify(begun.body));
    assert.equal(begun.body.data.pollIntervalSeconds, pollIntervalSeconds(60));
    const poll = await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: begun.body.data.setupCode });
    assert.equal(poll.status, 409);
    assert.equal(poll.body.error.code, 'AGENT_AUTHORIZATION_PENDING');
    assert.equal(poll.headers['retry-after'], String(pollIntervalSeconds(60)));
  });

  for (const rate of [60, 7, 2]) {
    it(`polling every Retry-After seconds for the whole 10 minutes never hits a limit of ${rate} a minute`, async function () {
      this.timeout(60_000);
      const limited = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: String(rate) } });
      try {
        // An address of its own, so no other test's calls share the counter.
        const address = `poll-test-${randomUUID()}`;
        const begun = await limited.services.agents.beginAuthorization(address);
        const end = Date.parse(begun.expiresAt);
        let polls = 0;
        while (limited.clock.now().getTime() < end) {
          try {
            await limited.services.agents.exchange(begun.setupCode, address);
            assert.fail('no approval was given');
          } catch (err) {
            assert.ok(err instanceof AppError);
            assert.equal(
              err.code,
              'AGENT_AUTHORIZATION_PENDING',
              `poll ${polls + 1} at +${limited.clock.now().getTime() - (end - AUTHORIZATION_TTL_MS)} ms: ${err.message}`,
            );
            polls += 1;
            limited.clock.advance(Number(err.headers['Retry-After']) * 1000);
          }
        }
        assert.ok(polls >= Math.floor(AUTHORIZATION_TTL_MS / 1000 / pollIntervalSeconds(rate)), `${polls} polls`);
        // Faster than that pace does meet the limit (so the pace is what keeps it clear).
        const fast = await limited.services.agents.beginAuthorization(`${address}-fast`).catch((e) => e);
        let limitedOnce = false;
        for (let i = 0; i < rate + 1 && !limitedOnce; i++) {
          const r = await limited.services.agents.exchange(fast.setupCode, `${address}-fast`).catch((e: AppError) => e);
          limitedOnce = r instanceof AppError && r.code === 'RATE_LIMITED';
        }
        assert.ok(limitedOnce);
      } finally {
        await limited.close();
      }
    });
  }
});

describe('agent names', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
  });
  after(() => ctx.close());

  it('signup takes an optional name (at most 100 characters) for its key', async () => {
    const named = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .send({ name: 'nightly-trainer' });
    assert.equal(named.status, 201, JSON.stringify(named.body));
    assert.equal(named.body.data.account.key.name, 'nightly-trainer');
    for (const name of ['x'.repeat(101), 'two\nlines']) {
      const bad = await ctx.api.post('/api/v1/signup').set('Idempotency-Key', randomUUID()).send({ name });
      assert.equal(bad.status, 422, JSON.stringify(name));
      assert.equal(bad.body.error.code, 'VALIDATION_FAILED');
    }
  });

  it('an authorization session carries the name to the approval page (escaped) and to the key', async () => {
    const name = '<b>eval</b> & "bot"';
    const begun = await ctx.api.post('/api/v1/agent-authorizations').send({ name });
    assert.equal(begun.status, 200, JSON.stringify(begun.body));
    assert.equal(begun.body.data.name, name);
    const page = await ctx.api.get(new URL(begun.body.data.approvalUrl).pathname);
    assert.equal(page.status, 200);
    assert.ok(page.text.includes('&lt;b&gt;eval&lt;/b&gt; &amp; &quot;bot&quot;'), 'the name, escaped');
    assert.ok(!page.text.includes('<b>eval</b>'));

    const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 7);
    const { token } = await ctx.services.accounts.issueOwnerKey(account.id);
    const code = begun.body.data.approvalUrl.split('/').pop();
    const approved = await ctx.api
      .post('/api/v1/agent-authorizations/approve')
      .set('Authorization', `Bearer ${token}`)
      .send({ approvalCode: code, maxPerRentalMinor: 500, budgetLimitMinor: 500, maxConcurrentDeployments: 1 });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    const exchanged = await ctx.api
      .post('/api/v1/agent-setups/exchange')
      .send({ setupCode: begun.body.data.setupCode });
    assert.equal(exchanged.status, 200);
    assert.equal(exchanged.body.data.key.name, name);
    const list = await ctx.api.get('/api/v1/agent-keys').set('Authorization', `Bearer ${token}`);
    assert.ok(list.body.data.some((k: { name: string }) => k.name === name));

    const bodyless = await ctx.api.post('/api/v1/agent-authorizations');
    assert.equal(bodyless.status, 200);
    assert.equal(bodyless.body.data.name, null);
    for (const bad of ['y'.repeat(101), 'bell\u0007'])
      assert.equal((await ctx.api.post('/api/v1/agent-authorizations').send({ name: bad })).status, 422);
  });
});
