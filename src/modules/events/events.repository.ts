import type { DataSource } from 'typeorm';
import type { Sql } from '../../db/sql.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';
import { AGENT_ACCOUNT_EVENTS, type EventType } from './event-types.js';

// The only code that reads or writes `events`.

/** An event as it is written: what happened, to whom, and the view of it at that moment. */
export interface NewEvent {
  type: EventType;
  accountId: string;
  /** The key whose rental it concerns; null for an account event. */
  keyId: string | null;
  rentalId: string | null;
  data: unknown;
  at: Date;
}

/** An event as it is read. */
export interface StoredEvent {
  id: string;
  type: EventType;
  accountId: string;
  keyId: string | null;
  rentalId: string | null;
  data: unknown;
  createdAt: Date;
}

/** Writes one event in the caller's transaction. */
export async function recordEvent(m: Sql, e: NewEvent): Promise<void> {
  await m.query(`INSERT INTO events (type, account_id, key_id, rental_id, data, created_at) VALUES (?, ?, ?, ?, ?, ?)`, [
    e.type,
    e.accountId,
    e.keyId,
    e.rentalId,
    JSON.stringify(e.data),
    e.at,
  ]);
}

interface EventRow {
  id: string | number;
  type: EventType;
  account_id: string;
  key_id: string | null;
  rental_id: string | null;
  data: string | object;
  created_at: Date;
}

const toEvent = (r: EventRow): StoredEvent => ({
  id: String(r.id),
  type: r.type,
  accountId: r.account_id,
  keyId: r.key_id,
  rentalId: r.rental_id,
  data: typeof r.data === 'string' ? JSON.parse(r.data) : r.data,
  createdAt: r.created_at,
});

/**
 * The viewer's events after `afterId` (exclusive), oldest first, at most `limit`: the one
 * visibility rule (keys/visibility.ts) over the rentals' events, and the account events meant for
 * agents ({@link AGENT_ACCOUNT_EVENTS}) besides.
 */
export async function eventsAfter(ds: DataSource, viewer: Viewer, afterId: string, limit: number): Promise<StoredEvent[]> {
  const { accountId, keyId } = visibleRows(viewer);
  const rows: EventRow[] =
    keyId === undefined
      ? await ds.query(`SELECT * FROM events WHERE account_id = ? AND id > ? ORDER BY id LIMIT ?`, [accountId, afterId, limit])
      : await ds.query(
          `SELECT * FROM events WHERE account_id = ? AND id > ? AND (key_id = ? OR (key_id IS NULL AND type IN (?))) ORDER BY id LIMIT ?`,
          [accountId, afterId, keyId, AGENT_ACCOUNT_EVENTS, limit],
        );
  return rows.map(toEvent);
}

/** Whether `viewer` may see `e` (the same rule as {@link eventsAfter}, for events fanned out in memory). */
export function visibleEvent(viewer: Viewer, e: Pick<StoredEvent, 'accountId' | 'keyId' | 'type'>): boolean {
  const { accountId, keyId } = visibleRows(viewer);
  if (e.accountId !== accountId) return false;
  return keyId === undefined || e.keyId === keyId || (e.keyId === null && AGENT_ACCOUNT_EVENTS.includes(e.type));
}

/** Every event after `afterId`, oldest first, at most `limit` (the in-process fan-out reads these). */
export async function allEventsAfter(ds: DataSource, afterId: string, limit: number): Promise<StoredEvent[]> {
  const rows: EventRow[] = await ds.query(`SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?`, [afterId, limit]);
  return rows.map(toEvent);
}

/** The newest event id, or '0' when there is none: where a reader without an id starts. */
export async function latestEventId(ds: DataSource): Promise<string> {
  const [row] = (await ds.query(`SELECT MAX(id) AS id FROM events`)) as { id: string | number | null }[];
  return row?.id === null || row?.id === undefined ? '0' : String(row.id);
}

/** One event by id, or null. */
export async function eventById(m: Sql | DataSource, id: string): Promise<StoredEvent | null> {
  const [row] = (await m.query(`SELECT * FROM events WHERE id = ?`, [id])) as EventRow[];
  return row ? toEvent(row) : null;
}
