import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AgentsService } from '../../src/modules/agents/agents.service.js';
import type { Scope } from '../../src/modules/keys/api-key.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';

const LIMITS = { maxPerRentalMinor: 700, budgetLimitMinor: 3000, maxConcurrentDeployments: 2 };
const TEN_MINUTES = 10 * 60 * 1000;

interface Owner {
  accountId: string;
  keyId: string;
  token: string;
  auth: { Authorization: string };
}

/** An owner account with an OWNER key, as the Telegram bot's /start and /ownerkey make them. */
async function owner(ctx: TestContext, scopes?: Scope[]): Promise<Owner> {
  const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
  if (scopes) {
    const { key, token } = await ctx.services.store.transaction((r) =>
      ctx.services.keys.create(r.accounts, {
        accountId: account.id,
        kind: 'OWNER',
        name: 'narrow',
        scopes,
        origin: 'test',
        maxPerRentalMinor: 500,
        budgetLimitMinor: 500,
        maxConcurrentDeployments: 1,
      }),
    );
    return { accountId: account.id, keyId: key.id, token, auth: { Authorization: `Bearer ${token}` } };
  }
  const { key, token } = await ctx.services.accounts.issueOwnerKey(account.id);
  return { accountId: account.id, keyId: key.id, token, auth: { Authorization: `Bearer ${token}` } };
}

const approvalCodeOf = (url: string) => url.slice(url.lastIndexOf('/') + 1);

describe(AgentsService.name, () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext({
      env: { PUBLIC_BASE_URL: 'https://gpu.example.test', AGENT_SETUP_RATE_PER_MINUTE: '100000' },
    });
  });
  after(() => ctx.close());

  async function begin() {
    const res = await ctx.api.post('/api/v1/agent-authorizations');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.data as { authorizationId: string; setupCode: string; approvalUrl: string; expiresAt: string };
  }
  const exchange = (setupCode: string) => ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode });
  const approve = (o: { auth: Record<string, string> }, approvalCode: string, limits: object = LIMITS) =>
    ctx.api
      .post('/api/v1/agent-authorizations/approve')
      .set(o.auth)
      .send({ approvalCode, ...limits });

  describe('POST /api/v1/agent-authorizations', () => {
    it('hands out a private setup code and a distinct public approval URL, valid ten minutes, storing hashes only', async () => {
      const s = await begin();
      assert.match(s.setupCode, /^gps_[A-Za-z0-9_-]{43}$/);
      assert.match(s.approvalUrl, /^https:\/\/gpu\.example\.test\/approve\/gpa_[A-Za-z0-9_-]{43}$/);
      assert.ok(!s.approvalUrl.includes(s.setupCode.slice(4)));
      assert.equal(new Date(s.expiresAt).getTime(), ctx.clock.now().getTime() + TEN_MINUTES);
      const rows: Record<string, unknown>[] = await ctx.services.ds.query(
        'SELECT * FROM agent_authorizations WHERE id = ?',
        [s.authorizationId],
      );
      const stored = JSON.stringify(rows, (_k, v) =>
        v && v.type === 'Buffer' ? Buffer.from(v.data).toString('latin1') : v,
      );
      assert.ok(
        !stored.includes(s.setupCode) && !stored.includes(approvalCodeOf(s.approvalUrl)),
        'raw codes must not be stored',
      );
    });
  });

  describe('approval and exchange', () => {
    it('runs the whole session: pending, approved by an owner key, exchanged once for a limited agent key', async () => {
      const o = await owner(ctx);
      const s = await begin();
      const pending = await exchange(s.setupCode);
      assert.equal(pending.status, 409);
      assert.equal(pending.body.error.code, 'AGENT_AUTHORIZATION_PENDING');

      const approved = await approve(o, approvalCodeOf(s.approvalUrl), { ...LIMITS, name: 'trainer' });
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      assert.equal(approved.body.data.status, 'APPROVED');
      assert.equal(approved.body.data.maxPerRentalMinor, 700);

      const issued = await exchange(s.setupCode);
      assert.equal(issued.status, 200, JSON.stringify(issued.body));
      const { key, token } = issued.body.data;
      assert.match(token, /^gpr_[A-Za-z0-9]{8}\.[A-Za-z0-9_-]{43}$/);
      assert.equal(key.kind, 'AGENT');
      assert.equal(key.name, 'trainer');
      assert.deepEqual([...key.scopes].sort(), ['manage', 'read', 'rent']);
      assert.deepEqual([key.maxPerRentalMinor, key.budgetLimitMinor, key.maxConcurrentDeployments], [700, 3000, 2]);

      const me = await ctx.api.get('/api/v1/me').set({ Authorization: `Bearer ${token}` });
      assert.equal(me.status, 200);
      assert.equal(me.body.data.user.id, o.accountId, 'the agent key belongs to the owner account');

      const again = await exchange(s.setupCode);
      assert.equal(again.status, 409);
      assert.equal(again.body.error.code, 'AGENT_SETUP_INVALID');
      const reapprove = await approve(o, approvalCodeOf(s.approvalUrl));
      assert.equal(reapprove.status, 409);
      assert.equal(reapprove.body.error.code, 'AGENT_SETUP_INVALID');
    });

    it('never grants billing, even when the approving owner key has it', async () => {
      const o = await owner(ctx);
      const s = await begin();
      assert.equal((await approve(o, approvalCodeOf(s.approvalUrl))).status, 200);
      const { key, token } = (await exchange(s.setupCode)).body.data;
      assert.ok(!key.scopes.includes('billing'));
      const topup = await ctx.api
        .post('/api/v1/billing/topups')
        .set({ Authorization: `Bearer ${token}` })
        .set('Idempotency-Key', randomUUID())
        .send({ amountMinor: 500 });
      assert.equal(topup.status, 403);
    });

    it('lets only owner keys with read, rent and manage approve', async () => {
      const s = await begin();
      const agent = await signup(ctx);
      const byAgent = await approve(agent, approvalCodeOf(s.approvalUrl));
      assert.equal(byAgent.status, 403);
      assert.equal(byAgent.body.error.code, 'FORBIDDEN');
      const narrow = await owner(ctx, ['read', 'rent']);
      const byNarrow = await approve(narrow, approvalCodeOf(s.approvalUrl));
      assert.equal(byNarrow.status, 403);
      assert.match(byNarrow.body.error.message, /manage/);
      const anonymous = await ctx.api
        .post('/api/v1/agent-authorizations/approve')
        .send({ approvalCode: approvalCodeOf(s.approvalUrl), ...LIMITS });
      assert.equal(anonymous.status, 401);
      // Still pending: none of the refused approvals touched it.
      assert.equal((await exchange(s.setupCode)).body.error.code, 'AGENT_AUTHORIZATION_PENDING');
    });

    it('validates the limits against the minimums and names the field', async () => {
      const o = await owner(ctx);
      const s = await begin();
      for (const [field, value] of [
        ['maxPerRentalMinor', 499],
        ['budgetLimitMinor', 100],
        ['maxConcurrentDeployments', 0],
      ] as const) {
        const res = await approve(o, approvalCodeOf(s.approvalUrl), { ...LIMITS, [field]: value });
        assert.equal(res.status, 422, field);
        assert.equal(res.body.error.code, 'VALIDATION_FAILED');
        assert.match(res.body.error.message, new RegExp(field));
      }
      const missing = await ctx.api
        .post('/api/v1/agent-authorizations/approve')
        .set(o.auth)
        .send({ approvalCode: approvalCodeOf(s.approvalUrl), maxPerRentalMinor: 500 });
      assert.equal(missing.status, 422);
      const unknown = await approve(o, `gpa_${'x'.repeat(43)}`);
      assert.equal(unknown.status, 404);
    });

    it('expires an unapproved session after ten minutes', async () => {
      const o = await owner(ctx);
      const s = await begin();
      ctx.clock.advance(TEN_MINUTES);
      const late = await approve(o, approvalCodeOf(s.approvalUrl));
      assert.equal(late.status, 409);
      assert.equal(late.body.error.code, 'AGENT_SETUP_INVALID');
      assert.match(late.body.error.message, /expired/);
      const ex = await exchange(s.setupCode);
      assert.equal(ex.body.error.code, 'AGENT_SETUP_INVALID');
    });

    it('holds approval and exchange to the expiry the agent was told at the start', async () => {
      const o = await owner(ctx);
      const s = await begin();
      ctx.clock.advance(9 * 60 * 1000);
      const approved = await approve(o, approvalCodeOf(s.approvalUrl));
      assert.equal(approved.status, 200);
      assert.equal(approved.body.data.exchangeBefore, s.expiresAt, 'approval does not move the expiry');
      ctx.clock.advance(59 * 1000);
      assert.equal((await exchange(s.setupCode)).status, 200, 'one second before the expiry');

      const s2 = await begin();
      ctx.clock.advance(9 * 60 * 1000);
      assert.equal((await approve(o, approvalCodeOf(s2.approvalUrl))).status, 200);
      ctx.clock.advance(60 * 1000);
      const late = await exchange(s2.setupCode);
      assert.equal(late.status, 409);
      assert.equal(late.body.error.code, 'AGENT_SETUP_INVALID');
    });

    it('exchanges a Telegram-minted code once within ten minutes', async () => {
      const o = await owner(ctx);
      const { setupCode, expiresAt } = await ctx.services.agents.mintSetupCode(
        { accountId: o.accountId, keyId: null },
        { ...LIMITS, name: 'from chat' },
      );
      assert.match(setupCode, /^gps_[A-Za-z0-9_-]{43}$/);
      assert.equal(expiresAt.getTime(), ctx.clock.now().getTime() + TEN_MINUTES);
      const ok = await exchange(setupCode);
      assert.equal(ok.status, 200);
      assert.equal(ok.body.data.key.name, 'from chat');
      assert.equal((await exchange(setupCode)).body.error.code, 'AGENT_SETUP_INVALID');

      const late = await ctx.services.agents.mintSetupCode({ accountId: o.accountId, keyId: null }, LIMITS);
      ctx.clock.advance(TEN_MINUTES);
      assert.equal((await exchange(late.setupCode)).body.error.code, 'AGENT_SETUP_INVALID');
    });

    it('refuses Telegram limits under the minimums', async () => {
      const o = await owner(ctx);
      await assert.rejects(
        ctx.services.agents.mintSetupCode(
          { accountId: o.accountId, keyId: null },
          { ...LIMITS, budgetLimitMinor: 499 },
        ),
        /budgetLimitMinor/,
      );
    });

    it('rejects a malformed setup code with 422 and an unknown one with 409', async () => {
      for (const bad of ['', 'gps_short', `gpr_${'a'.repeat(43)}`, `gps_${'a'.repeat(42)}!`]) {
        const res = await exchange(bad);
        assert.equal(res.status, 422, bad);
        assert.match(res.body.error.message, /setupCode/);
      }
      const unknown = await exchange(`gps_${'A'.repeat(43)}`);
      assert.equal(unknown.status, 409);
      assert.equal(unknown.body.error.code, 'AGENT_SETUP_INVALID');
      const extra = await ctx.api
        .post('/api/v1/agent-setups/exchange')
        .send({ setupCode: `gps_${'A'.repeat(43)}`, scopes: ['billing'] });
      assert.equal(extra.status, 422);
    });

    it('issues exactly one key when one code is exchanged concurrently', async () => {
      const o = await owner(ctx);
      const { setupCode } = await ctx.services.agents.mintSetupCode({ accountId: o.accountId, keyId: null }, LIMITS);
      const results = await Promise.all(Array.from({ length: 12 }, () => exchange(setupCode)));
      const statuses = results.map((r) => r.status).sort();
      assert.deepEqual(statuses, [200, ...Array(11).fill(409)]);
      const [{ n }] = await ctx.services.ds.query(
        `SELECT COUNT(*) AS n FROM api_keys WHERE account_id = ? AND kind = 'AGENT'`,
        [o.accountId],
      );
      assert.equal(Number(n), 1);
    });
  });

  describe('switches and limits', () => {
    it('answers 503 AGENTS_DISABLED when agents are switched off', async () => {
      const off = await createTestContext({ env: { AGENT_V1_ENABLED: 'false' } });
      try {
        const b = await off.api.post('/api/v1/agent-authorizations');
        assert.equal(b.status, 503);
        assert.equal(b.body.error.code, 'AGENTS_DISABLED');
        const e = await off.api.post('/api/v1/agent-setups/exchange').send({ setupCode: `gps_${'A'.repeat(43)}` });
        assert.equal(e.status, 503);
        assert.equal(e.body.error.code, 'AGENTS_DISABLED');
        await assert.rejects(
          off.services.agents.mintSetupCode({ accountId: (await owner(off)).accountId, keyId: null }, LIMITS),
          /switched off/,
        );
        // Owners keep managing what they have: the switch covers only new agent credentials from outside.
        const o = await owner(off);
        assert.equal(
          (
            await off.api
              .post('/api/v1/agent-authorizations/approve')
              .set(o.auth)
              .send({ approvalCode: `gpa_${'x'.repeat(43)}`, ...LIMITS })
          ).status,
          404,
        );
        const issued = await off.api
          .post('/api/v1/agent-keys')
          .set(o.auth)
          .set('Idempotency-Key', randomUUID())
          .send({ name: 'ci', scopes: ['read'], ...LIMITS });
        assert.equal(issued.status, 201, JSON.stringify(issued.body));
      } finally {
        await off.close();
      }
    });

    it('refuses a frozen account new agents: approval, key issuance and setup codes (402 ACCOUNT_FROZEN)', async () => {
      const o = await owner(ctx);
      const s = await begin();
      await ctx.services.ds.query('UPDATE accounts SET frozen = 1 WHERE id = ?', [o.accountId]);
      const approved = await approve(o, approvalCodeOf(s.approvalUrl));
      assert.equal(approved.status, 402);
      assert.equal(approved.body.error.code, 'ACCOUNT_FROZEN');
      const issued = await ctx.api
        .post('/api/v1/agent-keys')
        .set(o.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ name: 'x', scopes: ['read'], ...LIMITS });
      assert.equal(issued.status, 402);
      assert.equal(issued.body.error.code, 'ACCOUNT_FROZEN');
      await assert.rejects(
        ctx.services.agents.mintSetupCode({ accountId: o.accountId, keyId: null }, LIMITS),
        /frozen/,
      );
      assert.equal(
        (await exchange(s.setupCode)).body.error.code,
        'AGENT_AUTHORIZATION_PENDING',
        'the session is still unapproved',
      );
    });

    it('rate-limits setup requests per client address with Retry-After', async () => {
      const limited = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '3' } });
      try {
        // A window of its own, whatever other tests did from this address.
        limited.clock.set(new Date(Date.UTC(2101, 0, 1, 0, Math.floor(Math.random() * 60 * 24))));
        const codes = [`gps_${'B'.repeat(43)}`, `gps_${'C'.repeat(43)}`];
        const first = await limited.api.post('/api/v1/agent-authorizations');
        assert.equal(first.status, 200);
        assert.equal(
          (await limited.api.post('/api/v1/agent-setups/exchange').send({ setupCode: codes[0] })).status,
          409,
        );
        assert.equal(
          (await limited.api.post('/api/v1/agent-setups/exchange').send({ setupCode: codes[1] })).status,
          409,
        );
        const refused = await limited.api.post('/api/v1/agent-setups/exchange').send({ setupCode: codes[0] });
        assert.equal(refused.status, 429);
        assert.equal(refused.body.error.code, 'RATE_LIMITED');
        assert.ok(Number(refused.headers['retry-after']) > 0);
        limited.clock.advance(60_000);
        assert.equal(
          (await limited.api.post('/api/v1/agent-setups/exchange').send({ setupCode: codes[0] })).status,
          409,
        );
      } finally {
        await limited.close();
      }
    });
  });

  describe('agent keys issued by owners', () => {
    const body = {
      name: 'batch runner',
      scopes: ['read', 'rent'],
      maxPerRentalMinor: 100,
      budgetLimitMinor: 1000,
      maxConcurrentDeployments: 3,
    };
    const issue = (o: { auth: Record<string, string> }, key: string | null, b: object = body) => {
      const req = ctx.api.post('/api/v1/agent-keys').set(o.auth);
      if (key !== null) req.set('Idempotency-Key', key);
      return req.send(b);
    };

    it('issues once with the token, replays without it, and refuses a changed body', async () => {
      const o = await owner(ctx);
      const idem = `batch-${randomUUID()}`;
      const created = await issue(o, idem);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.match(created.body.data.token, /^gpr_/);
      assert.equal(created.body.data.key.kind, 'AGENT');
      assert.deepEqual(created.body.data.key.scopes, ['read', 'rent']);
      const replay = await issue(o, idem);
      assert.equal(replay.status, 200);
      assert.equal(replay.body.data.token, null);
      assert.equal(replay.body.data.key.id, created.body.data.key.id);
      const changed = await issue(o, idem, { ...body, maxConcurrentDeployments: 4 });
      assert.equal(changed.status, 409);
      assert.equal(changed.body.error.code, 'IDEMPOTENCY_CONFLICT');
      // Another owner may use the same Idempotency-Key for its own key.
      const other = await owner(ctx);
      assert.equal((await issue(other, idem)).status, 201);
      const works = await ctx.api.get('/api/v1/me').set({ Authorization: `Bearer ${created.body.data.token}` });
      assert.equal(works.status, 200);
      assert.equal(works.body.data.key.maxConcurrentDeployments, 3);
    });

    it('creates one key for concurrent requests with one Idempotency-Key', async () => {
      const o = await owner(ctx);
      const idem = randomUUID();
      const results = await Promise.all(Array.from({ length: 8 }, () => issue(o, idem)));
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 200, 200, 200, 200, 200, 201]);
      assert.equal(new Set(results.map((r) => r.body.data.key.id)).size, 1);
      assert.equal(results.filter((r) => r.body.data.token).length, 1);
    });

    it('validates the request', async () => {
      const o = await owner(ctx);
      assert.equal((await issue(o, null)).status, 400);
      assert.equal((await issue(o, 'x'.repeat(129))).status, 400);
      const cases: [string, object][] = [
        ['name', { ...body, name: 'n'.repeat(101) }],
        ['name', { ...body, name: '' }],
        ['scopes', { ...body, scopes: [] }],
        ['scopes', { ...body, scopes: ['read', 'admin'] }],
        ['maxPerRentalMinor', { ...body, maxPerRentalMinor: 0 }],
        ['budgetLimitMinor', { ...body, budgetLimitMinor: 0 }],
        ['maxConcurrentDeployments', { ...body, maxConcurrentDeployments: 0 }],
      ];
      for (const [field, b] of cases) {
        const res = await issue(o, randomUUID(), b);
        assert.equal(res.status, 422, `${field}: ${JSON.stringify(res.body)}`);
        assert.match(res.body.error.message, new RegExp(field));
      }
    });

    it('limits scopes to the owner key’s and refuses agent keys', async () => {
      const narrow = await owner(ctx, ['read', 'rent', 'manage']);
      const beyond = await issue(narrow, randomUUID(), { ...body, scopes: ['read', 'billing'] });
      assert.equal(beyond.status, 403);
      assert.match(beyond.body.error.message, /billing/);
      const agent = await signup(ctx);
      const byAgent = await issue(agent, randomUUID());
      assert.equal(byAgent.status, 403);
      assert.equal((await ctx.api.get('/api/v1/agent-keys').set(agent.auth)).status, 403);
    });

    it('lists the account’s agent keys with limits and usage, never secrets', async () => {
      const o = await owner(ctx);
      const created = await issue(o, randomUUID());
      const { setupCode } = await ctx.services.agents.mintSetupCode({ accountId: o.accountId, keyId: null }, LIMITS);
      const exchanged = await exchange(setupCode);
      const list = await ctx.api.get('/api/v1/agent-keys').set(o.auth);
      assert.equal(list.status, 200);
      const ids = list.body.data.map((k: { id: string }) => k.id).sort();
      assert.deepEqual(ids, [created.body.data.key.id, exchanged.body.data.key.id].sort());
      for (const k of list.body.data) {
        assert.equal(k.kind, 'AGENT');
        assert.equal(typeof k.netSpentMinor, 'number');
        assert.equal(typeof k.activeDeployments, 'number');
        assert.equal(typeof k.maxPerRentalMinor, 'number');
      }
      assert.doesNotMatch(JSON.stringify(list.body), /gpr_|secret|hash|token/i);
    });

    it('revokes at once: the next call with the key is the uniform 401', async () => {
      const o = await owner(ctx);
      const created = await issue(o, randomUUID());
      const agentAuth = { Authorization: `Bearer ${created.body.data.token}` };
      assert.equal((await ctx.api.get('/api/v1/me').set(agentAuth)).status, 200);
      const revoked = await ctx.api.delete(`/api/v1/agent-keys/${created.body.data.key.id}`).set(o.auth);
      assert.equal(revoked.status, 200);
      assert.equal(revoked.body.data.id, created.body.data.key.id);
      const after = await ctx.api.get('/api/v1/me').set(agentAuth);
      const unknown = await ctx.api.get('/api/v1/me').set({ Authorization: `Bearer gpr_AAAAAAAA.${'A'.repeat(43)}` });
      assert.equal(after.status, 401);
      const strip = (b: { error: { requestId: string } }) => ({ ...b, error: { ...b.error, requestId: '' } });
      assert.deepEqual(strip(after.body), strip(unknown.body));
      // Again, by the id in upper case: ids are normalised where they come in.
      const again = await ctx.api.delete(`/api/v1/agent-keys/${created.body.data.key.id.toUpperCase()}`).set(o.auth);
      assert.equal(again.status, 200, 'revoking twice is fine');
      assert.equal(again.body.data.id, created.body.data.key.id);
      for (const id of [randomUUID(), 'not-a-key']) {
        const gone = await ctx.api.delete(`/api/v1/agent-keys/${id}`).set(o.auth);
        assert.equal(gone.status, 404, id);
        assert.equal(gone.body.error.message, 'No agent key with this id on this account.', id);
      }
      assert.equal(
        (await ctx.api.delete(`/api/v1/agent-keys/${o.keyId}`).set(o.auth)).status,
        404,
        'owner keys are not agent keys',
      );
      const stranger = await owner(ctx);
      const other = await issue(stranger, randomUUID());
      assert.equal(
        (await ctx.api.delete(`/api/v1/agent-keys/${other.body.data.key.id}`).set(o.auth)).status,
        404,
        'another account’s key',
      );
    });
  });

  describe('Telegram owners', () => {
    it('binds one account per Telegram user, even on concurrent first contact, and follows the chat', async () => {
      const user = Math.floor(Math.random() * 1e12);
      const accounts = await Promise.all(
        Array.from({ length: 5 }, () => ctx.services.accounts.findOrCreateTelegramOwner(user, 7)),
      );
      assert.equal(new Set(accounts.map((a) => a.id)).size, 1);
      const moved = await ctx.services.accounts.findOrCreateTelegramOwner(user, 8);
      assert.equal(moved.id, accounts[0].id);
      assert.equal(moved.telegramChatId, 8);
    });
  });

  describe('GET /approve/{code}', () => {
    it('shows what is asked, the expiry, the API call and, when configured, the Telegram button', async () => {
      const withBot = await createTestContext({
        env: { PUBLIC_BASE_URL: 'https://gpu.example.test', TELEGRAM_BOT_USERNAME: 'gpu_owner_bot' },
      });
      try {
        const s = (await withBot.api.post('/api/v1/agent-authorizations')).body.data;
        const code = approvalCodeOf(s.approvalUrl);
        const page = await withBot.api.get(`/approve/${code}`);
        assert.equal(page.status, 200);
        assert.match(page.headers['content-type'], /text\/html/);
        assert.match(page.text, /An agent asks for access/);
        assert.match(page.text, new RegExp(`https://t.me/gpu_owner_bot\\?start=approve_${code}`));
        assert.match(page.text, /agent-authorizations\/approve/);
        assert.match(page.text, new RegExp(s.expiresAt.slice(0, 16).replace('T', ' ')));
        assert.ok(!page.text.includes(s.setupCode), 'the page never shows the private setup code');
      } finally {
        await withBot.close();
      }
      const s = await begin();
      const plain = await ctx.api.get(`/approve/${approvalCodeOf(s.approvalUrl)}`);
      assert.equal(plain.status, 200);
      assert.doesNotMatch(plain.text, /t\.me/);
    });

    it('says plainly when a request is unknown, used or expired', async () => {
      const unknown = await ctx.api.get(`/approve/${encodeURIComponent('<script>alert(1)</script>')}`);
      assert.equal(unknown.status, 404);
      assert.doesNotMatch(unknown.text, /<script>alert/);
      assert.match(unknown.text, /not valid/);

      const o = await owner(ctx);
      const used = await begin();
      await approve(o, approvalCodeOf(used.approvalUrl));
      const usedPage = await ctx.api.get(`/approve/${approvalCodeOf(used.approvalUrl)}`);
      assert.equal(usedPage.status, 409);
      assert.match(usedPage.text, /already been approved/);

      const old = await begin();
      ctx.clock.advance(TEN_MINUTES + 1);
      const expired = await ctx.api.get(`/approve/${approvalCodeOf(old.approvalUrl)}`);
      assert.equal(expired.status, 410);
      assert.match(expired.text, /expired/);
    });
  });
});
