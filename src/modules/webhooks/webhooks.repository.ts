import type { DataSource } from 'typeorm';
import type { Sql } from '../../db/sql.js';
import type { EventType } from '../events/event-types.js';
import { eventById, type StoredEvent } from '../events/events.repository.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';
import { releaseSlot } from './webhook-slots.repository.js';

// The only code that reads or writes the webhook tables (their delivery slots: webhook-slots.repository.ts;
// the dispatcher's place in the event log: webhook-dispatch.repository.ts).

type Db = Sql | DataSource;

/** An endpoint as stored: where to send, what, and its sealed signing secret. */
export interface StoredEndpoint {
  id: string;
  accountId: string;
  /** The agent key it belongs to (it receives what that key may see); null: the account's. */
  keyId: string | null;
  /**
   * The key that made it (an agent key's endpoint: that key); it stops when that key is revoked.
   * Null only for an owner key's endpoint made before makers were recorded that no record names.
   */
  makerKeyId: string | null;
  url: string;
  eventTypes: EventType[];
  secretSealed: Buffer;
  secretKeyId: string;
  /** It receives only events after this one (the newest when it was made). */
  afterEventId: string;
  createdAt: Date;
}

/** An endpoint as its listing shows it: stopped when the key that made it was revoked. */
export interface ListedEndpoint extends StoredEndpoint {
  makerRevoked: boolean;
}

export type DeliveryStatus = 'PENDING' | 'SUCCEEDED' | 'FAILED';

export interface StoredDelivery {
  id: string;
  endpointId: string;
  /** The endpoint's account, kept on the delivery for the account's tries in flight. */
  accountId: string;
  eventId: string;
  status: DeliveryStatus;
  attempts: number;
  firstAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  createdAt: Date;
  completedAt: Date | null;
}

export interface StoredAttempt {
  deliveryId: string;
  attemptedAt: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

interface EndpointRow {
  id: string;
  account_id: string;
  key_id: string | null;
  maker_key_id: string | null;
  url: string;
  event_types: string;
  secret_sealed: Buffer;
  secret_key_id: string;
  after_event_id: string | number;
  created_at: Date;
}

const toEndpoint = (r: EndpointRow): StoredEndpoint => ({
  id: r.id,
  accountId: r.account_id,
  keyId: r.key_id,
  makerKeyId: r.maker_key_id,
  url: r.url,
  eventTypes: r.event_types.split(',').filter(Boolean) as EventType[],
  secretSealed: r.secret_sealed,
  secretKeyId: r.secret_key_id,
  afterEventId: String(r.after_event_id),
  createdAt: r.created_at,
});

interface DeliveryRow {
  id: string;
  endpoint_id: string;
  account_id: string;
  event_id: string | number;
  status: DeliveryStatus;
  attempts: number;
  first_attempt_at: Date | null;
  next_attempt_at: Date | null;
  created_at: Date;
  completed_at: Date | null;
}

const toDelivery = (r: DeliveryRow): StoredDelivery => ({
  id: r.id,
  endpointId: r.endpoint_id,
  accountId: r.account_id,
  eventId: String(r.event_id),
  status: r.status,
  attempts: Number(r.attempts),
  firstAttemptAt: r.first_attempt_at,
  nextAttemptAt: r.next_attempt_at,
  createdAt: r.created_at,
  completedAt: r.completed_at,
});

/*
 * The one rule of an endpoint's life: it receives events while it is not deleted and the key that
 * made it is not revoked (an agent key's endpoint: that key; a row without a maker: the key it
 * belongs to, if any). The endpoint table is always `e`, joined to its maker as `mk`.
 */
const MAKER_JOIN = 'LEFT JOIN api_keys mk ON mk.id = COALESCE(e.maker_key_id, e.key_id)';
const MAKER_REVOKED = '(mk.revoked_at IS NOT NULL)';
const RECEIVING = '(e.deleted_at IS NULL AND mk.revoked_at IS NULL)';

const toListed = (r: EndpointRow & { maker_revoked: number | string }): ListedEndpoint => ({
  ...toEndpoint(r),
  makerRevoked: Number(r.maker_revoked) === 1,
});

export async function insertEndpoint(m: Db, e: StoredEndpoint): Promise<void> {
  await m.query(
    `INSERT INTO webhook_endpoints (id, account_id, key_id, maker_key_id, url, event_types, secret_sealed, secret_key_id, after_event_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      e.id,
      e.accountId,
      e.keyId,
      e.makerKeyId,
      e.url,
      e.eventTypes.join(','),
      e.secretSealed,
      e.secretKeyId,
      e.afterEventId,
      e.createdAt,
    ],
  );
}

/**
 * How many live endpoints `makerKeyId` has made, locking them (and the gap after them) in the
 * caller's transaction, so two creates of one key cannot both pass its limit.
 */
export async function lockEndpointsMadeBy(m: Db, makerKeyId: string): Promise<number> {
  const rows = (await m.query(
    `SELECT id FROM webhook_endpoints WHERE maker_key_id = ? AND deleted_at IS NULL FOR UPDATE`,
    [makerKeyId],
  )) as { id: string }[];
  return rows.length;
}

/** The viewer's live endpoints, newest first: an agent key's own, every one of the account for its holder. */
export async function visibleEndpoints(m: Db, viewer: Viewer): Promise<ListedEndpoint[]> {
  const { accountId, keyId } = visibleRows(viewer);
  const rows: (EndpointRow & { maker_revoked: number })[] =
    keyId === undefined
      ? await m.query(
          `SELECT e.*, ${MAKER_REVOKED} AS maker_revoked FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.account_id = ? AND e.deleted_at IS NULL ORDER BY e.created_at DESC, e.id`,
          [accountId],
        )
      : await m.query(
          `SELECT e.*, ${MAKER_REVOKED} AS maker_revoked FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.account_id = ? AND e.key_id = ? AND e.deleted_at IS NULL ORDER BY e.created_at DESC, e.id`,
          [accountId, keyId],
        );
  return rows.map(toListed);
}

/** One live endpoint the viewer may see, or null. */
export async function visibleEndpoint(m: Db, viewer: Viewer, id: string): Promise<ListedEndpoint | null> {
  const { accountId, keyId } = visibleRows(viewer);
  const rows: (EndpointRow & { maker_revoked: number })[] =
    keyId === undefined
      ? await m.query(
          `SELECT e.*, ${MAKER_REVOKED} AS maker_revoked FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.id = ? AND e.account_id = ? AND e.deleted_at IS NULL`,
          [id, accountId],
        )
      : await m.query(
          `SELECT e.*, ${MAKER_REVOKED} AS maker_revoked FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.id = ? AND e.account_id = ? AND e.key_id = ? AND e.deleted_at IS NULL`,
          [id, accountId, keyId],
        );
  return rows[0] ? toListed(rows[0]) : null;
}

/** Deleting stops its deliveries; the row stays for the deliveries that name it. */
export async function markEndpointDeleted(m: Db, id: string, at: Date): Promise<void> {
  await m.query(`UPDATE webhook_endpoints SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`, [at, id]);
}

/**
 * The endpoints of these accounts that receive events now (by the account index: the dispatcher
 * reads only the endpoints of the accounts whose events it fans out).
 */
export async function receivingEndpoints(m: Db, accountIds: readonly string[]): Promise<StoredEndpoint[]> {
  if (accountIds.length === 0) return [];
  const rows: EndpointRow[] = await m.query(
    `SELECT e.* FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.account_id IN (?) AND ${RECEIVING}`,
    [accountIds],
  );
  return rows.map(toEndpoint);
}

/** Records the delivery of an event to an endpoint; false when it already exists (once per endpoint and event). */
export async function recordDelivery(
  m: Db,
  d: { id: string; endpointId: string; accountId: string; eventId: string; at: Date },
): Promise<boolean> {
  const res = (await m.query(
    `INSERT IGNORE INTO webhook_deliveries (id, endpoint_id, account_id, event_id, status, attempts, next_attempt_at, created_at) VALUES (?, ?, ?, ?, 'PENDING', 0, ?, ?)`,
    [d.id, d.endpointId, d.accountId, d.eventId, d.at, d.at],
  )) as { affectedRows: number };
  return res.affectedRows === 1;
}

/** The account of a pending delivery, or null when it is done or does not exist. */
export async function pendingDeliveryAccount(m: Db, id: string): Promise<string | null> {
  const [row] = (await m.query(`SELECT account_id FROM webhook_deliveries WHERE id = ? AND status = 'PENDING'`, [
    id,
  ])) as { account_id: string }[];
  return row?.account_id ?? null;
}

/** What one try sends: the delivery, its endpoint (deleted, or its maker revoked: `receiving` false) and its event. */
export interface DeliveryToSend {
  delivery: StoredDelivery;
  endpoint: StoredEndpoint;
  receiving: boolean;
  event: StoredEvent;
}

export async function deliveryToSend(m: Db, id: string): Promise<DeliveryToSend | null> {
  const [d] = (await m.query(`SELECT * FROM webhook_deliveries WHERE id = ?`, [id])) as DeliveryRow[];
  if (!d) return null;
  const [e] = (await m.query(
    `SELECT e.*, ${RECEIVING} AS receiving FROM webhook_endpoints e ${MAKER_JOIN} WHERE e.id = ?`,
    [d.endpoint_id],
  )) as (EndpointRow & { receiving: number | string })[];
  const ev = await eventById(m, String(d.event_id));
  if (!e || !ev) return null;
  return {
    delivery: toDelivery(d),
    endpoint: toEndpoint(e),
    receiving: Number(e.receiving) === 1,
    event: ev,
  };
}

/** One try's outcome and what the delivery becomes after it, written together. */
export interface TryOutcome {
  attemptedAt: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
}

/** Records a try and frees the account's slot it held, in the caller's transaction. */
export async function recordTry(m: Sql, d: { id: string; accountId: string }, t: TryOutcome): Promise<void> {
  const deliveryId = d.id;
  await releaseSlot(m, d.accountId, deliveryId);
  await m.query(
    `INSERT INTO webhook_delivery_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES (?, ?, ?, ?, ?)`,
    [deliveryId, t.attemptedAt, t.statusCode, t.error === null ? null : t.error.slice(0, 300), t.durationMs],
  );
  await m.query(
    `UPDATE webhook_deliveries SET attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, ?), status = ?, next_attempt_at = ?, completed_at = ?, claimed_until = NULL WHERE id = ?`,
    [t.attemptedAt, t.status, t.nextAttemptAt, t.status === 'PENDING' ? null : t.attemptedAt, deliveryId],
  );
}

/** A delivery whose endpoint is gone (or stopped) is closed without a try, freeing its slot. */
export async function closeDelivery(m: Sql, d: { id: string; accountId: string }, at: Date): Promise<void> {
  const id = d.id;
  await releaseSlot(m, d.accountId, id);
  await m.query(
    `UPDATE webhook_deliveries SET status = 'FAILED', completed_at = ?, next_attempt_at = NULL, claimed_until = NULL WHERE id = ? AND status = 'PENDING'`,
    [at, id],
  );
}

/** Sends a delivery again from now: pending, with a fresh 24-hour window of retries. */
export async function reopenDelivery(m: Db, id: string, at: Date): Promise<void> {
  await m.query(
    `UPDATE webhook_deliveries SET status = 'PENDING', first_attempt_at = NULL, completed_at = NULL, next_attempt_at = ? WHERE id = ?`,
    [at, id],
  );
}

/** An endpoint's deliveries, newest event first, at most `limit`. */
export async function deliveriesOf(m: Db, endpointId: string, limit: number): Promise<StoredDelivery[]> {
  const rows: DeliveryRow[] = await m.query(
    `SELECT * FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY event_id DESC LIMIT ?`,
    [endpointId, limit],
  );
  return rows.map(toDelivery);
}

export async function deliveryOf(m: Db, endpointId: string, deliveryId: string): Promise<StoredDelivery | null> {
  const rows: DeliveryRow[] = await m.query(`SELECT * FROM webhook_deliveries WHERE id = ? AND endpoint_id = ?`, [
    deliveryId,
    endpointId,
  ]);
  return rows[0] ? toDelivery(rows[0]) : null;
}

/** The tries of these deliveries, oldest first. */
export async function attemptsOf(m: Db, deliveryIds: string[]): Promise<StoredAttempt[]> {
  if (deliveryIds.length === 0) return [];
  const rows = (await m.query(`SELECT * FROM webhook_delivery_attempts WHERE delivery_id IN (?) ORDER BY id`, [
    deliveryIds,
  ])) as {
    delivery_id: string;
    attempted_at: Date;
    status_code: number | null;
    error: string | null;
    duration_ms: number;
  }[];
  return rows.map((r) => ({
    deliveryId: r.delivery_id,
    attemptedAt: r.attempted_at,
    statusCode: r.status_code,
    error: r.error,
    durationMs: Number(r.duration_ms),
  }));
}

/**
 * Accounts (after `afterAccount`, in id order, at most `limit`) with a pending delivery whose next
 * try was due before `dueBefore`: one entry per account however many it has (the index's groups).
 */
export async function accountsWithOverdue(
  m: Db,
  dueBefore: Date,
  afterAccount: string,
  limit: number,
): Promise<string[]> {
  const rows = (await m.query(
    `SELECT account_id, MIN(next_attempt_at) AS due FROM webhook_deliveries
     WHERE status = 'PENDING' AND account_id > ? AND next_attempt_at < ? GROUP BY status, account_id ORDER BY account_id LIMIT ?`,
    [afterAccount, dueBefore, limit],
  )) as { account_id: string }[];
  return rows.map((r) => r.account_id);
}

/**
 * The account's pending deliveries due by `dueBy` that no run holds at `wallNow`, longest waiting
 * first, at most `limit`.
 */
export async function dueDeliveriesOf(
  m: Db,
  accountId: string,
  dueBy: Date,
  wallNow: Date,
  limit: number,
): Promise<string[]> {
  const rows = (await m.query(
    `SELECT id FROM webhook_deliveries WHERE status = 'PENDING' AND account_id = ? AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until < ?)
     ORDER BY next_attempt_at LIMIT ?`,
    [accountId, dueBy, wallNow, limit],
  )) as { id: string }[];
  return rows.map((r) => r.id);
}
