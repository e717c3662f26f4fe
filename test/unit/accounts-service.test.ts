import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import type { Account } from '../../src/modules/accounts/account.entity.js';
import type { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { OWNER_KEY_LIMITS, SIGNUP_LIMITS } from '../../src/modules/keys/key-limits.js';
import { accountsWorld, ownerOf, refusal, rows, type AccountsWorld } from '../fakes/accounts-services.js';

describe('AccountsService (memory store)', () => {
  let w: AccountsWorld;
  beforeEach(() => (w = accountsWorld()));

  describe('signup', () => {
    it('makes a zero-balance account with one AGENT key of every scope and the signup limits', async () => {
      const { account, token } = await w.accounts.signup(randomUUID(), undefined);
      assert.equal(account.balance.creditsMinor, 0);
      assert.equal(account.billing.model, 'ACCOUNT_BALANCE');
      assert.equal(account.key.kind, 'AGENT');
      assert.equal(account.key.name, 'signup');
      assert.deepEqual(account.key.scopes, ['read', 'rent', 'manage', 'billing']);
      assert.equal(account.key.maxPerRentalMinor, SIGNUP_LIMITS.defaults.maxPerRentalMinor);
      assert.equal(account.key.remainingBudgetMinor, SIGNUP_LIMITS.defaults.budgetLimitMinor);
      const principal = await w.keys.authenticate(`Bearer ${token}`);
      assert.equal(principal.accountId, account.user.id);
      assert.equal(rows<Account>(w, 'accounts').length, 1);
      assert.equal(rows<ApiKey>(w, 'api_keys').length, 1);
    });

    it('takes the limits and the name it is given', async () => {
      const { account } = await w.accounts.signup(randomUUID(), {
        name: 'research-bot',
        budgetLimitMinor: 1200,
        maxConcurrentDeployments: 3,
      });
      assert.equal(account.key.name, 'research-bot');
      assert.equal(account.key.budgetLimitMinor, 1200);
      assert.equal(account.key.maxConcurrentDeployments, 3);
      assert.equal(account.key.maxPerRentalMinor, SIGNUP_LIMITS.defaults.maxPerRentalMinor);
    });

    it('needs a UUID Idempotency-Key (400 INVALID_REQUEST), and writes nothing without one', async () => {
      assert.equal((await refusal(w.accounts.signup(undefined, undefined))).code, 'INVALID_REQUEST');
      assert.equal((await refusal(w.accounts.signup('not-a-uuid', undefined))).code, 'INVALID_REQUEST');
      assert.equal(rows(w, 'accounts').length, 0);
    });

    it('answers a replay SIGNUP_ALREADY_COMPLETED (the token is shown once) and makes no second account', async () => {
      const key = randomUUID();
      await w.accounts.signup(key, { name: 'a' });
      const err = await refusal(w.accounts.signup(key, { name: 'a' }));
      assert.equal(err.code, 'SIGNUP_ALREADY_COMPLETED');
      assert.match(err.message, /shown only once/);
      assert.equal(rows(w, 'accounts').length, 1);
    });

    it('refuses the same Idempotency-Key with another body as IDEMPOTENCY_CONFLICT', async () => {
      const key = randomUUID();
      await w.accounts.signup(key, { name: 'a' });
      assert.equal((await refusal(w.accounts.signup(key, { name: 'b' }))).code, 'IDEMPOTENCY_CONFLICT');
    });

    it('holds signups to the global rate, a minute at a time, and a replay spends none of it', async () => {
      w = accountsWorld({ accounts: { signupRatePerMinute: 2 } });
      const first = randomUUID();
      await w.accounts.signup(first, undefined);
      await w.accounts.signup(randomUUID(), undefined);
      // The retry of a finished signup is answered from its record, not counted.
      assert.equal((await refusal(w.accounts.signup(first, undefined))).code, 'SIGNUP_ALREADY_COMPLETED');
      const limited = await refusal(w.accounts.signup(randomUUID(), undefined));
      assert.equal(limited.code, 'RATE_LIMITED');
      assert.equal(limited.headers['Retry-After'], '60');
      w.clock.advance(60_000);
      await w.accounts.signup(randomUUID(), undefined);
      assert.equal(rows(w, 'accounts').length, 3);
    });

    it('refuses a signup that carries a working key, and goes on past one that does not authenticate', async () => {
      const { token, account } = await w.accounts.signup(randomUUID(), undefined);
      const err = await refusal(w.accounts.signup(randomUUID(), undefined, `Bearer ${token}`));
      assert.equal(err.code, 'SIGNUP_ALREADY_COMPLETED');
      assert.ok(err.message.includes(`gpr_${account.key.prefix}`), err.message);
      const other = await w.accounts.signup(randomUUID(), undefined, 'Bearer gpr_nothere0.xxx');
      assert.notEqual(other.account.user.id, account.user.id);
    });

    it('is refused with AGENTS_DISABLED when agent creation is switched off', async () => {
      w = accountsWorld({ accounts: { agentV1Enabled: false } });
      assert.equal((await refusal(w.accounts.signup(randomUUID(), undefined))).code, 'AGENTS_DISABLED');
      assert.throws(() => w.accounts.assertAgentsEnabled(), { code: 'AGENTS_DISABLED' });
    });

    it('makes one account and one key when its commit is lost once and it runs again', async () => {
      w.store.loseNextCommits(1);
      const { account, token } = await w.accounts.signup(randomUUID(), undefined);
      assert.equal(rows(w, 'accounts').length, 1);
      assert.equal(rows(w, 'api_keys').length, 1);
      assert.equal((await w.keys.authenticate(`Bearer ${token}`)).accountId, account.user.id);
    });

    it('gives new accounts the configured billing model', async () => {
      w = accountsWorld({ accounts: { defaultBillingModel: 'LEGACY_PREPAID' } });
      const { account } = await w.accounts.signup(randomUUID(), undefined);
      assert.equal(account.billing.model, 'LEGACY_PREPAID');
      assert.equal(account.billing.budgetRequired, true);
    });
  });

  describe('Telegram owners', () => {
    it('creates the account on first contact, then finds it again, keeping the chat current', async () => {
      const user = randomInt(1, 2 ** 40);
      const a = await w.accounts.findOrCreateTelegramOwner(user, 10);
      const again = await w.accounts.findOrCreateTelegramOwner(user, 10);
      assert.equal(again.id, a.id);
      const moved = await w.accounts.findOrCreateTelegramOwner(user, 11);
      assert.equal(moved.telegramChatId, 11);
      assert.equal((await w.store.read((r) => r.accounts.get(a.id))).telegramChatId, 11);
      assert.equal(rows(w, 'accounts').length, 1);
    });

    it('converges concurrent first messages of one user on one account', async () => {
      const user = randomInt(1, 2 ** 40);
      const all = await Promise.all([1, 2, 3].map(() => w.accounts.findOrCreateTelegramOwner(user, 5)));
      assert.equal(new Set(all.map((a) => a.id)).size, 1);
      assert.equal(rows(w, 'accounts').length, 1);
      // Each found no account and tried to make one: two lost to the unique key and read the winner's.
      assert.equal(w.store.attempts, 3);
    });
  });

  describe('owner keys and owners', () => {
    it('issues an OWNER key of every scope with the owner limits', async () => {
      const a = await w.accounts.findOrCreateTelegramOwner(randomInt(1, 2 ** 40), 1);
      const { key, token } = await w.accounts.issueOwnerKey(a.id);
      assert.equal(key.kind, 'OWNER');
      assert.equal(key.origin, 'owner');
      assert.equal(key.name, 'owner key');
      assert.equal(key.budgetLimitMinor, OWNER_KEY_LIMITS.budgetLimitMinor);
      assert.equal((await w.keys.authenticate(`Bearer ${token}`)).kind, 'OWNER');
    });

    it('creates an owner account and its first key from the operator shell', async () => {
      const { account, key, token } = await w.accounts.createOwner({
        name: 'Ada',
        email: 'ada@example.com',
        scopes: ['read', 'manage'],
        isAdmin: true,
        maxPerRentalMinor: 700,
        budgetLimitMinor: 9000,
        maxConcurrentDeployments: 4,
        maxRentalSeconds: 3600,
      });
      assert.equal(account.email, 'ada@example.com');
      assert.equal(key.origin, 'operator');
      assert.equal(key.isAdmin, true);
      assert.equal(key.maxRentalSeconds, 3600);
      const principal = await w.keys.authenticate(`Bearer ${token}`);
      assert.deepEqual(principal.scopes, ['read', 'manage']);
      assert.equal(principal.accountId, account.id);
    });

    it('describes the account: a frozen or negative one needs a budget', async () => {
      const { account, principal } = await ownerOf(w);
      assert.equal((await w.accounts.describe(principal)).billing.budgetRequired, false);
      w.store.tables.table<Account>('accounts').update(account.id, { balanceMinor: -5 });
      const negative = await w.accounts.describe(principal);
      assert.equal(negative.balance.creditsMinor, -5);
      assert.equal(negative.billing.budgetRequired, true);
      w.store.tables.table<Account>('accounts').update(account.id, { balanceMinor: 10, frozen: true });
      const frozen = await w.accounts.describe(principal);
      assert.equal(frozen.balance.frozen, true);
      assert.equal(frozen.billing.budgetRequired, true);
    });
  });
});
