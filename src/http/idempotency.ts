import type { EntityManager } from 'typeorm';
import { IDEMPOTENCY_KEY_HINT } from '../../clients/sdk/src/hints.js';
import type { Clock } from '../clock.js';
import { hydrate } from '../db/entity-rows.js';
import type { Sql } from '../db/sql.js';
import { AppError } from '../errors/app-error.js';
import { sha256Hex } from '../modules/keys/tokens.js';
import { IdempotencyRecord } from './idempotency-record.entity.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Validates an Idempotency-Key header; a missing or malformed key is a 400 that says what the
 * header is and how to make one (docs/api.md, Idempotency).
 */
export function requireIdempotencyKey(value: string | undefined, opts: { uuid?: boolean } = {}): string {
  if (value === undefined || value === '') throw new AppError('INVALID_REQUEST', `The Idempotency-Key header is required. ${IDEMPOTENCY_KEY_HINT}`);
  if (opts.uuid) {
    if (!UUID_RE.test(value)) throw new AppError('INVALID_REQUEST', `The Idempotency-Key header must be a UUID here. ${IDEMPOTENCY_KEY_HINT}`);
  } else if (value.length > 128 || /[\x00-\x1f\x7f]/.test(value)) {
    // Node has already refused what HTTP forbids in a header; control characters are all that is left to rule out.
    throw new AppError('INVALID_REQUEST', `The Idempotency-Key header must be 1 to 128 printable characters. ${IDEMPOTENCY_KEY_HINT}`);
  }
  return value;
}

/** Stable hash of a JSON value: object keys sorted, so field order does not matter. */
export function requestHash(body: unknown): string {
  const canon = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(canon);
    if (v && typeof v === 'object') {
      return Object.fromEntries(
        Object.keys(v as object)
          .sort()
          .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
          .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return sha256Hex(JSON.stringify(canon(body ?? {})));
}

export type Claim =
  | { kind: 'new'; record: IdempotencyRecord }
  | { kind: 'replay'; record: IdempotencyRecord };

/**
 * Claims (scope, key) inside the caller's transaction. The unique index serialises concurrent
 * claims: a second claimant blocks on the first one's row until it commits (and then sees a
 * replay) or rolls back (and then claims it itself). A changed body is IDEMPOTENCY_CONFLICT.
 * A caller that knows the id of what it is about to create passes `resourceId`, so the claim and
 * its resource are written in one statement (the transaction makes them true together).
 */
export async function claimIdempotencyKey(
  manager: Sql,
  clock: Clock,
  scope: string,
  key: string,
  hash: string,
  resourceId: string | null = null,
): Promise<Claim> {
  const createdAt = clock.now();
  const res: { affectedRows: number; insertId: number } = await manager.query(
    `INSERT IGNORE INTO idempotency_records (scope, idem_key, request_hash, resource_id, created_at) VALUES (?, ?, ?, ?, ?)`,
    [scope, key, hash, resourceId, createdAt],
  );
  if (res.affectedRows === 1) {
    return { kind: 'new', record: Object.assign(new IdempotencyRecord(), { id: String(res.insertId), scope, idemKey: key, requestHash: hash, resourceId, createdAt }) };
  }
  // No locking read here: when the insert was ignored, it had already waited for the winner to
  // commit; upgrading the shared lock it left would deadlock the waiting claimants.
  const rows: Record<string, unknown>[] = await manager.query(`SELECT * FROM idempotency_records WHERE scope = ? AND idem_key = ?`, [scope, key]);
  if (rows.length !== 1) throw new Error(`idempotency record ${scope}/${key} was neither inserted nor found`);
  const record = hydrate(manager, IdempotencyRecord, rows[0]);
  if (record.requestHash !== hash) {
    throw new AppError('IDEMPOTENCY_CONFLICT', 'This Idempotency-Key was already used with a different request body.');
  }
  return { kind: 'replay', record };
}

export async function setIdempotencyResource(manager: EntityManager, record: IdempotencyRecord, resourceId: string): Promise<void> {
  await manager.update(IdempotencyRecord, { id: record.id }, { resourceId });
  record.resourceId = resourceId;
}
