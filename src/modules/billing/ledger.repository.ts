import { DataSource, EntityManager, LessThan } from 'typeorm';
import { hydrate, insertEntity } from '../../db/entity-rows.js';
import { readMinor } from '../../db/columns.js';
import type { Executor } from '../../db/mysql-store.js';
import { inOpenTransaction, type Sql } from '../../db/sql.js';
import { MysqlAccountMoneyRepository, type AccountMoneyRepository } from '../accounts/account-money.repository.js';
import { recordEvent, type NewEvent } from '../events/events.repository.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';
import { LedgerEntry, type LedgerKind } from './ledger-entry.entity.js';

// The only code that reads or writes `ledger_entries`, and the only caller of the writes of the
// cached `accounts.balance_minor`, `accounts.unposted_usage_minor` and `api_keys.net_spent_minor`
// that move with them and with metered usage (their statements are the accounts aggregate's:
// accounts/account-money.repository.ts). The rules (when a posting may be written, what it adds
// to a key's spend) are LedgerService's; the account locks it takes first are in
// accounts.repository.ts. A posting of admission travels in admission's second round trip
// (test/api/rentals-admission.test.ts): keep the statements' text as it is.

/** The fields of an entry as a posting writes it. */
export type NewLedgerEntry = Omit<LedgerEntry, 'id'>;

/** The entry posted under `externalRef`, or null. */
export async function entryByRef(sql: Sql, externalRef: string): Promise<LedgerEntry | null> {
  const found: Record<string, unknown>[] = await sql.query(`SELECT * FROM ledger_entries WHERE external_ref = ?`, [
    externalRef,
  ]);
  if (found.length === 0) return null;
  // A BIGINT id comes back as a number when it fits; the entity's ids are strings, as insertEntry answers them.
  const entry = hydrate(sql, LedgerEntry, found[0]);
  entry.id = String(entry.id);
  return entry;
}

/** Writes one entry; answers it with its new id. */
export async function insertEntry(sql: Sql, fields: NewLedgerEntry): Promise<LedgerEntry> {
  const { insertId } = await insertEntity(sql, LedgerEntry, fields);
  return Object.assign(new LedgerEntry(), fields, { id: String(insertId) });
}

/** Writes many entries in one statement. */
export async function insertEntries(sql: Sql, entries: readonly NewLedgerEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const values = entries.map((e) => [
    e.accountId,
    e.keyId,
    e.rentalId,
    e.kind,
    e.amountMinor,
    e.balanceAfterMinor,
    e.externalRef,
    e.description,
    e.createdAt,
  ]);
  await sql.query(
    `INSERT INTO ledger_entries (account_id, key_id, rental_id, kind, amount_minor, balance_after_minor, external_ref, description, created_at) VALUES ?`,
    [values],
  );
}

/**
 * The entries `viewer` sees (keys/visibility.ts), newest first, `limit` of them below entry
 * `beforeId` (from the newest without it).
 */
export function visibleEntries(
  ds: DataSource | EntityManager,
  viewer: Viewer,
  limit: number,
  beforeId?: number,
): Promise<LedgerEntry[]> {
  const where = { ...visibleRows(viewer), ...(beforeId === undefined ? {} : { id: LessThan(String(beforeId)) }) };
  return ds.getRepository(LedgerEntry).find({ where, order: { id: 'DESC' }, take: limit });
}

/**
 * The ledger aggregate: `ledger_entries` (append-only, one entry per unique cause reference) and
 * the cached figures that move with it, `accounts.balance_minor`, `accounts.unposted_usage_minor`
 * and `api_keys.net_spent_minor`, written through the accounts aggregate (AccountsRepository.money)
 * in the posting's transaction. The account locks a posting takes first are the accounts
 * repository's. Every write runs inside a transaction and issues its one statement at the call,
 * before it awaits anything, so writes called together travel together in a pipelined transaction.
 */
export interface LedgerRepository {
  /** The entry posted under `externalRef`, or null: a plain read, no lock. */
  entryByRef(externalRef: string): Promise<LedgerEntry | null>;
  /**
   * Appends one entry and answers it with its new id (a decimal string). A reference already
   * posted is refused with an error whose `code` is ER_DUP_ENTRY, and nothing is written.
   */
  insert(entry: NewLedgerEntry): Promise<LedgerEntry>;
  /** Appends many entries in one statement (none for an empty list), refused whole as {@link insert} is. */
  insertMany(entries: readonly NewLedgerEntry[]): Promise<void>;
  /** Sets an account's cached balance. */
  setBalance(accountId: string, balanceMinor: number): Promise<void>;
  /** Sets the balances and unposted usage of many accounts in one statement (none for an empty map). */
  setBalances(money: ReadonlyMap<string, { balanceMinor: number; unpostedUsageMinor: number }>): Promise<void>;
  /** Adds `spentMinor` (negative for a reversal) to a key's net spend. */
  addKeySpend(keyId: string, spentMinor: number): Promise<void>;
  /** Adds to the net spend of many keys in one statement (none for an empty map). */
  addKeySpends(spentByKey: ReadonlyMap<string, number>): Promise<void>;
  /**
   * The entries `viewer` sees (keys/visibility.ts: an agent key its own, the holder the whole
   * account's), newest first, at most `limit` of them below entry `beforeId`. A plain read, not in
   * a pipelined transaction.
   */
  visible(viewer: Viewer, limit: number, beforeId?: number): Promise<LedgerEntry[]>;
  /** The sum of the amounts of rental `rentalId`'s entries of `kinds` (0 without any), in this executor's view. */
  sumOfRental(rentalId: string, kinds: readonly LedgerKind[]): Promise<number>;
  /**
   * Writes one event to the account's event log in this transaction: how a posting's account
   * event (`credits.low`, `topup.paid`) commits with it. The statements are the event log's.
   */
  appendEvent(event: NewEvent): Promise<void>;
}

/** A posting's writes outside a transaction would commit one by one, apart from the balance they move. */
function transactionOf(sql: Executor): Sql {
  if (!inOpenTransaction(sql)) throw new Error('ledger postings are written only inside a transaction');
  return sql as Sql;
}

/** TypeORM's entity reads run on the DataSource or a transaction's manager, not in a pipelined transaction. */
function managerOf(sql: Executor): DataSource | EntityManager {
  if (sql instanceof DataSource || sql instanceof EntityManager) return sql;
  throw new Error('ledger entity reads do not run in a pipelined transaction');
}

/**
 * The ledger aggregate on MySQL: the statements above, on one executor. Its methods are async, so
 * a refusal rejects as a failed statement does; each still issues its statement at the call.
 */
export class MysqlLedgerRepository implements LedgerRepository {
  private cached?: AccountMoneyRepository;

  constructor(private readonly sql: Executor) {}

  /** The accounts aggregate's cached figures, on this executor: a posting's writes stay in its transaction. */
  private get money(): AccountMoneyRepository {
    return (this.cached ??= new MysqlAccountMoneyRepository(this.sql));
  }

  async entryByRef(externalRef: string): Promise<LedgerEntry | null> {
    return entryByRef(this.sql instanceof DataSource ? this.sql.manager : this.sql, externalRef);
  }

  async insert(entry: NewLedgerEntry): Promise<LedgerEntry> {
    return insertEntry(transactionOf(this.sql), entry);
  }

  async insertMany(entries: readonly NewLedgerEntry[]): Promise<void> {
    return insertEntries(transactionOf(this.sql), entries);
  }

  async setBalance(accountId: string, balanceMinor: number): Promise<void> {
    transactionOf(this.sql);
    return this.money.setBalance(accountId, balanceMinor);
  }

  async setBalances(money: ReadonlyMap<string, { balanceMinor: number; unpostedUsageMinor: number }>): Promise<void> {
    transactionOf(this.sql);
    return this.money.setBalances(money);
  }

  async addKeySpend(keyId: string, spentMinor: number): Promise<void> {
    transactionOf(this.sql);
    return this.money.addKeySpend(keyId, spentMinor);
  }

  async addKeySpends(spentByKey: ReadonlyMap<string, number>): Promise<void> {
    transactionOf(this.sql);
    return this.money.addKeySpends(spentByKey);
  }

  async visible(viewer: Viewer, limit: number, beforeId?: number): Promise<LedgerEntry[]> {
    return visibleEntries(managerOf(this.sql), viewer, limit, beforeId);
  }

  async sumOfRental(rentalId: string, kinds: readonly LedgerKind[]): Promise<number> {
    const [row]: { total: string | number | null }[] = await this.sql.query(
      'SELECT SUM(amount_minor) AS total FROM ledger_entries WHERE rental_id = ? AND kind IN (?)',
      [rentalId, kinds],
    );
    return row?.total === null || row?.total === undefined ? 0 : readMinor(row.total);
  }

  async appendEvent(event: NewEvent): Promise<void> {
    return recordEvent(transactionOf(this.sql), event);
  }
}
