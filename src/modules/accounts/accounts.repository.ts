import type { DataSource, EntityManager } from 'typeorm';
import { readMinor } from '../../db/columns.js';
import { hydrate } from '../../db/entity-rows.js';
import { SqlTransaction, type Sql } from '../../db/sql.js';
import type { BillingModel } from '../../config.js';
import type { KeyKind } from '../keys/api-key.entity.js';
import { Account } from './account.entity.js';

// The only code that reads or writes `accounts` rows, the balance postings of the ledger
// repository aside. Every lock of an account row is here: every money decision about an account
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
  /** The key's `net_spent_minor` and `active_deployments` counters, as read. */
  netSpent: string | number;
  activeDeployments: string | number;
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
    netSpent: r.net_spent_minor,
    activeDeployments: r.active_deployments,
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
export function accountOfTelegramUser(ds: DataSource, telegramUserId: number): Promise<Account | null> {
  return ds.getRepository(Account).findOneBy({ telegramUserId });
}

/** Sets the chat the account's Telegram notifications go to. */
export async function setTelegramChat(ds: DataSource, id: string, telegramChatId: number): Promise<void> {
  await ds.getRepository(Account).update({ id }, { telegramChatId });
}

/** Sets the account's e-mail (already normalized by the caller). */
export async function setAccountEmail(ds: DataSource, id: string, email: string): Promise<void> {
  await ds.getRepository(Account).update({ id }, { email });
}
