import type { DataSource } from 'typeorm';
import type { Sql } from '../../db/sql.js';

// The dispatcher's place in the event log: its cursor, and which events it has already fanned out.

type Db = Sql | DataSource;

/** The last event the dispatcher fanned out, or null before its first run. */
export async function dispatchCursor(m: Db, name: string): Promise<string | null> {
  const [row] = (await m.query(`SELECT last_event_id FROM webhook_cursor WHERE name = ?`, [name])) as {
    last_event_id: string | number;
  }[];
  return row ? String(row.last_event_id) : null;
}

/** Moves the dispatcher's cursor forward to `eventId` (never back), in the caller's transaction. */
export async function advanceDispatchCursor(m: Db, name: string, eventId: string): Promise<void> {
  await m.query(
    `INSERT INTO webhook_cursor (name, last_event_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE last_event_id = GREATEST(last_event_id, VALUES(last_event_id))`,
    [name, eventId],
  );
}

/**
 * Which of the events after `afterId` up to `toId` have any delivery. An event's deliveries are
 * written in one transaction, so one with any was fanned out; one distinct id per event is read.
 */
export async function eventsWithDeliveries(m: Db, afterId: string, toId: string): Promise<Set<string>> {
  const rows = (await m.query(`SELECT DISTINCT event_id FROM webhook_deliveries WHERE event_id > ? AND event_id <= ?`, [
    afterId,
    toId,
  ])) as { event_id: string | number }[];
  return new Set(rows.map((r) => String(r.event_id)));
}

/** Where a dispatcher without a cursor starts: before the oldest endpoint's first event. */
export async function earliestEndpointStart(m: Db): Promise<string | null> {
  const [row] = (await m.query(`SELECT MIN(after_event_id) AS id FROM webhook_endpoints WHERE deleted_at IS NULL`)) as {
    id: string | number | null;
  }[];
  return row?.id === null || row?.id === undefined ? null : String(row.id);
}
