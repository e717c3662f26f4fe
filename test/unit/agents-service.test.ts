import assert from 'node:assert/strict';
import type { AgentAuthorization } from '../../src/modules/agents/agent-authorization.entity.js';
import { AUTHORIZATION_TTL_MS, pollIntervalSeconds, SETUP_SCOPES } from '../../src/modules/agents/agents.service.js';
import type { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import type { KeyLimits } from '../../src/modules/keys/key-limits.js';
import { accountsWorld, ownerOf, refusal, rows, type AccountsWorld } from '../fakes/accounts-services.js';

const LIMITS: KeyLimits = {
  maxPerRentalMinor: 800,
  budgetLimitMinor: 4000,
  maxConcurrentDeployments: 2,
  maxRentalSeconds: 7200,
  idleTerminateMinutes: 30,
};

/** The public approval code of an approval URL. */
const codeOf = (approvalUrl: string) => approvalUrl.split('/').pop()!;

describe('AgentsService (memory store)', () => {
  let w: AccountsWorld;
  let owner: Awaited<ReturnType<typeof ownerOf>>;
  beforeEach(async () => {
    w = accountsWorld();
    owner = await ownerOf(w);
  });

  describe('authorization sessions', () => {
    it('begins a session: a private setup code and a public approval URL, for ten minutes', async () => {
      const s = await w.agents.beginAuthorization('10.0.0.1', { name: 'research-bot' });
      assert.match(s.setupCode, /^gps_[A-Za-z0-9_-]{43}$/);
      assert.match(s.approvalUrl, /^https:\/\/gpu\.example\/approve\/gpa_[A-Za-z0-9_-]{43}$/);
      assert.equal(s.name, 'research-bot');
      assert.equal(s.expiresAt, new Date(w.clock.now().getTime() + AUTHORIZATION_TTL_MS).toISOString());
      assert.equal(s.pollIntervalSeconds, pollIntervalSeconds(1000));
      const [row] = rows<AgentAuthorization>(w, 'agent_authorizations');
      // Only hashes are stored.
      assert.ok(!JSON.stringify(row).includes(s.setupCode));
      assert.equal(row.status, 'PENDING');
    });

    it('describes a session by its approval code: pending, then expired; nothing for unknown or malformed codes', async () => {
      const s = await w.agents.beginAuthorization();
      const seen = await w.agents.describeAuthorization(codeOf(s.approvalUrl));
      assert.equal(seen?.status, 'PENDING');
      assert.equal(seen?.authorizationId, s.authorizationId);
      w.clock.advance(AUTHORIZATION_TTL_MS);
      assert.equal((await w.agents.describeAuthorization(codeOf(s.approvalUrl)))?.status, 'EXPIRED');
      assert.equal(await w.agents.describeAuthorization('gpa_nope'), null);
      assert.equal(await w.agents.describeAuthorization(`gpa_${'A'.repeat(43)}`), null);
    });

    it('answers the exchange of a pending session AGENT_AUTHORIZATION_PENDING with when to poll', async () => {
      const s = await w.agents.beginAuthorization();
      const err = await refusal(w.agents.exchange(s.setupCode));
      assert.equal(err.code, 'AGENT_AUTHORIZATION_PENDING');
      assert.equal(err.headers['Retry-After'], String(s.pollIntervalSeconds));
    });

    it('approved by an owner key, exchanges once for an AGENT key carrying the approved limits', async () => {
      const s = await w.agents.beginAuthorization('internal', { name: 'helper' });
      const approved = await w.agents.approveWithKey(owner.principal, codeOf(s.approvalUrl), LIMITS);
      assert.equal(approved.status, 'APPROVED');
      assert.equal(approved.exchangeBefore, s.expiresAt);
      const { key, token } = await w.agents.exchange(s.setupCode);
      assert.equal(key.kind, 'AGENT');
      assert.equal(key.name, 'helper');
      assert.deepEqual(key.scopes, SETUP_SCOPES);
      assert.equal(key.maxPerRentalMinor, LIMITS.maxPerRentalMinor);
      assert.equal(key.maxRentalSeconds, LIMITS.maxRentalSeconds);
      const principal = await w.keys.authenticate(`Bearer ${token}`);
      assert.equal(principal.accountId, owner.account.id);
      assert.equal(principal.key.issuedByKeyId, owner.key.id);
      assert.equal(principal.key.origin, 'authorization');
      assert.equal((await w.agents.describeAuthorization(codeOf(s.approvalUrl)))?.status, 'EXCHANGED');
      assert.equal((await refusal(w.agents.exchange(s.setupCode))).code, 'AGENT_SETUP_INVALID');
    });

    it('approves a session once, within its ten minutes; an unknown code is 404', async () => {
      const s = await w.agents.beginAuthorization();
      await w.agents.approveWithKey(owner.principal, codeOf(s.approvalUrl), LIMITS);
      const twice = await refusal(w.agents.approveWithKey(owner.principal, codeOf(s.approvalUrl), LIMITS));
      assert.equal(twice.code, 'AGENT_SETUP_INVALID');
      const late = await w.agents.beginAuthorization();
      w.clock.advance(AUTHORIZATION_TTL_MS);
      const expired = await refusal(w.agents.approveWithKey(owner.principal, codeOf(late.approvalUrl), LIMITS));
      assert.equal(expired.code, 'AGENT_SETUP_INVALID');
      assert.match(expired.message, /expired/);
      const unknown = await refusal(w.agents.approveWithKey(owner.principal, `gpa_${'B'.repeat(43)}`, LIMITS));
      assert.equal(unknown.code, 'NOT_FOUND');
    });

    it('lets only owner keys with read, rent and manage approve, within their own limits', async () => {
      const s = await w.agents.beginAuthorization();
      const code = codeOf(s.approvalUrl);
      const agent = await w.agents.beginAuthorization().then(async (a) => {
        await w.agents.approveWithKey(owner.principal, codeOf(a.approvalUrl), LIMITS);
        return w.agents.exchange(a.setupCode);
      });
      const agentPrincipal = await w.keys.authenticate(`Bearer ${agent.token}`);
      assert.equal((await refusal(w.agents.approveWithKey(agentPrincipal, code, LIMITS))).code, 'FORBIDDEN');
      const narrow = { ...owner.principal, scopes: owner.principal.scopes.filter((x) => x !== 'rent') };
      const missing = await refusal(w.agents.approveWithKey(narrow, code, LIMITS));
      assert.equal(missing.code, 'FORBIDDEN');
      assert.match(missing.message, /missing: rent/);
      const over = { ...LIMITS, budgetLimitMinor: owner.key.budgetLimitMinor + 1 };
      assert.equal((await refusal(w.agents.approveWithKey(owner.principal, code, over))).code, 'KEY_LIMIT_EXCEEDED');
      assert.equal((await w.agents.describeAuthorization(code))?.status, 'PENDING');
    });

    it('refuses an approval with an owner key revoked since it authenticated (401)', async () => {
      const s = await w.agents.beginAuthorization();
      await w.keys.revoke(owner.account.id, owner.key.id);
      const err = await refusal(w.agents.approveWithKey(owner.principal, codeOf(s.approvalUrl), LIMITS));
      assert.equal(err.code, 'UNAUTHENTICATED');
    });

    it("checks the bot's approval limits itself, and lets a frozen account approve nothing", async () => {
      const s = await w.agents.beginAuthorization();
      const ref = { accountId: owner.account.id, keyId: null };
      const low = await refusal(
        w.agents.approveAuthorization(ref, codeOf(s.approvalUrl), { ...LIMITS, budgetLimitMinor: 1 }),
      );
      assert.equal(low.code, 'VALIDATION_FAILED');
      const frozen = await ownerOf(w, { frozen: true });
      const err = await refusal(
        w.agents.approveAuthorization({ accountId: frozen.account.id, keyId: null }, codeOf(s.approvalUrl), LIMITS),
      );
      assert.equal(err.code, 'ACCOUNT_FROZEN');
      const ok = await w.agents.approveAuthorization(ref, codeOf(s.approvalUrl), { ...LIMITS, name: 'from telegram' });
      assert.equal(ok.status, 'APPROVED');
      assert.equal((await w.agents.exchange(s.setupCode)).key.name, 'from telegram');
    });
  });

  describe('setup codes', () => {
    it('mints a code that exchanges once, within ten minutes, for a key of its limits', async () => {
      const { setupCode, expiresAt } = await w.agents.mintSetupCode(
        { accountId: owner.account.id, keyId: owner.key.id },
        { ...LIMITS, name: 'ci' },
      );
      assert.equal(expiresAt.getTime(), w.clock.now().getTime() + AUTHORIZATION_TTL_MS);
      const { key } = await w.agents.exchange(setupCode);
      assert.equal(key.name, 'ci');
      assert.equal(key.budgetLimitMinor, LIMITS.budgetLimitMinor);
      const stored = w.store.tables.table<ApiKey>('api_keys').get(key.id)!;
      assert.equal(stored.origin, 'telegram-setup');
      assert.equal(stored.issuedByKeyId, owner.key.id);
      assert.equal((await refusal(w.agents.exchange(setupCode))).code, 'AGENT_SETUP_INVALID');
    });

    it('refuses an expired or unknown code, and a frozen account cannot mint', async () => {
      const { setupCode } = await w.agents.mintSetupCode({ accountId: owner.account.id, keyId: null }, LIMITS);
      w.clock.advance(AUTHORIZATION_TTL_MS);
      assert.equal((await refusal(w.agents.exchange(setupCode))).code, 'AGENT_SETUP_INVALID');
      assert.equal((await refusal(w.agents.exchange(`gps_${'C'.repeat(43)}`))).code, 'AGENT_SETUP_INVALID');
      const frozen = await ownerOf(w, { frozen: true });
      const err = await refusal(w.agents.mintSetupCode({ accountId: frozen.account.id, keyId: null }, LIMITS));
      assert.equal(err.code, 'ACCOUNT_FROZEN');
    });

    it('issues one key when the exchange commit is lost once and runs again', async () => {
      const { setupCode } = await w.agents.mintSetupCode({ accountId: owner.account.id, keyId: null }, LIMITS);
      const keysBefore = rows(w, 'api_keys').length;
      w.store.loseNextCommits(1);
      const { key, token } = await w.agents.exchange(setupCode);
      assert.equal(rows(w, 'api_keys').length, keysBefore + 1);
      assert.equal((await w.keys.authenticate(`Bearer ${token}`)).keyId, key.id);
      const [row] = rows<AgentAuthorization>(w, 'agent_authorizations');
      assert.equal(row.issuedKeyId, key.id);
    });
  });

  describe('switches and limits', () => {
    it('holds each address to the setup rate, begin and exchange together', async () => {
      w = accountsWorld({ agents: { setupRatePerMinute: 2 } });
      const s = await w.agents.beginAuthorization('10.0.0.7');
      assert.equal((await refusal(w.agents.exchange(s.setupCode, '10.0.0.7'))).code, 'AGENT_AUTHORIZATION_PENDING');
      assert.equal((await refusal(w.agents.beginAuthorization('10.0.0.7'))).code, 'RATE_LIMITED');
      await w.agents.beginAuthorization('10.0.0.8');
      w.clock.advance(60_000);
      await w.agents.beginAuthorization('10.0.0.7');
    });

    it('refuses begin, mint and exchange with AGENTS_DISABLED when agent creation is off', async () => {
      w = accountsWorld({ agents: { agentV1Enabled: false } });
      owner = await ownerOf(w);
      assert.equal((await refusal(w.agents.beginAuthorization())).code, 'AGENTS_DISABLED');
      const ref = { accountId: owner.account.id, keyId: null };
      assert.equal((await refusal(w.agents.mintSetupCode(ref, LIMITS))).code, 'AGENTS_DISABLED');
      assert.equal((await refusal(w.agents.exchange(`gps_${'D'.repeat(43)}`))).code, 'AGENTS_DISABLED');
    });

    it('polls slowly enough that a session never trips its own per-address limit', () => {
      for (const rate of [1, 2, 3, 5, 10, 30, 61]) {
        const s = pollIntervalSeconds(rate);
        if (rate <= 2) assert.equal(s, 60);
        else assert.ok(Math.ceil(60 / s) + 1 <= rate, `rate ${rate}: every ${s} s`);
      }
    });
  });
});
