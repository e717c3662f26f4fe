import type { DataSource, EntityManager } from 'typeorm';
import { hydrate } from '../../db/entity-rows.js';
import { sqlQuery } from '../../db/sql.js';
import { ApiKey } from './api-key.entity.js';

// The only code that reads or writes `api_keys` rows, but for the counters the ledger and the
// rental states move and the key lock read with its account (accounts.repository.ts). The
// prefix read and the last-used stamp run on every authenticated request: they take a pooled
// connection directly, one statement each.

/** A key's `net_spent_minor` and `active_deployments` counters, as read. */
export interface KeyCounterRow {
  netSpent: string | number;
  activeDeployments: string | number;
}

/** Writes a new key row, in the caller's transaction. */
export async function insertKey(manager: EntityManager, key: ApiKey): Promise<void> {
  await manager.insert(ApiKey, key);
}

/** The key with this public prefix, read afresh (revoked or not); null when there is none. */
export async function keyByPrefix(ds: DataSource, prefix: string): Promise<ApiKey | null> {
  const rows: Record<string, unknown>[] = await sqlQuery(ds, `SELECT * FROM api_keys WHERE prefix = ?`, [prefix]);
  return rows.length === 1 ? hydrate(ds, ApiKey, rows[0]) : null;
}

/** Stamps the key's last use, outside any transaction. */
export async function touchKey(ds: DataSource, id: string, at: Date): Promise<void> {
  await sqlQuery(ds, `UPDATE api_keys SET last_used_at = ? WHERE id = ?`, [at, id]);
}

/** The counters of the keys given, by id; keys that do not exist are left out. */
export async function keyCounters(manager: EntityManager | DataSource, ids: readonly string[]): Promise<Map<string, KeyCounterRow>> {
  if (ids.length === 0) return new Map();
  const rows: { id: string; net_spent_minor: string | number; active_deployments: string | number }[] = await manager.query(
    `SELECT id, net_spent_minor, active_deployments FROM api_keys WHERE id IN (?)`,
    [ids],
  );
  return new Map(rows.map((r) => [r.id, { netSpent: r.net_spent_minor, activeDeployments: r.active_deployments }]));
}

/**
 * Stamps key `keyId` of account `accountId` revoked at `at` unless it already is. Answers
 * whether the key exists on that account (revoked now or before).
 */
export async function revokeKey(ds: DataSource, accountId: string, keyId: string, at: Date): Promise<boolean> {
  const res = await ds
    .getRepository(ApiKey)
    .createQueryBuilder()
    .update()
    .set({ revokedAt: at })
    .where('id = :keyId AND account_id = :accountId AND revoked_at IS NULL', { keyId, accountId })
    .execute();
  return Boolean(res.affected) || ds.getRepository(ApiKey).existsBy({ id: keyId, accountId });
}
