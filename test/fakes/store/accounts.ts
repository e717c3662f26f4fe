import { Account } from '../../../src/modules/accounts/account.entity.js';
import type {
  AccountMoney,
  AccountsRepository,
  AccountWithKeyRow,
  KeyLabel,
} from '../../../src/modules/accounts/accounts.repository.js';
import { AgentAuthorization } from '../../../src/modules/agents/agent-authorization.entity.js';
import type {
  AgentAuthorizationsRepository,
  Approval,
  NewAuthorization,
} from '../../../src/modules/agents/agent-authorizations.repository.js';
import { ApiKey, type KeyKind } from '../../../src/modules/keys/api-key.entity.js';
import type { KeyCounterRow, KeysRepository } from '../../../src/modules/keys/keys.repository.js';
import type { AccountMoneyRepository } from '../../../src/modules/accounts/account-money.repository.js';
import type { MemoryTables } from './memory-store.js';

/*
 * The accounts aggregate in memory: `accounts`, `api_keys` and `agent_authorizations` keyed by id,
 * with the unique keys the SQL has (an account's Telegram user, a key's prefix, an authorization's
 * codes) refused as the server refuses them. Transactions of the memory store run one at a time,
 * so a lock is a plain read; the lock's `lock_version` write has nothing to guard here.
 */

/** A key row as stored: the entity and the counters the ledger and the rental states move. */
export type MemoryKeyRow = ApiKey & KeyCounterRow;

/** The refusal of a unique key, with the code the services test for. */
export class DuplicateEntry extends Error {
  readonly code = 'ER_DUP_ENTRY';
  constructor(what: string) {
    super(`Duplicate entry for ${what} (memory store)`);
  }
}

/** Binary columns leave the memory store as Uint8Array copies: they are Buffers again on the way out. */
const buffer = (v: Uint8Array | null): Buffer | null => (v === null ? null : Buffer.from(v));
const sameBytes = (a: Uint8Array | null, b: Uint8Array) => a !== null && Buffer.from(a).equals(b);

const keysOf = (tables: MemoryTables) => tables.table<MemoryKeyRow>('api_keys');

/** Sets a key's counters, as the ledger and the rental states move them (tests of readers set them here). */
export function setKeyCounters(tables: MemoryTables, keyId: string, counters: Partial<KeyCounterRow>): void {
  if (!keysOf(tables).update(keyId, counters)) throw new Error(`no key ${keyId}`);
}

function toKey(row: MemoryKeyRow): ApiKey {
  const { netSpentMinor: _n, activeDeployments: _a, ...key } = row;
  return Object.assign(new ApiKey(), key, { secretHash: buffer(key.secretHash) });
}

export class MemoryKeysRepository implements KeysRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return keysOf(this.tables);
  }

  async insert(key: ApiKey): Promise<void> {
    if (this.rows.has(key.id)) throw new DuplicateEntry(`api_keys.PRIMARY ${key.id}`);
    if (this.rows.first((r) => r.prefix === key.prefix)) throw new DuplicateEntry(`uq_api_keys_prefix ${key.prefix}`);
    this.rows.insert(key.id, Object.assign(toKey(key as MemoryKeyRow), { netSpentMinor: 0, activeDeployments: 0 }));
  }

  async byPrefix(prefix: string): Promise<ApiKey | null> {
    const row = this.rows.first((r) => r.prefix === prefix);
    return row ? toKey(row) : null;
  }

  async touch(id: string, at: Date): Promise<void> {
    this.rows.update(id, { lastUsedAt: at });
  }

  async counters(ids: readonly string[]): Promise<Map<string, KeyCounterRow>> {
    const out = new Map<string, KeyCounterRow>();
    for (const id of ids) {
      const row = this.rows.get(id);
      if (row) out.set(id, { netSpentMinor: row.netSpentMinor, activeDeployments: row.activeDeployments });
    }
    return out;
  }

  async revoke(accountId: string, keyId: string, at: Date): Promise<boolean> {
    const row = this.rows.get(keyId);
    if (!row || row.accountId !== accountId) return false;
    if (row.revokedAt === null) this.rows.update(keyId, { revokedAt: at });
    return true;
  }

  async get(id: string): Promise<ApiKey> {
    const row = this.rows.get(id);
    if (!row) throw new Error(`Could not find any entity of type "ApiKey" matching id ${id} (memory store)`);
    return toKey(row);
  }

  async ofAccount(accountId: string, kind: KeyKind): Promise<ApiKey[]> {
    return this.rows
      .where((r) => r.accountId === accountId && r.kind === kind)
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())
      .map(toKey);
  }

  async agentKeyOfAccount(accountId: string, id: string): Promise<ApiKey | null> {
    const row = this.rows.get(id);
    return row && row.accountId === accountId && row.kind === 'AGENT' ? toKey(row) : null;
  }

  async ownerKey(id: string): Promise<ApiKey | null> {
    const row = this.rows.get(id);
    return row && row.kind === 'OWNER' ? toKey(row) : null;
  }

  async markRevoked(id: string, at: Date): Promise<void> {
    this.rows.update(id, { revokedAt: at });
  }

  async markManyRevoked(ids: readonly string[], at: Date): Promise<void> {
    for (const id of ids) this.rows.update(id, { revokedAt: at });
  }

  async lockLiveIssuedBy(keyId: string): Promise<string[]> {
    return this.rows.keysWhere((r) => r.issuedByKeyId === keyId && r.revokedAt === null);
  }

  async issuedBy(keyId: string): Promise<string[]> {
    return this.rows.keysWhere((r) => r.issuedByKeyId === keyId);
  }

  async isRevoked(id: string): Promise<boolean> {
    const row = this.rows.get(id);
    return !row || row.revokedAt !== null;
  }

  async revokedAmong(ids: readonly string[]): Promise<string[]> {
    const wanted = new Set(ids);
    return this.rows.keysWhere((r) => wanted.has(r.id) && r.revokedAt !== null);
  }

  async adjustActiveDeployments(keyId: string, delta: number): Promise<void> {
    const row = this.rows.get(keyId);
    if (row && delta !== 0) this.rows.update(keyId, { activeDeployments: row.activeDeployments + delta });
  }
}

function toAuthorization(row: AgentAuthorization): AgentAuthorization {
  return Object.assign(new AgentAuthorization(), row, {
    setupCodeHash: buffer(row.setupCodeHash),
    approvalCodeHash: buffer(row.approvalCodeHash),
  });
}

export class MemoryAgentAuthorizationsRepository implements AgentAuthorizationsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<AgentAuthorization>('agent_authorizations');
  }

  async insert(fields: NewAuthorization): Promise<AgentAuthorization> {
    const row = Object.assign(new AgentAuthorization(), fields);
    if (this.rows.has(row.id)) throw new DuplicateEntry(`agent_authorizations.PRIMARY ${row.id}`);
    if (this.rows.first((r) => sameBytes(r.setupCodeHash, row.setupCodeHash)))
      throw new DuplicateEntry('uq_agent_auth_setup');
    const uid = row.oauthInteractionUid ?? null;
    if (uid !== null && this.rows.first((r) => r.oauthInteractionUid === uid))
      throw new DuplicateEntry('agent_authorizations_oauth_interaction');
    const approval = row.approvalCodeHash;
    if (approval !== null && this.rows.first((r) => sameBytes(r.approvalCodeHash, approval)))
      throw new DuplicateEntry('uq_agent_auth_approval');
    // The column's default, as the server fills it.
    this.rows.insert(
      row.id,
      Object.assign(new AgentAuthorization(), row, {
        requestedName: row.requestedName ?? null,
        oauthInteractionUid: row.oauthInteractionUid ?? null,
      }),
    );
    return row;
  }

  async byApprovalCode(approvalCodeHash: Buffer): Promise<AgentAuthorization | null> {
    const row = this.rows.first((r) => sameBytes(r.approvalCodeHash, approvalCodeHash));
    return row ? toAuthorization(row) : null;
  }

  lockByApprovalCode(approvalCodeHash: Buffer): Promise<AgentAuthorization | null> {
    return this.byApprovalCode(approvalCodeHash);
  }

  async lockBySetupCode(setupCodeHash: Buffer): Promise<AgentAuthorization | null> {
    const row = this.rows.first((r) => sameBytes(r.setupCodeHash, setupCodeHash));
    return row ? toAuthorization(row) : null;
  }

  async byOAuthInteraction(uid: string): Promise<AgentAuthorization | null> {
    const row = this.rows.first((r) => r.oauthInteractionUid === uid);
    return row ? toAuthorization(row) : null;
  }

  lockByOAuthInteraction(uid: string): Promise<AgentAuthorization | null> {
    return this.byOAuthInteraction(uid);
  }

  async markApproved(id: string, approval: Approval): Promise<void> {
    this.rows.update(id, { status: 'APPROVED', ...approval });
  }

  async markExchanged(id: string, issuedKeyId: string, at: Date): Promise<void> {
    this.rows.update(id, { status: 'EXCHANGED', exchangedAt: at, issuedKeyId });
  }

  async lockUnexchangedApprovalsOf(keyId: string): Promise<string[]> {
    return this.rows.keysWhere((r) => r.approvedByKeyId === keyId && r.status === 'APPROVED');
  }

  async markRevoked(ids: readonly string[]): Promise<void> {
    for (const id of ids) this.rows.update(id, { status: 'REVOKED' });
  }
}

/** The cached balances and key spend of the accounts' and keys' rows, as the ledger's postings move them. */
export class MemoryAccountMoneyRepository implements AccountMoneyRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get accounts() {
    return this.tables.table<Account>('accounts');
  }

  async setBalance(accountId: string, balanceMinor: number): Promise<void> {
    this.accounts.update(accountId, { balanceMinor });
  }

  async setBalances(money: ReadonlyMap<string, { balanceMinor: number; unpostedUsageMinor: number }>): Promise<void> {
    for (const [id, m] of money)
      this.accounts.update(id, { balanceMinor: m.balanceMinor, unpostedUsageMinor: m.unpostedUsageMinor });
  }

  async addKeySpend(keyId: string, spentMinor: number): Promise<void> {
    const key = keysOf(this.tables).get(keyId);
    if (key) keysOf(this.tables).update(keyId, { netSpentMinor: key.netSpentMinor + spentMinor });
  }

  async addKeySpends(spentByKey: ReadonlyMap<string, number>): Promise<void> {
    for (const [keyId, spent] of spentByKey) await this.addKeySpend(keyId, spent);
  }
}

export class MemoryAccountsRepository implements AccountsRepository {
  constructor(private readonly tables: MemoryTables) {}

  get keys(): KeysRepository {
    return new MemoryKeysRepository(this.tables);
  }

  get authorizations(): AgentAuthorizationsRepository {
    return new MemoryAgentAuthorizationsRepository(this.tables);
  }

  get money(): AccountMoneyRepository {
    return new MemoryAccountMoneyRepository(this.tables);
  }

  private get rows() {
    return this.tables.table<Account>('accounts');
  }

  async find(id: string): Promise<Account | null> {
    return this.rows.get(id) ?? null;
  }

  async get(id: string): Promise<Account> {
    const row = this.rows.get(id);
    if (!row) throw new Error(`Could not find any entity of type "Account" matching id ${id} (memory store)`);
    return row;
  }

  async ofTelegramUser(telegramUserId: number): Promise<Account | null> {
    return this.rows.first((r) => r.telegramUserId === telegramUserId) ?? null;
  }

  async insert(account: Account): Promise<void> {
    if (this.rows.has(account.id)) throw new DuplicateEntry(`accounts.PRIMARY ${account.id}`);
    const user = account.telegramUserId;
    if (user !== null && user !== undefined && this.rows.first((r) => r.telegramUserId === user))
      throw new DuplicateEntry(`uq_accounts_telegram_user ${user}`);
    this.rows.insert(
      account.id,
      Object.assign(new Account(), account, { unpostedUsageMinor: account.unpostedUsageMinor ?? 0 }),
    );
  }

  async setTelegramChat(id: string, telegramChatId: number): Promise<void> {
    this.rows.update(id, { telegramChatId });
  }

  async setEmail(id: string, email: string): Promise<void> {
    this.rows.update(id, { email });
  }

  async lockAccount(id: string): Promise<Account | null> {
    return this.find(id);
  }

  async lockAccountBalances(ids: readonly string[]): Promise<Map<string, AccountMoney>> {
    const out = new Map<string, AccountMoney>();
    for (const id of [...new Set(ids)].sort()) {
      const row = this.rows.get(id);
      if (row) out.set(id, { balanceMinor: row.balanceMinor, unpostedUsageMinor: row.unpostedUsageMinor });
    }
    return out;
  }

  async lockAccountWithKey(accountId: string, keyId: string): Promise<AccountWithKeyRow | null> {
    const account = this.rows.get(accountId);
    const key = keysOf(this.tables).get(keyId);
    if (!account || !key || key.accountId !== accountId) return null;
    return {
      account: {
        id: account.id,
        billingModel: account.billingModel,
        balanceMinor: account.balanceMinor,
        frozen: account.frozen,
      },
      netSpentMinor: key.netSpentMinor,
      activeDeployments: key.activeDeployments,
      revokedAt: key.revokedAt,
    };
  }

  async lockAccountAndKey(accountId: string, keyId: string): Promise<{ revokedAt: Date | null } | undefined> {
    const r = await this.lockAccountAndKeyKind(accountId, keyId);
    return r && { revokedAt: r.revokedAt };
  }

  async lockAccountAndKeyKind(
    accountId: string,
    keyId: string,
  ): Promise<{ kind: KeyKind; revokedAt: Date | null } | undefined> {
    const key = keysOf(this.tables).get(keyId);
    if (!this.rows.has(accountId) || !key || key.accountId !== accountId) return undefined;
    return { kind: key.kind, revokedAt: key.revokedAt };
  }

  async telegramChatsOf(accountIds: readonly string[]): Promise<Map<string, number>> {
    const wanted = new Set(accountIds);
    return new Map(
      this.rows
        .where((r) => wanted.has(r.id) && r.telegramChatId !== null && r.telegramChatId !== undefined)
        .map((r) => [r.id, Number(r.telegramChatId)] as const),
    );
  }

  async keyLabelsOf(keyIds: readonly string[]): Promise<Map<string, KeyLabel>> {
    const wanted = new Set(keyIds);
    return new Map(
      keysOf(this.tables)
        .where((k) => wanted.has(k.id))
        .map((k) => [k.id, { name: k.name, prefix: k.prefix, kind: k.kind }] as const),
    );
  }
}
