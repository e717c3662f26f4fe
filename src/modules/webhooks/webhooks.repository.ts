import type { DataSource } from 'typeorm';
import type { Sql } from '../../db/sql.js';
import type { EventType } from '../events/event-types.js';
import { eventById, type StoredEvent } from '../events/events.repository.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';

// The only code that reads or writes the webhook tables.

type Db = Sql | DataSource;

/** An endpoint as stored: where to send, what, and its sealed signing secret. */
export interface StoredEndpoint {
  id: string;
  accountId: string;
  /** The agent key it belongs to (it receives what that key may see); null: the account's. */
  keyId: string | null;
  url: string;
  eventTypes: EventType[];
  secretSealed: Buffer;
  secretKeyId: string;
  /** It receives only events after this one (the newest when it was made). */
  afterEventId: string;
  createdAt: Date;
}

export type DeliveryStatus = 'PENDING' | 'SUCCEEDED' | 'FAILED';

export interface StoredDelivery {
  id: string;
  endpointId: string;
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
  eventId: String(r.event_id),
  status: r.status,
  attempts: Number(r.attempts),
  firstAttemptAt: r.first_attempt_at,
  nextAttemptAt: r.next_attempt_at,
  createdAt: r.created_at,
  completedAt: r.completed_at,
});

export async function insertEndpoint(m: Db, e: StoredEndpoint): Promise<void> {
  await m.query(
    `INSERT INTO webhook_endpoints (id, account_id, key_id, url, event_types, secret_sealed, secret_key_id, after_event_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [e.id, e.accountId, e.keyId, e.url, e.eventTypes.join(','), e.secretSealed, e.secretKeyId, e.afterEventId, e.createdAt],
  );
}

/** The viewer's live endpoints, newest first: an agent key's own, every one of the account for its holder. */
export async function visibleEndpoints(m: Db, viewer: Viewer): Promise<StoredEndpoint[]> {
  const { accountId, keyId } = visibleRows(viewer);
  const rows: EndpointRow[] =
    keyId === undefined
      ? await m.query(`SELECT * FROM webhook_endpoints WHERE account_id = ? AND deleted_at IS NULL ORDER BY created_at DESC, id`, [accountId])
      : await m.query(`SELECT * FROM webhook_endpoints WHERE account_id = ? AND key_id = ? AND deleted_at IS NULL ORDER BY created_at DESC, id`, [accountId, keyId]);
  return rows.map(toEndpoint);
}

/** One live endpoint the viewer may see, or null. */
export async function visibleEndpoint(m: Db, viewer: Viewer, id: string): Promise<StoredEndpoint | null> {
  const { accountId, keyId } = visibleRows(viewer);
  const rows: EndpointRow[] =
    keyId === undefined
      ? await m.query(`SELECT * FROM webhook_endpoints WHERE id = ? AND account_id = ? AND deleted_at IS NULL`, [id, accountId])
      : await m.query(`SELECT * FROM webhook_endpoints WHERE id = ? AND account_id = ? AND key_id = ? AND deleted_at IS NULL`, [id, accountId, keyId]);
  return rows[0] ? toEndpoint(rows[0]) : null;
}

/** Deleting stops its deliveries; the row stays for the deliveries that name it. */
export async function markEndpointDeleted(m: Db, id: string, at: Date): Promise<void> {
  await m.query(`UPDATE webhook_endpoints SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`, [at, id]);
}

/** Endpoints that receive events now: not deleted, and not of a revoked agent key. */
export async function receivingEndpoints(m: Db): Promise<StoredEndpoint[]> {
  const rows: EndpointRow[] = await m.query(
    `SELECT e.* FROM webhook_endpoints e LEFT JOIN api_keys k ON k.id = e.key_id
     WHERE e.deleted_at IS NULL AND (e.key_id IS NULL OR k.revoked_at IS NULL)`,
  );
  return rows.map(toEndpoint);
}

/** The last event the dispatcher fanned out, or null before its first run. */
export async function dispatchCursor(m: Db, name: string): Promise<string | null> {
  const [row] = (await m.query(`SELECT last_event_id FROM webhook_cursor WHERE name = ?`, [name])) as { last_event_id: string | number }[];
  return row ? String(row.last_event_id) : null;
}

/** Moves the dispatcher's cursor forward to `eventId` (never back), in the caller's transaction. */
export async function advanceDispatchCursor(m: Db, name: string, eventId: string): Promise<void> {
  await m.query(
    `INSERT INTO webhook_cursor (name, last_event_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE last_event_id = GREATEST(last_event_id, VALUES(last_event_id))`,
    [name, eventId],
  );
}

/** Records the delivery of an event to an endpoint; false when it already exists (once per endpoint and event). */
export async function recordDelivery(m: Db, d: { id: string; endpointId: string; eventId: string; at: Date }): Promise<boolean> {
  const res = (await m.query(
    `INSERT IGNORE INTO webhook_deliveries (id, endpoint_id, event_id, status, attempts, next_attempt_at, created_at) VALUES (?, ?, ?, 'PENDING', 0, ?, ?)`,
    [d.id, d.endpointId, d.eventId, d.at, d.at],
  )) as { affectedRows: number };
  return res.affectedRows === 1;
}

/**
 * Takes a pending delivery for one try until `until`, so two runs of its job (a retry and a
 * redelivery) never send at once; false when it is done or another run holds it.
 */
export async function claimDelivery(m: Db, id: string, now: Date, until: Date): Promise<boolean> {
  const res = (await m.query(
    `UPDATE webhook_deliveries SET claimed_until = ? WHERE id = ? AND status = 'PENDING' AND (claimed_until IS NULL OR claimed_until < ?)`,
    [until, id, now],
  )) as { affectedRows: number };
  return res.affectedRows === 1;
}

/** What one try sends: the delivery, its endpoint (deleted or of a revoked key: `receiving` false) and its event. */
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
    `SELECT e.*, (e.deleted_at IS NULL AND (e.key_id IS NULL OR k.revoked_at IS NULL)) AS receiving
     FROM webhook_endpoints e LEFT JOIN api_keys k ON k.id = e.key_id WHERE e.id = ?`,
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

export async function recordTry(m: Sql, deliveryId: string, t: TryOutcome): Promise<void> {
  await m.query(`INSERT INTO webhook_delivery_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES (?, ?, ?, ?, ?)`, [
    deliveryId,
    t.attemptedAt,
    t.statusCode,
    t.error === null ? null : t.error.slice(0, 300),
    t.durationMs,
  ]);
  await m.query(
    `UPDATE webhook_deliveries SET attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, ?), status = ?, next_attempt_at = ?, completed_at = ?, claimed_until = NULL WHERE id = ?`,
    [t.attemptedAt, t.status, t.nextAttemptAt, t.status === 'PENDING' ? null : t.attemptedAt, deliveryId],
  );
}

/** A delivery whose endpoint is gone is closed without a try. */
export async function closeDelivery(m: Db, id: string, at: Date): Promise<void> {
  await m.query(`UPDATE webhook_deliveries SET status = 'FAILED', completed_at = ?, next_attempt_at = NULL, claimed_until = NULL WHERE id = ? AND status = 'PENDING'`, [at, id]);
}

/** Sends a delivery again from now: pending, with a fresh 24-hour window of retries. */
export async function reopenDelivery(m: Db, id: string, at: Date): Promise<void> {
  await m.query(`UPDATE webhook_deliveries SET status = 'PENDING', first_attempt_at = NULL, completed_at = NULL, next_attempt_at = ? WHERE id = ?`, [at, id]);
}

/** An endpoint's deliveries, newest event first, at most `limit`. */
export async function deliveriesOf(m: Db, endpointId: string, limit: number): Promise<StoredDelivery[]> {
  const rows: DeliveryRow[] = await m.query(`SELECT * FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY event_id DESC LIMIT ?`, [endpointId, limit]);
  return rows.map(toDelivery);
}

export async function deliveryOf(m: Db, endpointId: string, deliveryId: string): Promise<StoredDelivery | null> {
  const rows: DeliveryRow[] = await m.query(`SELECT * FROM webhook_deliveries WHERE id = ? AND endpoint_id = ?`, [deliveryId, endpointId]);
  return rows[0] ? toDelivery(rows[0]) : null;
}

/** The tries of these deliveries, oldest first. */
export async function attemptsOf(m: Db, deliveryIds: string[]): Promise<StoredAttempt[]> {
  if (deliveryIds.length === 0) return [];
  const rows = (await m.query(`SELECT * FROM webhook_delivery_attempts WHERE delivery_id IN (?) ORDER BY id`, [deliveryIds])) as {
    delivery_id: string;
    attempted_at: Date;
    status_code: number | null;
    error: string | null;
    duration_ms: number;
  }[];
  return rows.map((r) => ({ deliveryId: r.delivery_id, attemptedAt: r.attempted_at, statusCode: r.status_code, error: r.error, durationMs: Number(r.duration_ms) }));
}

/**
 * Pending deliveries whose next try is overdue by the time given and that no run holds: their
 * job was lost (a crash between recording a try and scheduling the next), or is merely late.
 */
export async function overdueDeliveries(m: Db, dueBefore: Date, now: Date, limit: number): Promise<string[]> {
  const rows = (await m.query(
    `SELECT id FROM webhook_deliveries WHERE status = 'PENDING' AND next_attempt_at < ? AND (claimed_until IS NULL OR claimed_until < ?) ORDER BY next_attempt_at LIMIT ?`,
    [dueBefore, now, limit],
  )) as { id: string }[];
  return rows.map((r) => r.id);
}

/** `endpointId:eventId` of every delivery of the events after `afterId` up to `toId`. */
export async function deliveredPairs(m: Db, afterId: string, toId: string): Promise<string[]> {
  const rows = (await m.query(`SELECT endpoint_id, event_id FROM webhook_deliveries WHERE event_id > ? AND event_id <= ?`, [afterId, toId])) as {
    endpoint_id: string;
    event_id: string | number;
  }[];
  return rows.map((r) => `${r.endpoint_id}:${String(r.event_id)}`);
}

/** Where a dispatcher without a cursor starts: before the oldest endpoint's first event. */
export async function earliestEndpointStart(m: Db): Promise<string | null> {
  const [row] = (await m.query(`SELECT MIN(after_event_id) AS id FROM webhook_endpoints WHERE deleted_at IS NULL`)) as { id: string | number | null }[];
  return row?.id === null || row?.id === undefined ? null : String(row.id);
}
