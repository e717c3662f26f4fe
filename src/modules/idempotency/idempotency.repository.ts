import type { DataSource } from 'typeorm';
import { hydrate } from '../../db/entity-rows.js';
import type { Sql } from '../../db/sql.js';
import { IdempotencyRecord } from './idempotency-record.entity.js';

// The only code that reads or writes `idempotency_records`. The insert and the read are part of
// rental admission's first round trip (test/api/rentals-admission.test.ts pins them): keep their
// text as it is.

/** The fields of a record as its first request writes them. */
export type NewIdempotencyRecord = Omit<IdempotencyRecord, 'id'>;

/**
 * Inserts the record unless (scope, key) is already taken; null when it was. The unique index
 * makes a concurrent insert of the same (scope, key) wait for the first one's transaction.
 */
export async function insertIdempotencyRecord(sql: Sql, row: NewIdempotencyRecord): Promise<IdempotencyRecord | null> {
  const res: { affectedRows: number; insertId: number } = await sql.query(
    `INSERT IGNORE INTO idempotency_records (scope, idem_key, request_hash, resource_id, created_at) VALUES (?, ?, ?, ?, ?)`,
    [row.scope, row.idemKey, row.requestHash, row.resourceId, row.createdAt],
  );
  if (res.affectedRows !== 1) return null;
  return Object.assign(new IdempotencyRecord(), { id: String(res.insertId), ...row });
}

/**
 * The record of (scope, key), or null. A plain read: inside a claim it follows an ignored insert,
 * which already waited for the winner to commit, and upgrading the shared lock that insert left
 * would deadlock the claimants still waiting.
 */
export async function findIdempotencyRecord(
  sql: Sql | DataSource,
  scope: string,
  key: string,
): Promise<IdempotencyRecord | null> {
  const rows: Record<string, unknown>[] = await sql.query(
    `SELECT * FROM idempotency_records WHERE scope = ? AND idem_key = ?`,
    [scope, key],
  );
  return rows.length === 1 ? hydrate(sql, IdempotencyRecord, rows[0]) : null;
}

/** Records what the record's request created, in the transaction that created it. */
export async function setIdempotencyResource(sql: Sql, recordId: string, resourceId: string): Promise<void> {
  await sql.query(`UPDATE idempotency_records SET resource_id = ? WHERE id = ?`, [resourceId, recordId]);
}
