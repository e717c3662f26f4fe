import { DataSource, EntityManager } from 'typeorm';
import { readMinor } from '../../db/columns.js';
import { hydrate } from '../../db/entity-rows.js';
import type { Executor } from '../../db/mysql-store.js';
import { SqlTransaction, type Sql } from '../../db/sql.js';
import type { BillingModel } from '../../config.js';
import {
  MysqlAgentAuthorizationsRepository,
  type AgentAuthorizationsRepository,
} from '../agents/agent-authorizations.repository.js';
import type { KeyKind } from '../keys/api-key.entity.js';
import { MysqlKeysRepository, type KeysRepository } from '../keys/keys.repository.js';
import { Account } from './account.entity.js';
import { MysqlAccountMoneyRepository, type AccountMoneyRepository } from './account-money.repository.js';

// The only code that reads or writes `accounts` rows, but for the cached balances the ledger's
// postings move (account-money.repository.ts). Every lock of an account row is here: every money decision about an account
// starts with one of them, and each takes the account row before any key row, the order that
// keeps concurrent postings, admissions and revocations from deadlocking each other. The
// statements of admission's first round trip (lockAccountWithKey) are pinned by
// test/api/rentals-admission.test.ts: keep their text as it is.
//
// A lock that guards a decision is also a write (docs/operations/galera.md): on a multi-primary
// Galera cluster a FOR UPDATE lock holds only on its own node, and only transactions that write
// the same row conflict. The locks below that decide without moving the balance (admission,
// acting with a key, revoking one) first increment `lock_version` in the same round trip;
// lockAccount and lockAccountBalances need not, since every transaction that takes them to
// decide writes the balance it read.

/** Makes an account lock a write of the row; sent just before the locking read. */
const WRITE_LOCK = `UPDATE accounts SET lock_version = lock_version + 1 WHERE id = ?`;

/**
 * Writes account `accountId` (WRITE_LOCK), then runs the locking read `select`; both are issued
 * before anything is awaited, as one request to the server: pipelined in a SqlTransaction, one
 * multi-statement query on an EntityManager. Answers the read's rows.
 */
function writeLockedRead<R>(sql: Sql, accountId: string, select: string, params: unknown[]): Promise<R[]> {
  if (sql instanceof SqlTransaction)
    return Promise.all([sql.query(WRITE_LOCK, [accountId]), sql.query<R[]>(select, params)]).then(([, rows]) => rows);
  return sql.query(`${WRITE_LOCK};\n${select}`, [accountId, ...params]).then((results: [unknown, R[]]) => results[1]);
}

/** What admission needs of the account it has locked. */
export type LockedAccount = Pick<Account, 'id' | 'billingModel' | 'balanceMinor' | 'frozen'>;

/** The account row locked together with the counters and revocation of one of its keys. */
export interface AccountWithKeyRow {
  account: LockedAccount;
  /** The key's `net_spent_minor` and `active_deployments` counters (BIGINTs, read as numbers). */
  netSpentMinor: number;
  activeDeployments: number;
  revokedAt: Date | null;
}

/** Locks account `id` FOR UPDATE and reads it whole; null when there is no such account. */
export async function lockAccount(sql: Sql, id: string): Promise<Account | null> {
  const rows: Record<string, unknown>[] = await sql.query(`SELECT * FROM accounts WHERE id = ? FOR UPDATE`, [id]);
  return rows.length === 1 ? hydrate(sql, Account, rows[0]) : null;
}

/** An account's balance (what the customer has) and the usage taken from it that no ledger entry holds yet. */
export interface AccountMoney {
  balanceMinor: number;
  unpostedUsageMinor: number;
}

/**
 * Locks the accounts given, in id order (so two batches never deadlock each other), and reads
 * their balances and unposted usage; accounts that do not exist are left out of the answer.
 */
export async function lockAccountBalances(sql: Sql, ids: readonly string[]): Promise<Map<string, AccountMoney>> {
  const sorted = [...new Set(ids)].sort();
  const rows: { id: string; balance_minor: string | number; unposted_usage_minor: string | number }[] = await sql.query(
    `SELECT id, balance_minor, unposted_usage_minor FROM accounts WHERE id IN (?) ORDER BY id FOR UPDATE`,
    [sorted],
  );
  return new Map(
    rows.map((r) => [
      r.id,
      { balanceMinor: readMinor(r.balance_minor), unpostedUsageMinor: readMinor(r.unposted_usage_minor) },
    ]),
  );
}

/**
 * Writes and locks account `accountId`, then locks the row of its key `keyId`, reading what admission needs
 * of both in one statement (STRAIGHT_JOIN fixes the lock order: account first, then key); null when
 * the key is not one of the account's. Both statements are issued before this function awaits
 * anything, so it travels with whatever the caller issues in the same tick.
 */
export async function lockAccountWithKey(
  sql: Sql,
  accountId: string,
  keyId: string,
): Promise<AccountWithKeyRow | null> {
  const rows = await writeLockedRead<{
    id: string;
    billing_model: BillingModel;
    balance_minor: string | number;
    frozen: number;
    net_spent_minor: string | number;
    active_deployments: string | number;
    revoked_at: Date | null;
  }>(
    sql,
    accountId,
    `SELECT a.id, a.billing_model, a.balance_minor, a.frozen, k.net_spent_minor, k.active_deployments, k.revoked_at
         FROM accounts a STRAIGHT_JOIN api_keys k ON k.id = ? AND k.account_id = a.id
        WHERE a.id = ? FOR UPDATE`,
    [keyId, accountId],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    account: {
      id: r.id,
      billingModel: r.billing_model,
      balanceMinor: readMinor(r.balance_minor),
      frozen: Boolean(Number(r.frozen)),
    },
    netSpentMinor: readMinor(r.net_spent_minor),
    activeDeployments: readMinor(r.active_deployments),
    revokedAt: r.revoked_at,
  };
}

/**
 * Writes and locks account `accountId`, then locks its key `keyId` (the order of {@link lockAccountWithKey}),
 * reading only the key's revocation: `undefined` when the key is not one of the account's.
 */
export async function lockAccountAndKey(
  sql: Sql,
  accountId: string,
  keyId: string,
): Promise<{ revokedAt: Date | null } | undefined> {
  const rows = await writeLockedRead<{ revoked_at: Date | null }>(
    sql,
    accountId,
    `SELECT k.revoked_at FROM accounts a STRAIGHT_JOIN api_keys k ON k.id = ? AND k.account_id = a.id WHERE a.id = ? FOR UPDATE`,
    [keyId, accountId],
  );
  return rows.length === 1 ? { revokedAt: rows[0].revoked_at } : undefined;
}

/**
 * Writes and locks account `accountId`, then locks its key `keyId` (the order of {@link lockAccountWithKey}),
 * reading the key's kind and revocation: `undefined` when the key is not one of the account's.
 */
export async function lockAccountAndKeyKind(
  sql: Sql,
  accountId: string,
  keyId: string,
): Promise<{ kind: KeyKind; revokedAt: Date | null } | undefined> {
  const rows = await writeLockedRead<{ kind: KeyKind; revoked_at: Date | null }>(
    sql,
    accountId,
    `SELECT k.kind, k.revoked_at FROM accounts a STRAIGHT_JOIN api_keys k ON k.id = ? AND k.account_id = a.id WHERE a.id = ? FOR UPDATE`,
    [keyId, accountId],
  );
  return rows.length === 1 ? { kind: rows[0].kind, revokedAt: rows[0].revoked_at } : undefined;
}

/** Account `id`, read without a lock (its balance and frozen flag as last committed). Throws when there is none. */
export function getAccount(ds: DataSource | EntityManager, id: string): Promise<Account> {
  return ds.getRepository(Account).findOneByOrFail({ id });
}

/** Account `id`, read without a lock; null when there is none. */
export function findAccount(ds: DataSource | EntityManager, id: string): Promise<Account | null> {
  return ds.getRepository(Account).findOneBy({ id });
}

/** Writes a new account row, in the caller's transaction. */
export async function insertAccount(manager: EntityManager, account: Account): Promise<void> {
  await manager.insert(Account, account);
}

/** The account bound to a Telegram user, if any. */
export function accountOfTelegramUser(ds: DataSource | EntityManager, telegramUserId: number): Promise<Account | null> {
  return ds.getRepository(Account).findOneBy({ telegramUserId });
}

/** Sets the chat the account's Telegram notifications go to. */
export async function setTelegramChat(
  ds: DataSource | EntityManager,
  id: string,
  telegramChatId: number,
): Promise<void> {
  await ds.getRepository(Account).update({ id }, { telegramChatId });
}

/** Sets the account's e-mail (already normalized by the caller). */
export async function setAccountEmail(ds: DataSource | EntityManager, id: string, email: string): Promise<void> {
  await ds.getRepository(Account).update({ id }, { email });
}

/**
 * The accounts aggregate: `accounts` rows, their keys (`api_keys`) and the agent authorizations
 * that lead to keys, with every lock that starts a money decision about an account. Locks take
 * the account row before any key row (the order that keeps postings, admissions and revocations
 * from deadlocking each other) and run only inside a transaction.
 */
export interface AccountsRepository {
  /** The account's keys. */
  readonly keys: KeysRepository;
  /** The agent authorization sessions and setup codes. */
  readonly authorizations: AgentAuthorizationsRepository;
  /** The cached balances, unposted usage and key spend that the ledger's postings move. */
  readonly money: AccountMoneyRepository;
  /** Account `id` without a lock, as last committed (or as the caller's transaction sees it); null when there is none. */
  find(id: string): Promise<Account | null>;
  /** Account `id` as {@link find} reads it; rejects when there is none. */
  get(id: string): Promise<Account>;
  /** The account bound to a Telegram user; null when there is none. */
  ofTelegramUser(telegramUserId: number): Promise<Account | null>;
  /**
   * Writes a new account row (an unposted usage left out is 0). A Telegram user already bound to
   * an account is refused with an error whose `code` is ER_DUP_ENTRY, and nothing is written.
   */
  insert(account: Account): Promise<void>;
  /** Sets the chat the account's Telegram notifications go to. Stands alone. */
  setTelegramChat(id: string, telegramChatId: number): Promise<void>;
  /** Sets the account's e-mail, already normalized. Stands alone. */
  setEmail(id: string, email: string): Promise<void>;
  /** Locks account `id` FOR UPDATE and reads it whole; null when there is none. In a transaction only. */
  lockAccount(id: string): Promise<Account | null>;
  /**
   * Locks the accounts given in id order (two batches never deadlock each other) and reads their
   * balances and unposted usage; accounts that do not exist are left out. In a transaction only.
   */
  lockAccountBalances(ids: readonly string[]): Promise<Map<string, AccountMoney>>;
  /**
   * Writes and locks account `accountId`, then locks its key `keyId`, reading what admission needs
   * of both; null when the key is not one of the account's. In a transaction only; in a pipelined
   * one its statements travel with whatever the caller issues in the same tick.
   */
  lockAccountWithKey(accountId: string, keyId: string): Promise<AccountWithKeyRow | null>;
  /** Writes and locks the account, then its key, reading the key's revocation; `undefined` when the key is not the account's. In a transaction only. */
  lockAccountAndKey(accountId: string, keyId: string): Promise<{ revokedAt: Date | null } | undefined>;
  /** As {@link lockAccountAndKey}, reading the key's kind too. In a transaction only. */
  lockAccountAndKeyKind(
    accountId: string,
    keyId: string,
  ): Promise<{ kind: KeyKind; revokedAt: Date | null } | undefined>;
  // What owners' Telegram notifications read of accounts and keys (notifications.service.ts).
  /** The Telegram chat of each of `accountIds` whose owner has one; the others are left out. */
  telegramChatsOf(accountIds: readonly string[]): Promise<Map<string, number>>;
  /** The name, prefix and kind of each of `keyIds` that exists, revoked or not. */
  keyLabelsOf(keyIds: readonly string[]): Promise<Map<string, KeyLabel>>;
}

/** How a key is named to its owner: its name, its prefix and its kind. */
export interface KeyLabel {
  name: string;
  prefix: string;
  kind: KeyKind;
}

/** TypeORM's entity calls run on the DataSource or a transaction's manager, not in a pipelined transaction. */
function managerOf(sql: Executor): EntityManager {
  if (sql instanceof DataSource) return sql.manager;
  if (sql instanceof EntityManager) return sql;
  throw new Error('accounts entity reads and writes do not run in a pipelined transaction');
}

/** A lock outside a transaction would end with its statement. */
function transactionOf(sql: Executor): Sql {
  if (sql instanceof DataSource) throw new Error('an account is locked only inside a transaction');
  return sql;
}

/** The accounts aggregate on MySQL; the keys and authorizations halves are made on first use. */
export class MysqlAccountsRepository implements AccountsRepository {
  private keyRows?: KeysRepository;
  private authorizationRows?: AgentAuthorizationsRepository;
  private cachedMoney?: AccountMoneyRepository;

  constructor(private readonly sql: Executor) {}

  get keys(): KeysRepository {
    return (this.keyRows ??= new MysqlKeysRepository(this.sql));
  }

  get authorizations(): AgentAuthorizationsRepository {
    return (this.authorizationRows ??= new MysqlAgentAuthorizationsRepository(this.sql));
  }

  get money(): AccountMoneyRepository {
    return (this.cachedMoney ??= new MysqlAccountMoneyRepository(this.sql));
  }

  find(id: string): Promise<Account | null> {
    return findAccount(managerOf(this.sql), id);
  }

  get(id: string): Promise<Account> {
    return getAccount(managerOf(this.sql), id);
  }

  ofTelegramUser(telegramUserId: number): Promise<Account | null> {
    return accountOfTelegramUser(managerOf(this.sql), telegramUserId);
  }

  insert(account: Account): Promise<void> {
    return insertAccount(managerOf(this.sql), account);
  }

  setTelegramChat(id: string, telegramChatId: number): Promise<void> {
    return setTelegramChat(managerOf(this.sql), id, telegramChatId);
  }

  setEmail(id: string, email: string): Promise<void> {
    return setAccountEmail(managerOf(this.sql), id, email);
  }

  lockAccount(id: string): Promise<Account | null> {
    return lockAccount(transactionOf(this.sql), id);
  }

  lockAccountBalances(ids: readonly string[]): Promise<Map<string, AccountMoney>> {
    return lockAccountBalances(transactionOf(this.sql), ids);
  }

  lockAccountWithKey(accountId: string, keyId: string): Promise<AccountWithKeyRow | null> {
    return lockAccountWithKey(transactionOf(this.sql), accountId, keyId);
  }

  lockAccountAndKey(accountId: string, keyId: string): Promise<{ revokedAt: Date | null } | undefined> {
    return lockAccountAndKey(transactionOf(this.sql), accountId, keyId);
  }

  lockAccountAndKeyKind(
    accountId: string,
    keyId: string,
  ): Promise<{ kind: KeyKind; revokedAt: Date | null } | undefined> {
    return lockAccountAndKeyKind(transactionOf(this.sql), accountId, keyId);
  }

  async telegramChatsOf(accountIds: readonly string[]): Promise<Map<string, number>> {
    if (accountIds.length === 0) return new Map();
    const rows: { id: string; chat_id: number | string }[] = await this.sql.query(
      'SELECT id, telegram_chat_id AS chat_id FROM accounts WHERE id IN (?) AND telegram_chat_id IS NOT NULL',
      [[...new Set(accountIds)]],
    );
    return new Map(rows.map((r) => [r.id, Number(r.chat_id)]));
  }

  async keyLabelsOf(keyIds: readonly string[]): Promise<Map<string, KeyLabel>> {
    if (keyIds.length === 0) return new Map();
    const rows: { id: string; name: string; prefix: string; kind: KeyKind }[] = await this.sql.query(
      'SELECT id, name, prefix, kind FROM api_keys WHERE id IN (?)',
      [[...new Set(keyIds)]],
    );
    return new Map(rows.map((r) => [r.id, { name: r.name, prefix: r.prefix, kind: r.kind }]));
  }
}
