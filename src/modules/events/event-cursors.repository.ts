import type { Executor } from '../../db/mysql-store.js';
import type { Sql } from '../../db/sql.js';

// The only code that reads or writes `event_cursors`: where each named consumer of the event log
// stands (event-tail.ts holds the rule). The events aggregate's repository (events.repository.ts) carries them.

type Db = Executor;

/** A consumer's place in the log: the newest id it was given, and the ids below it it has not seen. */
export interface TailPosition {
  /** The highest log-wide id handed to the consumer ('0' before any). */
  lastId: string;
  /** Ids at or below {@link lastId}, within the lookback, that had not committed when the tail passed them; ascending. */
  unseen: string[];
}

/** A position as read, with the version that tells whether another consumer of the name has moved it since. */
export interface StoredPosition {
  position: TailPosition;
  version: string;
}

interface CursorRow {
  last_event_id: string | number;
  unseen_ids: string;
  version: string | number;
}

const ids = (text: string): string[] => (text === '' ? [] : text.split(','));

/** Where consumer `name` stands, or null before its first pass. */
export async function readCursor(m: Db, name: string): Promise<StoredPosition | null> {
  const [row] = (await m.query(`SELECT last_event_id, unseen_ids, version FROM event_cursors WHERE name = ?`, [
    name,
  ])) as CursorRow[];
  return row
    ? { position: { lastId: String(row.last_event_id), unseen: ids(row.unseen_ids) }, version: String(row.version) }
    : null;
}

/** Starts consumer `name` after `lastId`, unless it has started already (another process came first). */
export async function createCursor(m: Db, name: string, lastId: string): Promise<void> {
  await m.query(`INSERT IGNORE INTO event_cursors (name, last_event_id, unseen_ids, version) VALUES (?, ?, '', 0)`, [
    name,
    lastId,
  ]);
}

/**
 * Moves consumer `name` to `to` if it is still at `version`, in the caller's transaction; false
 * when another consumer of the name moved it first. The row stays locked until the caller commits,
 * so two consumers of one name take turns, and on a Galera cluster the write is what certification
 * sees conflict.
 */
export async function claimCursor(m: Sql, name: string, version: string, to: TailPosition): Promise<boolean> {
  const res = (await m.query(
    `UPDATE event_cursors SET last_event_id = ?, unseen_ids = ?, version = version + 1 WHERE name = ? AND version = ?`,
    [to.lastId, to.unseen.join(','), name, version],
  )) as { affectedRows: number };
  return Number(res.affectedRows) === 1;
}
