import type { DataSource, EntityManager } from 'typeorm';
import { hydrate } from '../../db/entity-rows.js';
import { sqlQuery } from '../../db/sql.js';
import { ApiKey, type KeyKind } from './api-key.entity.js';

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
export async function keyCounters(
  manager: EntityManager | DataSource,
  ids: readonly string[],
): Promise<Map<string, KeyCounterRow>> {
  if (ids.length === 0) return new Map();
  const rows: { id: string; net_spent_minor: string | number; active_deployments: string | number }[] =
    await manager.query(`SELECT id, net_spent_minor, active_deployments FROM api_keys WHERE id IN (?)`, [ids]);
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

/** Key `id`, read through `manager` (inside a transaction, as it sees it). Throws when there is none. */
export function getKey(manager: EntityManager | DataSource, id: string): Promise<ApiKey> {
  return manager.getRepository(ApiKey).findOneByOrFail({ id });
}

/** The account's keys of one kind, newest first, revoked ones included. */
export function keysOfAccount(ds: DataSource, accountId: string, kind: KeyKind): Promise<ApiKey[]> {
  return ds.getRepository(ApiKey).find({ where: { accountId, kind }, order: { createdAt: 'DESC' } });
}

/** Agent key `id` of account `accountId`, revoked or not; null when the account has no such agent key. */
export function agentKeyOfAccount(ds: DataSource, accountId: string, id: string): Promise<ApiKey | null> {
  return ds.getRepository(ApiKey).findOneBy({ id, accountId, kind: 'AGENT' });
}

/** OWNER key `id` of whichever account holds it, revoked or not; null when there is none. */
export function ownerKey(ds: DataSource, id: string): Promise<ApiKey | null> {
  return ds.getRepository(ApiKey).findOneBy({ id, kind: 'OWNER' });
}

/** Stamps key `id` revoked at `at`, in the caller's transaction, which already holds its row. */
export async function markKeyRevoked(m: EntityManager, id: string, at: Date): Promise<void> {
  await m.query(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`, [at, id]);
}

/** Stamps the keys given revoked at `at`, in the caller's transaction, which already holds their rows. */
export async function markKeysRevoked(m: EntityManager, ids: readonly string[], at: Date): Promise<void> {
  if (ids.length) await m.query(`UPDATE api_keys SET revoked_at = ? WHERE id IN (?)`, [at, ids]);
}

/** Locks FOR UPDATE the unrevoked keys OWNER key `keyId` issued (see ApiKey.issuedByKeyId), and answers their ids. */
export async function lockLiveKeysIssuedBy(m: EntityManager, keyId: string): Promise<string[]> {
  const rows: { id: string }[] = await m.query(
    `SELECT id FROM api_keys WHERE issued_by_key_id = ? AND revoked_at IS NULL FOR UPDATE`,
    [keyId],
  );
  return rows.map((r) => r.id);
}

/** The ids of every key OWNER key `keyId` issued, revoked or not. */
export async function keysIssuedBy(m: EntityManager, keyId: string): Promise<string[]> {
  const rows: { id: string }[] = await m.query(`SELECT id FROM api_keys WHERE issued_by_key_id = ?`, [keyId]);
  return rows.map((r) => r.id);
}

/** Whether the key is revoked now (or gone): a long-lived reader checks it again as it goes. */
export async function keyRevoked(ds: DataSource, id: string): Promise<boolean> {
  const [row] = (await ds.query(`SELECT revoked_at FROM api_keys WHERE id = ?`, [id])) as { revoked_at: Date | null }[];
  return !row || row.revoked_at !== null;
}

/** Which of the keys given are revoked now: the event hub's one check, each tail period, of every key listening. */
export async function revokedAmong(ds: DataSource, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows: { id: string }[] = await ds.query(`SELECT id FROM api_keys WHERE id IN (?) AND revoked_at IS NOT NULL`, [
    ids,
  ]);
  return rows.map((r) => r.id);
}
