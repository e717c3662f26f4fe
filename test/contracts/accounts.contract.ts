import assert from 'node:assert/strict';
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import type { AccountsRepository } from '../../src/modules/accounts/accounts.repository.js';
import { AgentAuthorization } from '../../src/modules/agents/agent-authorization.entity.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import type { KeyCounterRow } from '../../src/modules/keys/keys.repository.js';

export type AccountsStore = Store<{ accounts: AccountsRepository }>;

/** A store, and what other aggregates write on the accounts' rows (no repository of this one moves them). */
export interface AccountsFixture {
  store: AccountsStore;
  /** Sets an account's balance and unposted usage, as the ledger and metering move them. */
  setMoney(accountId: string, balanceMinor: number, unpostedUsageMinor: number): Promise<void>;
  /** Sets a key's counters, as the ledger and the rental states move them. */
  setKeyCounters(keyId: string, counters: KeyCounterRow): Promise<void>;
  /** Puts the money set above back to zero (the MariaDB run checks the ledger's invariants after each test). */
  reset(): Promise<void>;
}

const T0 = new Date('2026-05-01T12:00:00.125Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

export function newAccount(o: Partial<Account> = {}): Account {
  return Object.assign(new Account(), {
    id: randomUUID(),
    billingModel: 'ACCOUNT_BALANCE',
    balanceMinor: 0,
    unpostedUsageMinor: 0,
    frozen: false,
    email: null,
    telegramUserId: null,
    telegramChatId: null,
    createdAt: T0,
    ...o,
  });
}

export function newKey(accountId: string, o: Partial<ApiKey> = {}): ApiKey {
  return Object.assign(new ApiKey(), {
    id: randomUUID(),
    accountId,
    kind: 'AGENT',
    name: 'contract key',
    prefix: randomBytes(4).toString('hex'),
    secretHash: randomBytes(32),
    scopes: ['read', 'rent'],
    maxPerRentalMinor: 500,
    budgetLimitMinor: 5000,
    maxConcurrentDeployments: 2,
    isAdmin: false,
    origin: 'contract',
    issuedByKeyId: null,
    createdAt: T0,
    revokedAt: null,
    lastUsedAt: null,
    maxRentalSeconds: null,
    idleTerminateMinutes: null,
    ...o,
  });
}

export function newAuthorization(o: Partial<AgentAuthorization> = {}): AgentAuthorization {
  return Object.assign(new AgentAuthorization(), {
    id: randomUUID(),
    origin: 'SESSION',
    status: 'PENDING',
    setupCodeHash: randomBytes(32),
    approvalCodeHash: randomBytes(32),
    accountId: null,
    approvedByKeyId: null,
    name: null,
    requestedName: 'helper',
    maxPerRentalMinor: null,
    budgetLimitMinor: null,
    maxConcurrentDeployments: null,
    maxRentalSeconds: null,
    idleTerminateMinutes: null,
    issuedKeyId: null,
    expiresAt: at(600),
    approvedAt: null,
    exchangedAt: null,
    createdAt: T0,
    oauthInteractionUid: null,
    ...o,
  });
}

/** `row` with `patch` applied, of the same class (an entity read back is compared with one). */
const changed = <T extends object>(row: T, patch: Partial<T>): T =>
  Object.assign(Object.create(Object.getPrototypeOf(row) as object) as T, row, patch);
const telegramUser = () => randomInt(1, 2 ** 47);
const sorted = (ids: string[]) => [...ids].sort();

/**
 * What every store's accounts repository does, run on MariaDB (test/store/) and on the memory
 * store (test/unit/): the unit tier's services stand on the same behaviour as production's.
 */
export function accountsContract(kind: string, makeFixture: () => Promise<AccountsFixture>): void {
  describe(`accounts repository (${kind})`, () => {
    let fx: AccountsFixture;
    let store: AccountsStore;
    before(async () => {
      fx = await makeFixture();
      store = fx.store;
    });
    afterEach(() => fx.reset());

    const account = async (o: Partial<Account> = {}) => {
      const a = newAccount(o);
      await store.transaction((r) => r.accounts.insert(a));
      return a;
    };
    const key = async (accountId: string, o: Partial<ApiKey> = {}) => {
      const k = newKey(accountId, o);
      await store.transaction((r) => r.accounts.keys.insert(k));
      return k;
    };

    describe('accounts', () => {
      it('writes an account and reads it back whole, by id', async () => {
        const a = await account({ email: 'ada@example.com', frozen: true, billingModel: 'LEGACY_PREPAID' });
        assert.deepEqual(await store.read((r) => r.accounts.find(a.id)), a);
        assert.deepEqual(await store.read((r) => r.accounts.get(a.id)), a);
        assert.equal(await store.read((r) => r.accounts.find(randomUUID())), null);
        await assert.rejects(store.read((r) => r.accounts.get(randomUUID())));
      });

      it('binds a Telegram user to one account: a second is refused with ER_DUP_ENTRY and not written', async () => {
        const user = telegramUser();
        const a = await account({ telegramUserId: user, telegramChatId: 7 });
        const b = newAccount({ telegramUserId: user });
        await assert.rejects(
          store.transaction((r) => r.accounts.insert(b)),
          (e: { code?: string }) => e.code === 'ER_DUP_ENTRY',
        );
        assert.equal(await store.read((r) => r.accounts.find(b.id)), null);
        assert.equal((await store.read((r) => r.accounts.ofTelegramUser(user)))?.id, a.id);
        assert.equal(await store.read((r) => r.accounts.ofTelegramUser(telegramUser())), null);
      });

      it('sets the Telegram chat and the e-mail of one account only', async () => {
        const a = await account({ telegramUserId: telegramUser(), telegramChatId: 1 });
        const b = await account({ telegramChatId: 2 });
        await store.read((r) => r.accounts.setTelegramChat(a.id, 99));
        await store.read((r) => r.accounts.setEmail(a.id, 'new@example.com'));
        const after = await store.read((r) => r.accounts.get(a.id));
        assert.equal(after.telegramChatId, 99);
        assert.equal(after.email, 'new@example.com');
        const other = await store.read((r) => r.accounts.get(b.id));
        assert.equal(other.telegramChatId, 2);
        assert.equal(other.email, null);
      });

      it('locks an account and reads it whole; null for none', async () => {
        const a = await account();
        await fx.setMoney(a.id, 1234, 34);
        const locked = await store.transaction((r) => r.accounts.lockAccount(a.id));
        assert.deepEqual(locked, changed(a, { balanceMinor: 1234, unpostedUsageMinor: 34 }));
        assert.equal(await store.transaction((r) => r.accounts.lockAccount(randomUUID())), null);
      });

      it('locks balances of the accounts given in id order, as numbers, leaving out the ones that do not exist', async () => {
        const [a, b] = [await account(), await account()];
        await fx.setMoney(a.id, 500, 20);
        await fx.setMoney(b.id, -30, 0);
        const missing = randomUUID();
        const money = await store.transaction((r) => r.accounts.lockAccountBalances([b.id, missing, a.id, b.id]));
        assert.deepEqual([...money.keys()], sorted([a.id, b.id]));
        assert.deepEqual(money.get(a.id), { balanceMinor: 500, unpostedUsageMinor: 20 });
        assert.deepEqual(money.get(b.id), { balanceMinor: -30, unpostedUsageMinor: 0 });
      });
    });

    describe('the cached money figures', () => {
      it("sets balances and unposted usage, one account or many at once, and adds to keys' net spend", async () => {
        const [a, b, c] = [await account(), await account(), await account()];
        for (const x of [a, b, c]) await fx.setMoney(x.id, 0, 0);
        const [k1, k2] = [await key(a.id), await key(b.id)];
        for (const k of [k1, k2]) await fx.setKeyCounters(k.id, { netSpentMinor: 100, activeDeployments: 0 });
        await store.transaction(async (r) => {
          await r.accounts.money.setBalance(a.id, 250);
          await r.accounts.money.setBalances(
            new Map([
              [b.id, { balanceMinor: -40, unpostedUsageMinor: 7 }],
              [c.id, { balanceMinor: 9, unpostedUsageMinor: 0 }],
            ]),
          );
          await r.accounts.money.setBalances(new Map());
          await r.accounts.money.addKeySpend(k1.id, -30);
          await r.accounts.money.addKeySpends(
            new Map([
              [k1.id, 5],
              [k2.id, 50],
            ]),
          );
          await r.accounts.money.addKeySpends(new Map());
        });
        const money = await store.transaction((r) => r.accounts.lockAccountBalances([a.id, b.id, c.id]));
        assert.deepEqual(money.get(a.id), { balanceMinor: 250, unpostedUsageMinor: 0 });
        assert.deepEqual(money.get(b.id), { balanceMinor: -40, unpostedUsageMinor: 7 });
        assert.deepEqual(money.get(c.id), { balanceMinor: 9, unpostedUsageMinor: 0 });
        const counters = await store.read((r) => r.accounts.keys.counters([k1.id, k2.id]));
        assert.deepEqual(counters.get(k1.id), { netSpentMinor: 75, activeDeployments: 0 });
        assert.deepEqual(counters.get(k2.id), { netSpentMinor: 150, activeDeployments: 0 });
      });
    });

    describe('the account and key locks', () => {
      it("reads what admission needs of the account and the key's counters, as numbers", async () => {
        const a = await account({ billingModel: 'LEGACY_PREPAID' });
        await fx.setMoney(a.id, 900, 0);
        const k = await key(a.id);
        await fx.setKeyCounters(k.id, { netSpentMinor: 250, activeDeployments: 1 });
        const row = await store.transaction((r) => r.accounts.lockAccountWithKey(a.id, k.id));
        assert.deepEqual(row, {
          account: { id: a.id, billingModel: 'LEGACY_PREPAID', balanceMinor: 900, frozen: false },
          netSpentMinor: 250,
          activeDeployments: 1,
          revokedAt: null,
        });
      });

      it('answers nothing for a key of another account, or an unknown one', async () => {
        const [a, b] = [await account(), await account()];
        const kb = await key(b.id);
        const none = await store.transaction(async (r) => [
          await r.accounts.lockAccountWithKey(a.id, kb.id),
          await r.accounts.lockAccountWithKey(a.id, randomUUID()),
          await r.accounts.lockAccountAndKey(a.id, kb.id),
          await r.accounts.lockAccountAndKeyKind(a.id, kb.id),
          await r.accounts.lockAccountAndKeyKind(randomUUID(), kb.id),
        ]);
        assert.deepEqual(none, [null, null, undefined, undefined, undefined]);
      });

      it("reads the key's revocation and kind under the lock", async () => {
        const a = await account();
        const owner = await key(a.id, { kind: 'OWNER' });
        const agent = await key(a.id, { revokedAt: at(5) });
        const [revocation, kindOf, agentKind, withKey] = await store.transaction(async (r) => [
          await r.accounts.lockAccountAndKey(a.id, agent.id),
          await r.accounts.lockAccountAndKeyKind(a.id, owner.id),
          await r.accounts.lockAccountAndKeyKind(a.id, agent.id),
          await r.accounts.lockAccountWithKey(a.id, agent.id),
        ]);
        assert.deepEqual(revocation, { revokedAt: at(5) });
        assert.deepEqual(kindOf, { kind: 'OWNER', revokedAt: null });
        assert.deepEqual(agentKind, { kind: 'AGENT', revokedAt: at(5) });
        assert.deepEqual(withKey?.revokedAt, at(5));
      });
    });

    describe('keys', () => {
      it('writes a key and finds it by prefix, whole, revoked or not', async () => {
        const a = await account();
        const k = await key(a.id, {
          scopes: ['read', 'rent', 'manage', 'billing'],
          isAdmin: true,
          maxRentalSeconds: 3600,
        });
        const found = await store.read((r) => r.accounts.keys.byPrefix(k.prefix));
        assert.deepEqual(found, k);
        assert.ok(Buffer.isBuffer(found?.secretHash));
        await store.transaction((r) => r.accounts.keys.markRevoked(k.id, at(1)));
        assert.deepEqual((await store.read((r) => r.accounts.keys.byPrefix(k.prefix)))?.revokedAt, at(1));
        assert.equal(await store.read((r) => r.accounts.keys.byPrefix('nokey000')), null);
      });

      it('refuses a prefix already taken with ER_DUP_ENTRY', async () => {
        const a = await account();
        const k = await key(a.id);
        const twin = newKey(a.id, { prefix: k.prefix });
        await assert.rejects(
          store.transaction((r) => r.accounts.keys.insert(twin)),
          (e: { code?: string }) => e.code === 'ER_DUP_ENTRY',
        );
        await assert.rejects(store.read((r) => r.accounts.keys.get(twin.id)));
      });

      it("stamps a key's last use, and only that key's", async () => {
        const a = await account();
        const [k, other] = [await key(a.id), await key(a.id)];
        await store.read((r) => r.accounts.keys.touch(k.id, at(30)));
        assert.deepEqual((await store.read((r) => r.accounts.keys.get(k.id))).lastUsedAt, at(30));
        assert.equal((await store.read((r) => r.accounts.keys.get(other.id))).lastUsedAt, null);
      });

      it('reads the counters of the keys given as numbers, leaving out unknown keys', async () => {
        const a = await account();
        const [k, fresh] = [await key(a.id), await key(a.id)];
        await fx.setKeyCounters(k.id, { netSpentMinor: 4321, activeDeployments: 3 });
        const counters = await store.read((r) => r.accounts.keys.counters([k.id, fresh.id, randomUUID()]));
        assert.equal(counters.size, 2);
        assert.deepEqual(counters.get(k.id), { netSpentMinor: 4321, activeDeployments: 3 });
        assert.deepEqual(counters.get(fresh.id), { netSpentMinor: 0, activeDeployments: 0 });
        assert.equal((await store.read((r) => r.accounts.keys.counters([]))).size, 0);
      });

      it("moves a key's count of rentals holding a slot by a delta in a transaction, writing nothing for 0", async () => {
        const a = await account();
        const [k, other] = [await key(a.id), await key(a.id)];
        await fx.setKeyCounters(k.id, { netSpentMinor: 0, activeDeployments: 1 });
        await fx.setKeyCounters(other.id, { netSpentMinor: 0, activeDeployments: 0 });
        await store.transaction((r) => r.accounts.keys.adjustActiveDeployments(k.id, 2));
        await store.transaction((r) => r.accounts.keys.adjustActiveDeployments(k.id, -1));
        await store.transaction((r) => r.accounts.keys.adjustActiveDeployments(k.id, 0));
        const counters = await store.read((r) => r.accounts.keys.counters([k.id, other.id]));
        assert.deepEqual(counters.get(k.id), { netSpentMinor: 0, activeDeployments: 2 });
        assert.deepEqual(counters.get(other.id), { netSpentMinor: 0, activeDeployments: 0 });
      });

      it('revokes a key of the account once: a repeat keeps the first time; another account cannot', async () => {
        const [a, b] = [await account(), await account()];
        const k = await key(a.id);
        assert.equal(await store.read((r) => r.accounts.keys.revoke(b.id, k.id, at(1))), false);
        assert.equal((await store.read((r) => r.accounts.keys.get(k.id))).revokedAt, null);
        assert.equal(await store.read((r) => r.accounts.keys.revoke(a.id, k.id, at(2))), true);
        assert.equal(await store.read((r) => r.accounts.keys.revoke(a.id, k.id, at(3))), true);
        assert.deepEqual((await store.read((r) => r.accounts.keys.get(k.id))).revokedAt, at(2));
        assert.equal(await store.read((r) => r.accounts.keys.revoke(a.id, randomUUID(), at(4))), false);
      });

      it("lists an account's keys of one kind, newest first, revoked ones included", async () => {
        const [a, b] = [await account(), await account()];
        const old = await key(a.id, { createdAt: at(1), revokedAt: at(2) });
        const newest = await key(a.id, { createdAt: at(3) });
        const owner = await key(a.id, { kind: 'OWNER', createdAt: at(2) });
        await key(b.id, { createdAt: at(4) });
        const agents = await store.read((r) => r.accounts.keys.ofAccount(a.id, 'AGENT'));
        assert.deepEqual(
          agents.map((k) => k.id),
          [newest.id, old.id],
        );
        assert.deepEqual(await store.read((r) => r.accounts.keys.ofAccount(a.id, 'OWNER')), [owner]);
        assert.deepEqual(await store.read((r) => r.accounts.keys.ofAccount(randomUUID(), 'AGENT')), []);
      });

      it('finds an agent key only on its account, and an owner key only as an owner key', async () => {
        const [a, b] = [await account(), await account()];
        const agent = await key(a.id);
        const owner = await key(a.id, { kind: 'OWNER' });
        assert.deepEqual(await store.read((r) => r.accounts.keys.agentKeyOfAccount(a.id, agent.id)), agent);
        assert.equal(await store.read((r) => r.accounts.keys.agentKeyOfAccount(b.id, agent.id)), null);
        assert.equal(await store.read((r) => r.accounts.keys.agentKeyOfAccount(a.id, owner.id)), null);
        assert.deepEqual(await store.read((r) => r.accounts.keys.ownerKey(owner.id)), owner);
        assert.equal(await store.read((r) => r.accounts.keys.ownerKey(agent.id)), null);
      });

      it('revokes many keys at once, and none for an empty list', async () => {
        const a = await account();
        const [k1, k2, k3] = [await key(a.id), await key(a.id), await key(a.id)];
        await store.transaction(async (r) => {
          await r.accounts.keys.markManyRevoked([], at(1));
          await r.accounts.keys.markManyRevoked([k1.id, k2.id], at(2));
        });
        const revoked = await store.read((r) => r.accounts.keys.revokedAmong([k1.id, k2.id, k3.id, randomUUID()]));
        assert.deepEqual(sorted(revoked), sorted([k1.id, k2.id]));
        assert.deepEqual(await store.read((r) => r.accounts.keys.revokedAmong([])), []);
      });

      it('finds the keys an owner key issued, all of them and the live ones under a lock', async () => {
        const a = await account();
        const owner = await key(a.id, { kind: 'OWNER' });
        const live = await key(a.id, { issuedByKeyId: owner.id });
        const gone = await key(a.id, { issuedByKeyId: owner.id, revokedAt: at(1) });
        await key(a.id);
        const [locked, all] = await store.transaction(async (r) => [
          await r.accounts.keys.lockLiveIssuedBy(owner.id),
          await r.accounts.keys.issuedBy(owner.id),
        ]);
        assert.deepEqual(locked, [live.id]);
        assert.deepEqual(sorted(all), sorted([live.id, gone.id]));
        assert.deepEqual(await store.read((r) => r.accounts.keys.issuedBy(randomUUID())), []);
      });

      it('tells whether a key is revoked now; a key that does not exist counts as revoked', async () => {
        const a = await account();
        const k = await key(a.id);
        assert.equal(await store.read((r) => r.accounts.keys.isRevoked(k.id)), false);
        await store.transaction((r) => r.accounts.keys.markRevoked(k.id, at(1)));
        assert.equal(await store.read((r) => r.accounts.keys.isRevoked(k.id)), true);
        assert.equal(await store.read((r) => r.accounts.keys.isRevoked(randomUUID())), true);
      });
    });

    describe('agent authorizations', () => {
      it('writes a session and reads it back by approval code; an omitted requested name reads as null', async () => {
        const row = newAuthorization();
        await store.read((r) => r.accounts.authorizations.insert(row));
        assert.deepEqual(await store.read((r) => r.accounts.authorizations.byApprovalCode(row.approvalCodeHash!)), row);
        const a = await account();
        const { requestedName: _omitted, ...minted } = newAuthorization({
          origin: 'TELEGRAM',
          status: 'APPROVED',
          approvalCodeHash: null,
          accountId: a.id,
        });
        await store.read((r) => r.accounts.authorizations.insert(minted));
        const read = await store.transaction((r) => r.accounts.authorizations.lockBySetupCode(minted.setupCodeHash));
        assert.equal(read?.id, minted.id);
        assert.equal(read?.requestedName, null);
        assert.equal(read?.approvalCodeHash, null);
        assert.equal(await store.read((r) => r.accounts.authorizations.byApprovalCode(randomBytes(32))), null);
      });

      it('refuses a setup code or an approval code already taken with ER_DUP_ENTRY', async () => {
        const row = newAuthorization();
        await store.read((r) => r.accounts.authorizations.insert(row));
        for (const twin of [
          newAuthorization({ setupCodeHash: row.setupCodeHash }),
          newAuthorization({ approvalCodeHash: row.approvalCodeHash }),
        ]) {
          await assert.rejects(
            store.read((r) => r.accounts.authorizations.insert(twin)),
            (e: { code?: string }) => e.code === 'ER_DUP_ENTRY',
          );
          // Each code of the twin finds nothing, or the row that holds it: the twin was not written.
          const bySetup = await store.transaction((r) => r.accounts.authorizations.lockBySetupCode(twin.setupCodeHash));
          const byApproval = await store.read((r) => r.accounts.authorizations.byApprovalCode(twin.approvalCodeHash!));
          assert.deepEqual([bySetup?.id ?? null, byApproval?.id ?? null].sort(), [null, row.id].sort());
        }
      });

      it('locks by either code; an unknown code is null', async () => {
        const row = newAuthorization();
        await store.read((r) => r.accounts.authorizations.insert(row));
        const [byApproval, bySetup, none] = await store.transaction(async (r) => [
          await r.accounts.authorizations.lockByApprovalCode(row.approvalCodeHash!),
          await r.accounts.authorizations.lockBySetupCode(row.setupCodeHash),
          await r.accounts.authorizations.lockBySetupCode(randomBytes(32)),
        ]);
        assert.deepEqual(byApproval, row);
        assert.deepEqual(bySetup, row);
        assert.equal(none, null);
      });

      it('records an approval, then the exchange', async () => {
        const a = await account();
        const owner = await key(a.id, { kind: 'OWNER' });
        const row = newAuthorization();
        await store.read((r) => r.accounts.authorizations.insert(row));
        const approval = {
          accountId: a.id,
          approvedByKeyId: owner.id,
          name: 'approved agent',
          maxPerRentalMinor: 100,
          budgetLimitMinor: 1000,
          maxConcurrentDeployments: 1,
          maxRentalSeconds: 7200,
          idleTerminateMinutes: 30,
          approvedAt: at(10),
        };
        await store.transaction((r) => r.accounts.authorizations.markApproved(row.id, approval));
        const approved = await store.read((r) => r.accounts.authorizations.byApprovalCode(row.approvalCodeHash!));
        assert.deepEqual(approved, changed(row, { ...approval, status: 'APPROVED' }));
        const issued = await key(a.id);
        await store.transaction((r) => r.accounts.authorizations.markExchanged(row.id, issued.id, at(20)));
        const exchanged = await store.read((r) => r.accounts.authorizations.byApprovalCode(row.approvalCodeHash!));
        assert.equal(exchanged?.status, 'EXCHANGED');
        assert.equal(exchanged?.issuedKeyId, issued.id);
        assert.deepEqual(exchanged?.exchangedAt, at(20));
      });

      it('locks what an owner key approved and nobody exchanged yet, and revokes them', async () => {
        const a = await account();
        const owner = await key(a.id, { kind: 'OWNER' });
        const approved = newAuthorization({ status: 'APPROVED', accountId: a.id, approvedByKeyId: owner.id });
        const minted = newAuthorization({ status: 'APPROVED', approvalCodeHash: null, approvedByKeyId: owner.id });
        const exchanged = newAuthorization({ status: 'EXCHANGED', approvedByKeyId: owner.id });
        const others = newAuthorization({ status: 'APPROVED', approvedByKeyId: randomUUID() });
        for (const row of [approved, minted, exchanged, others])
          await store.read((r) => r.accounts.authorizations.insert(row));
        const ids = await store.transaction(async (r) => {
          const found = await r.accounts.authorizations.lockUnexchangedApprovalsOf(owner.id);
          await r.accounts.authorizations.markRevoked(found);
          await r.accounts.authorizations.markRevoked([]);
          return found;
        });
        assert.deepEqual(sorted(ids), sorted([approved.id, minted.id]));
        const status = async (row: AgentAuthorization) =>
          (await store.transaction((r) => r.accounts.authorizations.lockBySetupCode(row.setupCodeHash)))?.status;
        assert.deepEqual(
          [await status(approved), await status(minted), await status(exchanged), await status(others)],
          ['REVOKED', 'REVOKED', 'EXCHANGED', 'APPROVED'],
        );
        assert.deepEqual(
          await store.transaction((r) => r.accounts.authorizations.lockUnexchangedApprovalsOf(owner.id)),
          [],
        );
      });
    });

    describe('transactions', () => {
      it('leaves nothing of a transaction that throws or rolls back', async () => {
        const a = newAccount();
        const k = newKey(a.id);
        await assert.rejects(
          store.transaction(async (r) => {
            await r.accounts.insert(a);
            await r.accounts.keys.insert(k);
            throw new Error('after the writes');
          }),
          /after the writes/,
        );
        const b = newAccount();
        const answer = await store.transaction(async (r, tx) => {
          await r.accounts.insert(b);
          tx.rollBackAtEnd();
          return (await r.accounts.find(b.id))?.id;
        });
        assert.equal(answer, b.id);
        assert.equal(await store.read((r) => r.accounts.find(a.id)), null);
        assert.equal(await store.read((r) => r.accounts.keys.byPrefix(k.prefix)), null);
        assert.equal(await store.read((r) => r.accounts.find(b.id)), null);
      });

      it('sees its own writes before it commits', async () => {
        const a = newAccount();
        const k = newKey(a.id, { kind: 'OWNER' });
        const seen = await store.transaction(async (r) => {
          await r.accounts.insert(a);
          await r.accounts.keys.insert(k);
          return [await r.accounts.lockAccountAndKeyKind(a.id, k.id), (await r.accounts.keys.get(k.id)).id];
        });
        assert.deepEqual(seen, [{ kind: 'OWNER', revokedAt: null }, k.id]);
      });
    });
  });
}
