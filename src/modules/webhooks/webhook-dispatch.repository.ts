import type { DataSource } from 'typeorm';
import type { Sql } from '../../db/sql.js';

// The dispatcher's first place in the event log (its cursor is the event log's own, events/event-tail.ts).

type Db = Sql | DataSource;

/** Where a dispatcher without a cursor starts: before the oldest endpoint's first event. */
export async function earliestEndpointStart(m: Db): Promise<string | null> {
  const [row] = (await m.query(`SELECT MIN(after_event_id) AS id FROM webhook_endpoints WHERE deleted_at IS NULL`)) as {
    id: string | number | null;
  }[];
  return row?.id === null || row?.id === undefined ? null : String(row.id);
}
