import assert from 'node:assert/strict';
import type { Account } from '../../src/modules/accounts/account.entity.js';
import type { LedgerEntry } from '../../src/modules/billing/ledger-entry.entity.js';
import { KEY_SPEND_KINDS } from '../../src/modules/billing/ledger.service.js';
import type { MemoryKeyRow } from '../fakes/store/accounts.js';
import type { MemoryTables } from '../fakes/store/memory-store.js';

/** Ledger entries of a memory store in the order they were written (the BIGINT ids' order). */
export function memoryEntries(tables: MemoryTables): LedgerEntry[] {
  return tables
    .table<LedgerEntry>('ledger_entries')
    .all()
    .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
}

/**
 * The DB tier's money invariants (test/helpers/ledger.ts) on a memory store, where no deployments
 * exist to say what usage is unposted: every account's entries sum to its balance plus its
 * unposted usage, each entry's `balanceAfterMinor` is its account's running sum, and every key's
 * net spend is its rental debits, usage and reversals in the ledger plus `unpostedByKey` (usage a
 * test accrued and has not posted yet).
 */
export function assertMemoryLedgerConsistent(
  tables: MemoryTables,
  unpostedByKey: ReadonlyMap<string, number> = new Map(),
): void {
  const entries = memoryEntries(tables);
  const running = new Map<string, number>();
  const badAfter: string[] = [];
  for (const e of entries) {
    const sum = (running.get(e.accountId) ?? 0) + e.amountMinor;
    running.set(e.accountId, sum);
    if (e.balanceAfterMinor !== sum) badAfter.push(`${e.externalRef}: after ${e.balanceAfterMinor}, running ${sum}`);
  }
  assert.deepEqual(badAfter, [], "entries whose balance after is not their account's running sum");
  const accounts = tables.table<Account>('accounts').all();
  const off = accounts
    .filter((a) => a.balanceMinor + a.unpostedUsageMinor !== (running.get(a.id) ?? 0))
    .map((a) => ({ id: a.id, balance: a.balanceMinor, unposted: a.unpostedUsageMinor, total: running.get(a.id) ?? 0 }));
  assert.deepEqual(off, [], 'accounts whose balance plus unposted usage differs from the sum of their ledger entries');
  const spent = new Map<string, number>();
  for (const e of entries)
    if (e.keyId && KEY_SPEND_KINDS.includes(e.kind)) spent.set(e.keyId, (spent.get(e.keyId) ?? 0) - e.amountMinor);
  const keys = tables
    .table<MemoryKeyRow>('api_keys')
    .all()
    .filter((k) => k.netSpentMinor !== (spent.get(k.id) ?? 0) + (unpostedByKey.get(k.id) ?? 0))
    .map((k) => ({ id: k.id, netSpent: k.netSpentMinor, ledger: spent.get(k.id) ?? 0 }));
  assert.deepEqual(keys, [], 'keys whose net spend differs from their ledger entries and unposted usage');
}
