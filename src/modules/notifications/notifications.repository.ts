import type { Executor } from '../../db/mysql-store.js';
import { inOpenTransaction, type Sql } from '../../db/sql.js';

// The only code that reads or writes `telegram_notifications`: one row per cause an owner is
// told of, with its delivery's tries.

/** What a rental status message says besides its event: who started the rental, and how its charge stands now. */
export interface RentalFacts {
  /** The GPU model an intent asked for, which names the machine while no offer does. */
  gpuModel: string | null;
  reversalStatus: string | null;
  keyName: string | null;
  keyPrefix: string | null;
  keyKind: string | null;
}

/** A notification to record: one per cause, `key` naming the cause. */
export interface NewNotification {
  key: string;
  kind: string;
  accountId: string;
  chatId: number;
  text: string;
}

/** A notification not yet sent nor given up on. */
export interface PendingNotification {
  chatId: number;
  text: string;
  /** Attempts before this one. */
  attempts: number;
}

/**
 * Records `n` in the caller's transaction unless its cause is recorded already; returns the new
 * row's id, or null for a cause seen before. A concurrent record of the same cause waits on the
 * unique key, so exactly one of them gets an id.
 */
export async function recordNotification(m: Sql, n: NewNotification, now: Date): Promise<string | null> {
  const res: { affectedRows: number; insertId: number } = await m.query(
    `INSERT INTO telegram_notifications (notify_key, account_id, chat_id, kind, text, created_at, attempts)
       VALUES (?, ?, ?, ?, ?, ?, 0) ON DUPLICATE KEY UPDATE notify_key = notify_key`,
    [n.key, n.accountId, n.chatId, n.kind, n.text, now],
  );
  // An insert reports its new id; an unchanged duplicate none (insertId 0), and 0 or 1 affected rows
  // as the connection's CLIENT_FOUND_ROWS flag has it (mysql2 sets it: 1).
  return Number(res.affectedRows) === 1 && Number(res.insertId) !== 0 ? String(res.insertId) : null;
}

/**
 * Records `n` as not to be sent (its chat turned its type off with /notify), in the caller's
 * transaction, so the same cause met again (after the owner turns the type back on) is not sent late.
 */
export async function recordSkippedNotification(m: Sql, n: NewNotification, now: Date): Promise<void> {
  await m.query(
    `INSERT INTO telegram_notifications (notify_key, account_id, chat_id, kind, text, created_at, attempts, failed_at, last_error)
       VALUES (?, ?, ?, ?, ?, ?, 0, ?, 'turned off with /notify') ON DUPLICATE KEY UPDATE notify_key = notify_key`,
    [n.key, n.accountId, n.chatId, n.kind, n.text, now, now],
  );
}

/** The notification, while it is neither sent nor given up on. */
export async function pendingNotification(ds: Executor, id: string): Promise<PendingNotification | null> {
  const rows: { chat_id: number | string; text: string; attempts: number }[] = await ds.query(
    'SELECT chat_id, text, attempts FROM telegram_notifications WHERE id = ? AND sent_at IS NULL AND failed_at IS NULL',
    [id],
  );
  return rows[0] ? { chatId: Number(rows[0].chat_id), text: rows[0].text, attempts: Number(rows[0].attempts) } : null;
}

/** Counts an attempt about to be made. */
export async function startNotificationAttempt(ds: Executor, id: string, now: Date): Promise<void> {
  await ds.query('UPDATE telegram_notifications SET claimed_at = ?, attempts = attempts + 1 WHERE id = ?', [now, id]);
}

export async function markNotificationSent(ds: Executor, id: string, now: Date): Promise<void> {
  await ds.query('UPDATE telegram_notifications SET sent_at = ? WHERE id = ?', [now, id]);
}

/** Records why an attempt failed; with `givenUpAt`, no attempt follows. */
export async function markNotificationFailed(
  ds: Executor,
  id: string,
  error: string,
  givenUpAt: Date | null,
): Promise<void> {
  await ds.query('UPDATE telegram_notifications SET last_error = ?, failed_at = ? WHERE id = ?', [
    error.slice(0, 255),
    givenUpAt,
    id,
  ]);
}

/**
 * The owners' notifications (`telegram_notifications`): recorded once per cause (its unique key)
 * in the transaction that moves the notifications' cursor, then sent by a job each, which counts
 * its tries and marks the row sent or given up on, each mark standing alone.
 */
export interface NotificationsRepository {
  /**
   * Records `n` unless its cause is recorded already, in this transaction (only inside one);
   * answers the new row's id, or null for a cause seen before (the caller enqueues nothing then).
   */
  record(n: NewNotification, now: Date): Promise<string | null>;
  /** Records `n` as given up on before any try (its chat turned its type off), unless its cause is recorded already; in a transaction only. */
  recordSkipped(n: NewNotification, now: Date): Promise<void>;
  /** The notification, while it is neither sent nor given up on; null otherwise (or when there is none). */
  pending(id: string): Promise<PendingNotification | null>;
  /** Counts a try about to be made. */
  startAttempt(id: string, now: Date): Promise<void>;
  /** Marks the notification sent. */
  markSent(id: string, now: Date): Promise<void>;
  /** Records why a try failed (cut to 255 characters); with `givenUpAt`, no try follows. */
  markFailedAttempt(id: string, error: string, givenUpAt: Date | null): Promise<void>;
}

/** A record outside a transaction would commit apart from the cursor's move, and be made again. */
function transactionOf(sql: Executor): Sql {
  if (!inOpenTransaction(sql)) throw new Error('notifications are recorded only inside a transaction');
  return sql as Sql;
}

export class MysqlNotificationsRepository implements NotificationsRepository {
  constructor(private readonly sql: Executor) {}

  async record(n: NewNotification, now: Date): Promise<string | null> {
    return recordNotification(transactionOf(this.sql), n, now);
  }

  async recordSkipped(n: NewNotification, now: Date): Promise<void> {
    return recordSkippedNotification(transactionOf(this.sql), n, now);
  }

  pending(id: string): Promise<PendingNotification | null> {
    return pendingNotification(this.sql, id);
  }

  startAttempt(id: string, now: Date): Promise<void> {
    return startNotificationAttempt(this.sql, id, now);
  }

  markSent(id: string, now: Date): Promise<void> {
    return markNotificationSent(this.sql, id, now);
  }

  markFailedAttempt(id: string, error: string, givenUpAt: Date | null): Promise<void> {
    return markNotificationFailed(this.sql, id, error, givenUpAt);
  }
}
