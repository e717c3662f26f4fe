import { derivedTable } from '../../db/derived-table.js';
import type { Executor } from '../../db/mysql-store.js';
import { inOpenTransaction, type Sql } from '../../db/sql.js';

// The cached money figures of accounts and keys: `accounts.balance_minor`,
// `accounts.unposted_usage_minor` and `api_keys.net_spent_minor`. They are columns of the accounts
// aggregate's rows, moved only by the ledger's postings (LedgerRepository delegates here) under
// the account locks of accounts.repository.ts. A posting of admission travels in admission's
// second round trip (test/api/rentals-admission.test.ts): keep the statements' text as it is.

/** Sets an account's cached balance. */
export async function setBalance(sql: Sql, accountId: string, balanceMinor: number): Promise<void> {
  await sql.query(`UPDATE accounts SET balance_minor = ? WHERE id = ?`, [balanceMinor, accountId]);
}

/** Sets the balances and unposted usage of many accounts in one statement. */
export async function setBalances(
  sql: Sql,
  money: ReadonlyMap<string, { balanceMinor: number; unpostedUsageMinor: number }>,
): Promise<void> {
  if (money.size === 0) return;
  const t = derivedTable(
    ['id', 'b', 'u'],
    [...money.entries()].map(([id, m]) => [id, m.balanceMinor, m.unpostedUsageMinor]),
  );
  await sql.query(
    `UPDATE accounts a JOIN (${t.sql}) v ON v.id = a.id SET a.balance_minor = v.b, a.unposted_usage_minor = v.u`,
    t.params,
  );
}

/** Adds `spentMinor` to a key's net spend. */
export async function addKeySpend(sql: Sql, keyId: string, spentMinor: number): Promise<void> {
  await sql.query(`UPDATE api_keys SET net_spent_minor = net_spent_minor + ? WHERE id = ?`, [spentMinor, keyId]);
}

/** Adds to the net spend of many keys in one statement. */
export async function addKeySpends(sql: Sql, spentByKey: ReadonlyMap<string, number>): Promise<void> {
  if (spentByKey.size === 0) return;
  const t = derivedTable(['id', 'v'], [...spentByKey.entries()]);
  await sql.query(
    `UPDATE api_keys k JOIN (${t.sql}) v ON v.id = k.id SET k.net_spent_minor = k.net_spent_minor + v.v`,
    t.params,
  );
}

/**
 * The cached money figures of the accounts aggregate (AccountsRepository.money): each account's
 * balance and unposted usage, each key's net spend. They move only with a ledger posting, in its
 * transaction, after the account lock; each write issues its one statement at the call, before it
 * awaits anything, so writes called together travel together in a pipelined transaction.
 */
export interface AccountMoneyRepository {
  /** Sets an account's cached balance. In a transaction only. */
  setBalance(accountId: string, balanceMinor: number): Promise<void>;
  /** Sets the balances and unposted usage of many accounts in one statement (none for an empty map). In a transaction only. */
  setBalances(money: ReadonlyMap<string, { balanceMinor: number; unpostedUsageMinor: number }>): Promise<void>;
  /** Adds `spentMinor` (negative for a reversal) to a key's net spend. In a transaction only. */
  addKeySpend(keyId: string, spentMinor: number): Promise<void>;
  /** Adds to the net spend of many keys in one statement (none for an empty map). In a transaction only. */
  addKeySpends(spentByKey: ReadonlyMap<string, number>): Promise<void>;
}

/** A cached figure written outside a transaction would commit apart from the posting that moves it. */
function transactionOf(sql: Executor): Sql {
  if (!inOpenTransaction(sql)) throw new Error('cached balances and key spend are written only inside a transaction');
  return sql as Sql;
}

/**
 * The cached money figures on MySQL. Its methods are async, so a refusal rejects as a failed
 * statement does; each still issues its statement at the call.
 */
export class MysqlAccountMoneyRepository implements AccountMoneyRepository {
  constructor(private readonly sql: Executor) {}

  async setBalance(accountId: string, balanceMinor: number): Promise<void> {
    return setBalance(transactionOf(this.sql), accountId, balanceMinor);
  }

  async setBalances(money: ReadonlyMap<string, { balanceMinor: number; unpostedUsageMinor: number }>): Promise<void> {
    return setBalances(transactionOf(this.sql), money);
  }

  async addKeySpend(keyId: string, spentMinor: number): Promise<void> {
    return addKeySpend(transactionOf(this.sql), keyId, spentMinor);
  }

  async addKeySpends(spentByKey: ReadonlyMap<string, number>): Promise<void> {
    return addKeySpends(transactionOf(this.sql), spentByKey);
  }
}
