import { DataSource, EntityManager } from 'typeorm';
import { readMinor } from '../../db/columns.js';
import { hydrate } from '../../db/entity-rows.js';
import type { Executor } from '../../db/mysql-store.js';
import { sqlQuery } from '../../db/sql.js';
import { ApiKey, type KeyKind } from './api-key.entity.js';

// The only code that reads or writes `api_keys` rows, but for the net spend the ledger's postings
// move (accounts/account-money.repository.ts) and the key lock read with its account
// (accounts.repository.ts). The prefix read and the last-used stamp run on every authenticated
// request: they take a pooled connection directly, one statement each.

/** A key's `net_spent_minor` and `active_deployments` counters (BIGINTs, read as numbers). */
export interface KeyCounterRow {
  netSpentMinor: number;
  activeDeployments: number;
}

/** One statement: on a pooled connection (retried as a whole) outside a transaction, else in the caller's. */
function statement<T>(sql: Executor, text: string, params: unknown[]): Promise<T> {
  return sql instanceof DataSource ? sqlQuery<T>(sql, text, params) : sql.query(text, params);
}

/** Writes a new key row, in the caller's transaction. */
export async function insertKey(manager: EntityManager, key: ApiKey): Promise<void> {
  await manager.insert(ApiKey, key);
}

/** The key with this public prefix, read afresh (revoked or not); null when there is none. */
export async function keyByPrefix(sql: Executor, prefix: string): Promise<ApiKey | null> {
  const rows: Record<string, unknown>[] = await statement(sql, `SELECT * FROM api_keys WHERE prefix = ?`, [prefix]);
  return rows.length === 1 ? hydrate(sql, ApiKey, rows[0]) : null;
}

/** Stamps the key's last use, outside any transaction. */
export async function touchKey(sql: Executor, id: string, at: Date): Promise<void> {
  await statement(sql, `UPDATE api_keys SET last_used_at = ? WHERE id = ?`, [at, id]);
}

/** The counters of the keys given, by id; keys that do not exist are left out. */
export async function keyCounters(manager: Executor, ids: readonly string[]): Promise<Map<string, KeyCounterRow>> {
  if (ids.length === 0) return new Map();
  const rows: { id: string; net_spent_minor: string | number; active_deployments: string | number }[] =
    await manager.query(`SELECT id, net_spent_minor, active_deployments FROM api_keys WHERE id IN (?)`, [ids]);
  return new Map(
    rows.map((r) => [
      r.id,
      { netSpentMinor: readMinor(r.net_spent_minor), activeDeployments: readMinor(r.active_deployments) },
    ]),
  );
}

/**
 * Stamps key `keyId` of account `accountId` revoked at `at` unless it already is. Answers
 * whether the key exists on that account (revoked now or before).
 */
export async function revokeKey(
  ds: DataSource | EntityManager,
  accountId: string,
  keyId: string,
  at: Date,
): Promise<boolean> {
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
export function keysOfAccount(ds: DataSource | EntityManager, accountId: string, kind: KeyKind): Promise<ApiKey[]> {
  return ds.getRepository(ApiKey).find({ where: { accountId, kind }, order: { createdAt: 'DESC' } });
}

/** Agent key `id` of account `accountId`, revoked or not; null when the account has no such agent key. */
export function agentKeyOfAccount(
  ds: DataSource | EntityManager,
  accountId: string,
  id: string,
): Promise<ApiKey | null> {
  return ds.getRepository(ApiKey).findOneBy({ id, accountId, kind: 'AGENT' });
}

/** OWNER key `id` of whichever account holds it, revoked or not; null when there is none. */
export function ownerKey(ds: DataSource | EntityManager, id: string): Promise<ApiKey | null> {
  return ds.getRepository(ApiKey).findOneBy({ id, kind: 'OWNER' });
}

/** Stamps key `id` revoked at `at`, in the caller's transaction, which already holds its row. */
export async function markKeyRevoked(m: Executor, id: string, at: Date): Promise<void> {
  await m.query(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`, [at, id]);
}

/** Stamps the keys given revoked at `at`, in the caller's transaction, which already holds their rows. */
export async function markKeysRevoked(m: Executor, ids: readonly string[], at: Date): Promise<void> {
  if (ids.length) await m.query(`UPDATE api_keys SET revoked_at = ? WHERE id IN (?)`, [at, ids]);
}

/** Locks FOR UPDATE the unrevoked keys OWNER key `keyId` issued (see ApiKey.issuedByKeyId), and answers their ids. */
export async function lockLiveKeysIssuedBy(m: Executor, keyId: string): Promise<string[]> {
  const rows: { id: string }[] = await m.query(
    `SELECT id FROM api_keys WHERE issued_by_key_id = ? AND revoked_at IS NULL FOR UPDATE`,
    [keyId],
  );
  return rows.map((r) => r.id);
}

/** The ids of every key OWNER key `keyId` issued, revoked or not. */
export async function keysIssuedBy(m: Executor, keyId: string): Promise<string[]> {
  const rows: { id: string }[] = await m.query(`SELECT id FROM api_keys WHERE issued_by_key_id = ?`, [keyId]);
  return rows.map((r) => r.id);
}

/** Whether the key is revoked now (or gone): a long-lived reader checks it again as it goes. */
export async function keyRevoked(ds: Executor, id: string): Promise<boolean> {
  const [row] = (await ds.query(`SELECT revoked_at FROM api_keys WHERE id = ?`, [id])) as { revoked_at: Date | null }[];
  return !row || row.revoked_at !== null;
}

/**
 * Moves the key's `active_deployments` counter (migrations/1763800009000-KeyCounters.ts) by `delta`
 * in the caller's transaction: how the rental states count a key's rentals holding a slot. Issued
 * at the call (admission's pipelined transaction carries it); no statement for a delta of 0.
 */
export async function adjustActiveDeployments(m: Executor, keyId: string, delta: number): Promise<void> {
  if (delta === 0) return;
  await m.query(`UPDATE api_keys SET active_deployments = active_deployments + ? WHERE id = ?`, [delta, keyId]);
}

/** Which of the keys given are revoked now: the event hub's one check, each tail period, of every key listening. */
export async function revokedAmong(ds: Executor, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows: { id: string }[] = await ds.query(`SELECT id FROM api_keys WHERE id IN (?) AND revoked_at IS NOT NULL`, [
    ids,
  ]);
  return rows.map((r) => r.id);
}

/**
 * The rows of `api_keys`: part of the accounts aggregate (AccountsRepository.keys), whose account
 * row lock comes before any key's. The net spend is moved by the ledger's postings
 * (AccountsRepository.money), the count of rentals holding a slot by the rental state changes
 * ({@link adjustActiveDeployments}).
 */
export interface KeysRepository {
  /** Writes a new key row. A prefix already taken is refused with an error whose `code` is ER_DUP_ENTRY. */
  insert(key: ApiKey): Promise<void>;
  /** The key with this public prefix, revoked or not, as last committed; null when there is none. Stands alone. */
  byPrefix(prefix: string): Promise<ApiKey | null>;
  /** Stamps the key's last use. Stands alone (authentication's coarse, best-effort write). */
  touch(id: string, at: Date): Promise<void>;
  /** The counters of the keys given, by id; keys that do not exist are left out. Read under the account lock, they hold until commit. */
  counters(ids: readonly string[]): Promise<Map<string, KeyCounterRow>>;
  /**
   * Stamps key `keyId` of account `accountId` revoked at `at` unless it already is (an earlier
   * revocation keeps its time). Answers whether the key exists on that account. Stands alone.
   */
  revoke(accountId: string, keyId: string, at: Date): Promise<boolean>;
  /** Key `id`, as the caller's transaction sees it; rejects when there is none. */
  get(id: string): Promise<ApiKey>;
  /** The account's keys of one kind, newest first, revoked ones included. */
  ofAccount(accountId: string, kind: KeyKind): Promise<ApiKey[]>;
  /** Agent key `id` of account `accountId`, revoked or not; null for an owner key or another account's. */
  agentKeyOfAccount(accountId: string, id: string): Promise<ApiKey | null>;
  /** OWNER key `id` of whichever account holds it, revoked or not; null when there is none. */
  ownerKey(id: string): Promise<ApiKey | null>;
  /** Stamps key `id` revoked at `at`; in a transaction that already holds its row (after the account lock). */
  markRevoked(id: string, at: Date): Promise<void>;
  /** Stamps the keys given revoked at `at` (none: nothing); in a transaction that already holds their rows. */
  markManyRevoked(ids: readonly string[], at: Date): Promise<void>;
  /** Locks FOR UPDATE the unrevoked keys OWNER key `keyId` issued and answers their ids; in a transaction, after the account lock. */
  lockLiveIssuedBy(keyId: string): Promise<string[]>;
  /** The ids of every key OWNER key `keyId` issued, revoked or not. */
  issuedBy(keyId: string): Promise<string[]>;
  /** Whether the key is revoked now, or gone. */
  isRevoked(id: string): Promise<boolean>;
  /** Which of the keys given are revoked now (none given: none). */
  revokedAmong(ids: readonly string[]): Promise<string[]>;
  /**
   * Moves the key's count of rentals holding a slot by `delta` (none for 0), in the rental state
   * change's transaction; issued at the call, so it travels with the statements issued with it.
   */
  adjustActiveDeployments(keyId: string, delta: number): Promise<void>;
}

/** TypeORM's entity calls run on the DataSource or a transaction's manager; admission's pipelined transaction needs none. */
function managerOf(sql: Executor): EntityManager {
  if (sql instanceof DataSource) return sql.manager;
  if (sql instanceof EntityManager) return sql;
  throw new Error('api_keys entity reads and writes do not run in a pipelined transaction');
}

export class MysqlKeysRepository implements KeysRepository {
  constructor(private readonly sql: Executor) {}

  insert(key: ApiKey): Promise<void> {
    return insertKey(managerOf(this.sql), key);
  }

  byPrefix(prefix: string): Promise<ApiKey | null> {
    return keyByPrefix(this.sql, prefix);
  }

  touch(id: string, at: Date): Promise<void> {
    return touchKey(this.sql, id, at);
  }

  counters(ids: readonly string[]): Promise<Map<string, KeyCounterRow>> {
    return keyCounters(this.sql, ids);
  }

  revoke(accountId: string, keyId: string, at: Date): Promise<boolean> {
    return revokeKey(managerOf(this.sql), accountId, keyId, at);
  }

  get(id: string): Promise<ApiKey> {
    return getKey(managerOf(this.sql), id);
  }

  ofAccount(accountId: string, kind: KeyKind): Promise<ApiKey[]> {
    return keysOfAccount(managerOf(this.sql), accountId, kind);
  }

  agentKeyOfAccount(accountId: string, id: string): Promise<ApiKey | null> {
    return agentKeyOfAccount(managerOf(this.sql), accountId, id);
  }

  ownerKey(id: string): Promise<ApiKey | null> {
    return ownerKey(managerOf(this.sql), id);
  }

  markRevoked(id: string, at: Date): Promise<void> {
    return markKeyRevoked(this.sql, id, at);
  }

  markManyRevoked(ids: readonly string[], at: Date): Promise<void> {
    return markKeysRevoked(this.sql, ids, at);
  }

  lockLiveIssuedBy(keyId: string): Promise<string[]> {
    return lockLiveKeysIssuedBy(this.sql, keyId);
  }

  issuedBy(keyId: string): Promise<string[]> {
    return keysIssuedBy(this.sql, keyId);
  }

  isRevoked(id: string): Promise<boolean> {
    return keyRevoked(this.sql, id);
  }

  revokedAmong(ids: readonly string[]): Promise<string[]> {
    return revokedAmong(this.sql, ids);
  }

  adjustActiveDeployments(keyId: string, delta: number): Promise<void> {
    return adjustActiveDeployments(this.sql, keyId, delta);
  }
}
