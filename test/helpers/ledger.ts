import assert from 'node:assert/strict';
import type { DataSource } from 'typeorm';
import { KEY_SPEND_KINDS } from '../../src/modules/billing/ledger.service.js';
import { TERMINAL_STATUSES } from '../../src/modules/rentals/state/rental-status.js';

/**
 * The money invariants: every account's ledger entries sum to its balance plus its unposted usage
 * (metered usage and traffic taken from the balance that no entry holds yet), and that unposted usage is what
 * its deployments have charged beyond what they posted; every key's net spend is the sum of its
 * rental debits, usage and reversals in the ledger plus its rentals' unposted usage, and its
 * active deployments the count of its deployments not finished.
 */
export async function assertLedgerConsistent(ds: DataSource): Promise<void> {
  const rows: {
    id: string;
    balance_minor: string | number;
    unposted_usage_minor: string | number;
    total: string | number | null;
    unposted: string | number | null;
  }[] = await ds.query(
    `SELECT a.id, a.balance_minor, a.unposted_usage_minor,
              (SELECT SUM(amount_minor) FROM ledger_entries e WHERE e.account_id = a.id) AS total,
              (SELECT SUM(usage_minor - posted_usage_minor + traffic_minor - posted_traffic_minor) FROM deployments d WHERE d.account_id = a.id) AS unposted
         FROM accounts a`,
  );
  const bad = rows.filter((r) => Number(r.balance_minor) + Number(r.unposted_usage_minor) !== Number(r.total ?? 0));
  assert.deepEqual(bad, [], 'accounts whose balance plus unposted usage differs from the sum of their ledger entries');
  const unposted = rows.filter((r) => Number(r.unposted_usage_minor) !== Number(r.unposted ?? 0));
  assert.deepEqual(unposted, [], "accounts whose unposted usage differs from their deployments' usage not yet posted");
  const keys: {
    id: string;
    net_spent_minor: string | number;
    spent: string | number | null;
    unposted: string | number | null;
    active_deployments: number;
    active: string | number;
  }[] = await ds.query(
    `SELECT k.id, k.net_spent_minor, k.active_deployments,
              (SELECT -SUM(amount_minor) FROM ledger_entries e WHERE e.key_id = k.id AND e.kind IN (?)) AS spent,
              (SELECT SUM(usage_minor - posted_usage_minor + traffic_minor - posted_traffic_minor) FROM deployments d WHERE d.key_id = k.id) AS unposted,
              (SELECT COUNT(*) FROM deployments d WHERE d.key_id = k.id AND d.status NOT IN (?)) AS active
         FROM api_keys k`,
    [KEY_SPEND_KINDS, TERMINAL_STATUSES],
  );
  const off = keys.filter(
    (k) =>
      Number(k.net_spent_minor) !== Number(k.spent ?? 0) + Number(k.unposted ?? 0) ||
      Number(k.active_deployments) !== Number(k.active),
  );
  assert.deepEqual(off, [], 'keys whose counters differ from their ledger entries, unposted usage and deployments');
  const finished: { id: string }[] = await ds.query(
    `SELECT id FROM deployments WHERE status IN (?) AND (usage_minor <> posted_usage_minor OR traffic_minor <> posted_traffic_minor)`,
    [TERMINAL_STATUSES],
  );
  assert.deepEqual(finished, [], 'finished deployments with usage never posted to the ledger');
}

/**
 * Tests that move a deployment's status by hand (standing in for the lifecycle jobs, outside the
 * state machine) recount the key's slots as the state machine would have kept them.
 */
export async function recountKeySlots(ds: DataSource, keyId: string): Promise<void> {
  await ds.query(
    `UPDATE api_keys SET active_deployments = (SELECT COUNT(*) FROM deployments WHERE key_id = ? AND status NOT IN (?)) WHERE id = ?`,
    [keyId, TERMINAL_STATUSES, keyId],
  );
}
