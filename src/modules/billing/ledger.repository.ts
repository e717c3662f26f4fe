import { LessThan, type DataSource } from 'typeorm';
import { derivedTable } from '../../db/derived-table.js';
import { hydrate, insertEntity } from '../../db/entity-rows.js';
import type { Sql } from '../../db/sql.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';
import { LedgerEntry } from './ledger-entry.entity.js';

// The only code that reads or writes `ledger_entries`, and the only writer of the cached
// `accounts.balance_minor`, `accounts.unposted_usage_minor` and `api_keys.net_spent_minor` that
// move with them and with metered usage. The rules (when a
// posting may be written, what it adds to a key's spend) are LedgerService's; the account locks
// it takes first are in accounts.repository.ts. A posting of admission travels in admission's
// second round trip (test/api/rentals-admission.test.ts): keep the statements' text as it is.

/** The fields of an entry as a posting writes it. */
export type NewLedgerEntry = Omit<LedgerEntry, 'id'>;

/** The entry posted under `externalRef`, or null. */
export async function entryByRef(sql: Sql, externalRef: string): Promise<LedgerEntry | null> {
  const found: Record<string, unknown>[] = await sql.query(`SELECT * FROM ledger_entries WHERE external_ref = ?`, [
    externalRef,
  ]);
  return found.length > 0 ? hydrate(sql, LedgerEntry, found[0]) : null;
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
 * The entries `viewer` sees (keys/visibility.ts), newest first, `limit` of them below entry
 * `beforeId` (from the newest without it).
 */
export function visibleEntries(
  ds: DataSource,
  viewer: Viewer,
  limit: number,
  beforeId?: number,
): Promise<LedgerEntry[]> {
  const where = { ...visibleRows(viewer), ...(beforeId === undefined ? {} : { id: LessThan(String(beforeId)) }) };
  return ds.getRepository(LedgerEntry).find({ where, order: { id: 'DESC' }, take: limit });
}
