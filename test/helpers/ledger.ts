import assert from 'node:assert/strict';
import type { DataSource } from 'typeorm';

/** Every cached balance equals the sum of its ledger entries. */
export async function assertLedgerConsistent(ds: DataSource): Promise<void> {
  const rows: { id: string; balance_minor: string | number; total: string | number | null }[] = await ds.query(
    `SELECT a.id, a.balance_minor, (SELECT SUM(amount_minor) FROM ledger_entries e WHERE e.account_id = a.id) AS total
       FROM accounts a`,
  );
  const bad = rows.filter((r) => Number(r.balance_minor) !== Number(r.total ?? 0));
  assert.deepEqual(bad, [], 'accounts whose cached balance differs from the sum of their ledger entries');
}
