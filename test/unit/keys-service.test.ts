import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { setKeyCounters } from '../fakes/store/accounts.js';
import { accountsWorld, ownerOf, refusal, type AccountsWorld } from '../fakes/accounts-services.js';

describe('KeysService (memory store)', () => {
  let w: AccountsWorld;
  let owner: Awaited<ReturnType<typeof ownerOf>>;
  beforeEach(async () => {
    w = accountsWorld();
    owner = await ownerOf(w);
  });

  const agentKey = (budgetLimitMinor = 5000) =>
    w.store.transaction((r) =>
      w.keys.create(r.accounts, {
        accountId: owner.account.id,
        kind: 'AGENT',
        name: 'agent',
        scopes: ['read', 'rent'],
        origin: 'test',
        maxPerRentalMinor: 500,
        budgetLimitMinor,
        maxConcurrentDeployments: 2,
      }),
    );
  const stored = (id: string) => w.store.tables.table<ApiKey>('api_keys').get(id)!;

  describe('authenticate', () => {
    it('accepts a live key under any case of the Bearer scheme, as its principal', async () => {
      const { key, token } = await agentKey();
      for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
        const p = await w.keys.authenticate(`${scheme} ${token}`);
        assert.deepEqual(
          [p.keyId, p.accountId, p.kind, p.scopes],
          [key.id, owner.account.id, 'AGENT', ['read', 'rent']],
        );
      }
    });

    it('refuses a missing, malformed, unknown or wrong key with the one 401', async () => {
      const { token } = await agentKey();
      const wrongSecret = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
      const unknown = `gpr_ZZZZZZZZ.${'a'.repeat(43)}`;
      for (const header of [
        undefined,
        '',
        'Basic abc',
        `Bearer`,
        'Bearer gpr_short',
        `Bearer ${unknown}`,
        `Bearer ${wrongSecret}`,
      ]) {
        const err = await refusal(w.keys.authenticate(header));
        assert.equal(err.code, 'UNAUTHENTICATED', String(header));
      }
    });

    it('refuses a revoked key on its very next request', async () => {
      const { key, token } = await agentKey();
      await w.keys.authenticate(`Bearer ${token}`);
      await w.keys.revoke(owner.account.id, key.id);
      assert.equal((await refusal(w.keys.authenticate(`Bearer ${token}`))).code, 'UNAUTHENTICATED');
    });

    it('stamps the last use at most once a minute', async () => {
      const { key, token } = await agentKey();
      await w.keys.authenticate(`Bearer ${token}`);
      const first = stored(key.id).lastUsedAt;
      assert.deepEqual(first, w.clock.now());
      w.clock.advance(30_000);
      await w.keys.authenticate(`Bearer ${token}`);
      assert.deepEqual(stored(key.id).lastUsedAt, first);
      w.clock.advance(31_000);
      await w.keys.authenticate(`Bearer ${token}`);
      assert.deepEqual(stored(key.id).lastUsedAt, w.clock.now());
    });

    it('reuses a key read in the last minute only for callers that check revocation themselves', async () => {
      const { key, token } = await agentKey();
      await w.keys.authenticate(`Bearer ${token}`);
      // Revoked behind this process's back (another process): only the row knows.
      w.store.tables.table<ApiKey>('api_keys').update(key.id, { revokedAt: w.clock.now() });
      const cached = await w.keys.authenticate(`Bearer ${token}`, { revocationCheckedInTransaction: true });
      assert.equal(cached.keyId, key.id);
      assert.equal((await refusal(w.keys.authenticate(`Bearer ${token}`))).code, 'UNAUTHENTICATED');
      // The fresh read dropped it: the next cached call reads again and is refused.
      const again = w.keys.authenticate(`Bearer ${token}`, { revocationCheckedInTransaction: true });
      assert.equal((await refusal(again)).code, 'UNAUTHENTICATED');
    });

    it('reads a remembered key afresh after a minute, or once it is forgotten', async () => {
      const { key, token } = await agentKey();
      await w.keys.authenticate(`Bearer ${token}`);
      w.store.tables.table<ApiKey>('api_keys').update(key.id, { revokedAt: w.clock.now() });
      w.clock.advance(60_000);
      const late = w.keys.authenticate(`Bearer ${token}`, { revocationCheckedInTransaction: true });
      assert.equal((await refusal(late)).code, 'UNAUTHENTICATED');

      const other = await agentKey();
      await w.keys.authenticate(`Bearer ${other.token}`);
      w.store.tables.table<ApiKey>('api_keys').update(other.key.id, { revokedAt: w.clock.now() });
      w.keys.forget(other.key.id);
      const forgotten = w.keys.authenticate(`Bearer ${other.token}`, { revocationCheckedInTransaction: true });
      assert.equal((await refusal(forgotten)).code, 'UNAUTHENTICATED');
    });

    it('does not take a remembered key for a token with the same prefix and another secret', async () => {
      const { token } = await agentKey();
      await w.keys.authenticate(`Bearer ${token}`);
      const forged = `${token.slice(0, 13)}${'x'.repeat(43)}`;
      const err = await refusal(w.keys.authenticate(`Bearer ${forged}`, { revocationCheckedInTransaction: true }));
      assert.equal(err.code, 'UNAUTHENTICATED');
    });
  });

  describe('usage and locks', () => {
    it("reads each key's spend, remaining budget and slots from its counters", async () => {
      const { key } = await agentKey(5000);
      const fresh = await agentKey(800);
      setKeyCounters(w.store.tables, key.id, { netSpentMinor: 1200, activeDeployments: 2 });
      const usage = await w.keys.usage([key, fresh.key]);
      assert.deepEqual(usage.get(key.id), { netSpentMinor: 1200, remainingBudgetMinor: 3800, activeDeployments: 2 });
      assert.deepEqual(usage.get(fresh.key.id), { netSpentMinor: 0, remainingBudgetMinor: 800, activeDeployments: 0 });
      assert.equal((await w.keys.usage([])).size, 0);
    });

    it("locks the key's account and reads its usage in the caller's transaction", async () => {
      const { key } = await agentKey(5000);
      setKeyCounters(w.store.tables, key.id, { netSpentMinor: 100, activeDeployments: 1 });
      const { account, usage } = await w.store.transaction((r) => w.keys.lockAccountWithUsage(r.accounts, key));
      assert.deepEqual(account, {
        id: owner.account.id,
        billingModel: 'ACCOUNT_BALANCE',
        balanceMinor: 0,
        frozen: false,
      });
      assert.deepEqual(usage, { netSpentMinor: 100, remainingBudgetMinor: 4900, activeDeployments: 1 });
    });

    it('refuses a key revoked since authentication (401), and one whose account is not its own (404)', async () => {
      const { key } = await agentKey();
      const moved = Object.assign(Object.create(Object.getPrototypeOf(key) as object) as ApiKey, key, {
        accountId: randomUUID(),
      });
      const notFound = await refusal(w.store.transaction((r) => w.keys.lockAccountWithUsage(r.accounts, moved)));
      assert.equal(notFound.code, 'NOT_FOUND');
      await w.keys.revoke(owner.account.id, key.id);
      const revoked = await refusal(w.store.transaction((r) => w.keys.lockAccountWithUsage(r.accounts, key)));
      assert.equal(revoked.code, 'UNAUTHENTICATED');
    });

    it('lets a live acting key act, and refuses a revoked or foreign one with the uniform 401', async () => {
      const { key } = await agentKey();
      await w.store.transaction((r) => w.keys.lockActingKey(r.accounts, owner.account.id, key.id));
      const stranger = await refusal(
        w.store.transaction((r) => w.keys.lockActingKey(r.accounts, randomUUID(), key.id)),
      );
      assert.equal(stranger.code, 'UNAUTHENTICATED');
      await w.keys.revoke(owner.account.id, key.id);
      const revoked = await refusal(
        w.store.transaction((r) => w.keys.lockActingKey(r.accounts, owner.account.id, key.id)),
      );
      assert.equal(revoked.code, 'UNAUTHENTICATED');
    });
  });

  describe('revoke', () => {
    it("revokes a key of the account (twice is fine) and refuses another account's with 404", async () => {
      const { key } = await agentKey();
      await w.keys.revoke(owner.account.id, key.id);
      const first = stored(key.id).revokedAt;
      assert.deepEqual(first, w.clock.now());
      w.clock.advance(5000);
      await w.keys.revoke(owner.account.id, key.id);
      assert.deepEqual(stored(key.id).revokedAt, first);
      const other = await ownerOf(w);
      assert.equal((await refusal(w.keys.revoke(other.account.id, key.id))).code, 'NOT_FOUND');
      assert.equal((await refusal(w.keys.revoke(owner.account.id, randomUUID()))).code, 'NOT_FOUND');
    });

    it('makes each key with its own prefix and a token that exists only in the answer', async () => {
      const a = await agentKey();
      const b = await agentKey();
      assert.notEqual(a.key.prefix, b.key.prefix);
      assert.ok(a.token.startsWith(`gpr_${a.key.prefix}.`));
      assert.ok(!JSON.stringify(w.store.tables.table('api_keys').all()).includes(a.token.split('.')[1]));
    });
  });
});
