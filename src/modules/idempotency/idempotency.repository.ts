import { hydrate } from '../../db/entity-rows.js';
import type { Executor } from '../../db/mysql-store.js';
import { IdempotencyRecord } from './idempotency-record.entity.js';

/** The fields of a record as its first request writes them. */
export type NewIdempotencyRecord = Omit<IdempotencyRecord, 'id'>;

/** The Idempotency-Key records: the aggregate of `idempotency_records`. */
export interface IdempotencyRepository {
  /**
   * Inserts the record unless (scope, key) is already taken; null when it was. A concurrent insert
   * of the same (scope, key) waits for the first one's transaction to end.
   */
  insert(row: NewIdempotencyRecord): Promise<IdempotencyRecord | null>;
  /** The record of (scope, key), or null. */
  find(scope: string, key: string): Promise<IdempotencyRecord | null>;
  /** Records what the record's request created, in the transaction that created it. */
  setResource(recordId: string, resourceId: string): Promise<void>;
}

// The only code that reads or writes `idempotency_records` on MySQL. The insert and the read are
// part of rental admission's first round trip (test/api/rentals-admission.test.ts pins them): keep
// their text as it is.
export class MysqlIdempotencyRepository implements IdempotencyRepository {
  constructor(private readonly sql: Executor) {}

  async insert(row: NewIdempotencyRecord): Promise<IdempotencyRecord | null> {
    // The unique index makes a concurrent insert of the same (scope, key) wait for the first one's transaction.
    const res: { affectedRows: number; insertId: number } = await this.sql.query(
      `INSERT IGNORE INTO idempotency_records (scope, idem_key, request_hash, resource_id, created_at) VALUES (?, ?, ?, ?, ?)`,
      [row.scope, row.idemKey, row.requestHash, row.resourceId, row.createdAt],
    );
    if (res.affectedRows !== 1) return null;
    return Object.assign(new IdempotencyRecord(), { id: String(res.insertId), ...row });
  }

  async find(scope: string, key: string): Promise<IdempotencyRecord | null> {
    // A plain read: inside a claim it follows an ignored insert, which already waited for the
    // winner to commit, and upgrading the shared lock that insert left would deadlock the
    // claimants still waiting.
    const rows: Record<string, unknown>[] = await this.sql.query(
      `SELECT * FROM idempotency_records WHERE scope = ? AND idem_key = ?`,
      [scope, key],
    );
    if (rows.length !== 1) return null;
    // A BIGINT id comes back as a number when it fits; the entity's ids are strings, as insert answers them.
    const record = hydrate(this.sql, IdempotencyRecord, rows[0]);
    record.id = String(record.id);
    return record;
  }

  async setResource(recordId: string, resourceId: string): Promise<void> {
    await this.sql.query(`UPDATE idempotency_records SET resource_id = ? WHERE id = ?`, [resourceId, recordId]);
  }
}
