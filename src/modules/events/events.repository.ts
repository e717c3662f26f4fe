import type { Executor } from '../../db/mysql-store.js';
import { inOpenTransaction, SqlTransaction, type Sql } from '../../db/sql.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';
import {
  claimCursor,
  createCursor,
  readCursor,
  type StoredPosition,
  type TailPosition,
} from './event-cursors.repository.js';
import { AGENT_ACCOUNT_EVENTS, type EventType } from './event-types.js';

// With event-cursors.repository.ts, the only code that reads or writes `events` and `event_sequences`.
//
// Each event has two numbers. `id`, global, orders the whole log for the readers inside the
// service (the hub's tail, webhook dispatch, notifications). `seq`, its account's own count, is
// the id agents and owners see (page ids, `after`, `nextAfter`, Last-Event-ID): it moves only with
// the account's own events, so it says nothing of anyone else's activity.

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
  /** The log-wide number, for the service's own readers; never shown to agents. */
  id: string;
  /**
   * Its number in its account: what the API shows as the event's id. Null only for an event
   * written, during an upgrade, by a process of a version before these numbers.
   */
  seq: string | null;
  type: EventType;
  accountId: string;
  keyId: string | null;
  rentalId: string | null;
  data: unknown;
  createdAt: Date;
}

/** An event with its number in its account (every event but those an older version wrote mid-upgrade). */
export type NumberedEvent = StoredEvent & { seq: string };

/** Whether `e` has its number in its account, so an agent can be shown it and resume after it. */
export function isNumbered(e: StoredEvent): e is NumberedEvent {
  return e.seq !== null;
}

/**
 * Takes the account's next number: LAST_INSERT_ID(expr) leaves it on this connection for the
 * insert that follows. The counter row stays locked until the caller commits, so one account's
 * events are numbered in the order they commit, and a rollback gives its number back.
 */
const NEXT_SEQ = `INSERT INTO event_sequences (account_id, seq) VALUES (?, LAST_INSERT_ID(1)) ON DUPLICATE KEY UPDATE seq = LAST_INSERT_ID(seq + 1)`;
const INSERT_EVENT = `INSERT INTO events (type, account_id, key_id, rental_id, data, created_at, seq) VALUES (?, ?, ?, ?, ?, ?, LAST_INSERT_ID())`;

/**
 * Writes one event in the caller's transaction, numbered in its account. Both statements go in
 * one request (pipelined, or one multi-statement query), so the number is taken and used on the
 * same connection at no extra round trip. Event writers take the counter after their other locks
 * (an event is written with, or after, the change it reports).
 */
export async function recordEvent(m: Sql, e: NewEvent): Promise<void> {
  const values = [e.type, e.accountId, e.keyId, e.rentalId, JSON.stringify(e.data), e.at];
  if (m instanceof SqlTransaction) await Promise.all([m.query(NEXT_SEQ, [e.accountId]), m.query(INSERT_EVENT, values)]);
  else await m.query(`${NEXT_SEQ};\n${INSERT_EVENT}`, [e.accountId, ...values]);
}

interface EventRow {
  id: string | number;
  seq: string | number | null;
  type: EventType;
  account_id: string;
  key_id: string | null;
  rental_id: string | null;
  data: string | object;
  created_at: Date;
}

const toEvent = (r: EventRow): StoredEvent => ({
  id: String(r.id),
  seq: r.seq === null ? null : String(r.seq),
  type: r.type,
  accountId: r.account_id,
  keyId: r.key_id,
  rentalId: r.rental_id,
  data: typeof r.data === 'string' ? JSON.parse(r.data) : r.data,
  createdAt: r.created_at,
});

/**
 * The viewer's events after number `afterSeq` of its account (exclusive), oldest first, at most
 * `limit`: the one visibility rule (keys/visibility.ts) over the rentals' events, and the account
 * events meant for agents ({@link AGENT_ACCOUNT_EVENTS}) besides.
 */
export async function eventsAfter(
  ds: Executor,
  viewer: Viewer,
  afterSeq: string,
  limit: number,
): Promise<NumberedEvent[]> {
  return visibleEvents(ds, viewer, { afterSeq }, limit);
}

/** The viewer's newest `limit` events (by the same rule as {@link eventsAfter}), oldest first. */
export async function latestEvents(ds: Executor, viewer: Viewer, limit: number): Promise<NumberedEvent[]> {
  return (await visibleEvents(ds, viewer, { newest: true }, limit)).reverse();
}

// The one visibility rule's reads, for a whole account (owners) or a key (agents), after a number
// (oldest first) or the newest (newest first). `seq > ?` and `seq IS NOT NULL` hold only for
// numbered rows.
const ACCOUNT_AFTER = 'SELECT * FROM events WHERE account_id = ? AND seq > ? ORDER BY seq LIMIT ?';
const KEY_AFTER =
  'SELECT * FROM events WHERE account_id = ? AND seq > ? AND (key_id = ? OR (key_id IS NULL AND type IN (?))) ORDER BY seq LIMIT ?';
const ACCOUNT_NEWEST = 'SELECT * FROM events WHERE account_id = ? AND seq IS NOT NULL ORDER BY seq DESC LIMIT ?';
const KEY_NEWEST =
  'SELECT * FROM events WHERE account_id = ? AND seq IS NOT NULL AND (key_id = ? OR (key_id IS NULL AND type IN (?))) ORDER BY seq DESC LIMIT ?';

async function visibleEvents(
  ds: Executor,
  viewer: Viewer,
  from: { afterSeq: string } | { newest: true },
  limit: number,
): Promise<NumberedEvent[]> {
  const { accountId, keyId } = visibleRows(viewer);
  const after = 'afterSeq' in from ? [from.afterSeq] : [];
  const byKey = keyId === undefined ? [] : [keyId, AGENT_ACCOUNT_EVENTS];
  const sql = after.length
    ? keyId === undefined
      ? ACCOUNT_AFTER
      : KEY_AFTER
    : keyId === undefined
      ? ACCOUNT_NEWEST
      : KEY_NEWEST;
  const rows: EventRow[] = await ds.query(sql, [accountId, ...after, ...byKey, limit]);
  return rows.map(toEvent).filter(isNumbered);
}

/** The newest number of the account's events, or '0' when it has none: where its reader without an id starts. */
export async function latestAccountSeq(ds: Executor, accountId: string): Promise<string> {
  const [row] = (await ds.query(`SELECT MAX(seq) AS seq FROM events WHERE account_id = ?`, [accountId])) as {
    seq: string | number | null;
  }[];
  return row?.seq === null || row?.seq === undefined ? '0' : String(row.seq);
}

/** Whether `viewer` may see `e` (the same rule as {@link eventsAfter}, for events fanned out in memory). */
export function visibleEvent(viewer: Viewer, e: Pick<StoredEvent, 'accountId' | 'keyId' | 'type'>): boolean {
  const { accountId, keyId } = visibleRows(viewer);
  if (e.accountId !== accountId) return false;
  return keyId === undefined || e.keyId === keyId || (e.keyId === null && AGENT_ACCOUNT_EVENTS.includes(e.type));
}

// The tail's reads (event-tail.ts): the events after a position, and those of the ids below it
// it has not seen yet. One statement, so one snapshot: an account's events are numbered in the
// order they commit, so when one of them is read, every earlier one of its account is read too.
const TAIL = 'SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?';
const TAIL_AND_UNSEEN = 'SELECT * FROM events WHERE id > ? OR id IN (?) ORDER BY id LIMIT ?';

/**
 * Every event after `afterId` or among `unseen` (ids at or below it that a reader passed before
 * they committed), oldest first, at most `limit`: the service's own readers' one read of the log.
 */
export async function tailEvents(
  ds: Executor,
  afterId: string,
  unseen: readonly string[],
  limit: number,
): Promise<StoredEvent[]> {
  const rows: EventRow[] = unseen.length
    ? await ds.query(TAIL_AND_UNSEEN, [afterId, unseen, limit])
    : await ds.query(TAIL, [afterId, limit]);
  return rows.map(toEvent);
}

/** The newest log-wide id of an event written before `at`, or '0': where a reader that looks back that far starts. */
export async function lastEventIdBefore(ds: Executor, at: Date): Promise<string> {
  // From the newest backwards: the scan stops at the first row old enough.
  const [row] = (await ds.query(`SELECT id FROM events WHERE created_at < ? ORDER BY id DESC LIMIT 1`, [at])) as {
    id: string | number;
  }[];
  return row ? String(row.id) : '0';
}

/** The newest log-wide id, or '0' when there is none: where the service's own readers start. */
export async function latestEventId(ds: Executor): Promise<string> {
  const [row] = (await ds.query(`SELECT MAX(id) AS id FROM events`)) as { id: string | number | null }[];
  return row?.id === null || row?.id === undefined ? '0' : String(row.id);
}

/** The account numbers of events by log-wide id (absent for an unnumbered event). */
export async function accountSeqsOf(ds: Executor, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = (await ds.query(`SELECT id, seq FROM events WHERE id IN (?) AND seq IS NOT NULL`, [ids])) as {
    id: string | number;
    seq: string | number;
  }[];
  return new Map(rows.map((r) => [String(r.id), String(r.seq)]));
}

/** One event by id, or null. */
export async function eventById(m: Executor, id: string): Promise<StoredEvent | null> {
  const [row] = (await m.query(`SELECT * FROM events WHERE id = ?`, [id])) as EventRow[];
  return row ? toEvent(row) : null;
}

/**
 * The events aggregate: the durable event log (`events`), each account's numbering of its events
 * (`event_sequences`) and where each named consumer of the log stands (`event_cursors`). Events are
 * appended in the transaction of the change they report; the log is read two ways, by account
 * number under the one visibility rule (agents' and owners' pages and streams) and by log-wide id
 * (the service's own readers, through event-tail.ts). Writes issue their statements at the call,
 * before awaiting anything, so a write called with others travels with them in a pipelined
 * transaction.
 */
export interface EventsRepository {
  /**
   * Appends one event, numbered in its account, in this transaction (only inside one): the
   * account's counter row stays locked until commit, so take it after the change's other locks.
   */
  append(event: NewEvent): Promise<void>;
  /**
   * The viewer's events after number `afterSeq` of its account (exclusive), oldest first, at most
   * `limit`: the rentals' events it may see and the account events meant for agents.
   */
  after(viewer: Viewer, afterSeq: string, limit: number): Promise<NumberedEvent[]>;
  /** The viewer's newest `limit` events (by the rule of {@link after}), oldest first. */
  latest(viewer: Viewer, limit: number): Promise<NumberedEvent[]>;
  /** The newest number of the account's events, or '0' when it has none. */
  latestAccountSeq(accountId: string): Promise<string>;
  /**
   * Every event after log-wide id `afterId` or among `unseen`, oldest first, at most `limit`, in
   * one snapshot: the service's own readers' one read of the log (event-tail.ts).
   */
  tail(afterId: string, unseen: readonly string[], limit: number): Promise<StoredEvent[]>;
  /** The newest log-wide id of an event written before `at`, or '0'. */
  lastIdBefore(at: Date): Promise<string>;
  /** The newest log-wide id, or '0' when the log is empty. */
  latestId(): Promise<string>;
  /** The account numbers of events by log-wide id (absent for an unnumbered or unknown event). */
  accountSeqsOf(ids: readonly string[]): Promise<Map<string, string>>;
  /** One event by log-wide id, or null. */
  byId(id: string): Promise<StoredEvent | null>;
  /** Where consumer `name` stands, with the version its next move must match; null before its first pass. */
  readCursor(name: string): Promise<StoredPosition | null>;
  /** Starts consumer `name` after `lastId`, unless it has started already (nothing changes then). */
  createCursor(name: string, lastId: string): Promise<void>;
  /**
   * Moves consumer `name` to `to` if it is still at `version`, in this transaction (only inside
   * one); false, with nothing changed, when another consumer of the name moved it first. The row
   * stays locked until commit, so two consumers of one name take turns.
   */
  claimCursor(name: string, version: string, to: TailPosition): Promise<boolean>;
}

/** Writes that must commit with the change they go with refuse to run on their own. */
function transactionOf(sql: Executor, what: string): Sql {
  if (!inOpenTransaction(sql)) throw new Error(`${what} are written only inside a transaction`);
  return sql as Sql;
}

/** The events aggregate on MySQL: the statements above, on one executor. */
export class MysqlEventsRepository implements EventsRepository {
  constructor(private readonly sql: Executor) {}

  async append(event: NewEvent): Promise<void> {
    return recordEvent(transactionOf(this.sql, 'events'), event);
  }

  after(viewer: Viewer, afterSeq: string, limit: number): Promise<NumberedEvent[]> {
    return eventsAfter(this.sql, viewer, afterSeq, limit);
  }

  latest(viewer: Viewer, limit: number): Promise<NumberedEvent[]> {
    return latestEvents(this.sql, viewer, limit);
  }

  latestAccountSeq(accountId: string): Promise<string> {
    return latestAccountSeq(this.sql, accountId);
  }

  tail(afterId: string, unseen: readonly string[], limit: number): Promise<StoredEvent[]> {
    return tailEvents(this.sql, afterId, unseen, limit);
  }

  lastIdBefore(at: Date): Promise<string> {
    return lastEventIdBefore(this.sql, at);
  }

  latestId(): Promise<string> {
    return latestEventId(this.sql);
  }

  accountSeqsOf(ids: readonly string[]): Promise<Map<string, string>> {
    return accountSeqsOf(this.sql, ids);
  }

  byId(id: string): Promise<StoredEvent | null> {
    return eventById(this.sql, id);
  }

  readCursor(name: string): Promise<StoredPosition | null> {
    return readCursor(this.sql, name);
  }

  createCursor(name: string, lastId: string): Promise<void> {
    return createCursor(this.sql, name, lastId);
  }

  async claimCursor(name: string, version: string, to: TailPosition): Promise<boolean> {
    return claimCursor(transactionOf(this.sql, 'cursor moves'), name, version, to);
  }
}
