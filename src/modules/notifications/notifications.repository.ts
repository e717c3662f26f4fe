import type { DataSource } from 'typeorm';
import type { Sql } from '../../db/sql.js';

// The only code that reads or writes `telegram_notifications`, and what notifications read besides
// the events they are made of (owners' chats, the keys that started rentals).

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

export class NotificationsRepository {
  constructor(private readonly ds: DataSource) {}

  /** The Telegram chat of each of `accountIds` whose owner has one. */
  async chatsOf(accountIds: readonly string[]): Promise<Map<string, number>> {
    if (accountIds.length === 0) return new Map();
    const rows: { id: string; chat_id: number | string }[] = await this.ds.query(
      'SELECT id, telegram_chat_id AS chat_id FROM accounts WHERE id IN (?) AND telegram_chat_id IS NOT NULL',
      [[...new Set(accountIds)]],
    );
    return new Map(rows.map((r) => [r.id, Number(r.chat_id)]));
  }

  /** The {@link RentalFacts} of each of `rentalIds` (order ids), read as they stand now. */
  async rentalFacts(rentalIds: readonly string[]): Promise<Map<string, RentalFacts>> {
    if (rentalIds.length === 0) return new Map();
    const rows: {
      id: string;
      gpu_model: string | null;
      reversal_status: string | null;
      key_name: string | null;
      key_prefix: string | null;
      key_kind: string | null;
    }[] = await this.ds.query(
      `SELECT o.id, o.gpu_model, o.reversal_status, k.name AS key_name, k.prefix AS key_prefix, k.kind AS key_kind
         FROM orders o LEFT JOIN api_keys k ON k.id = o.key_id
        WHERE o.id IN (?)`,
      [[...new Set(rentalIds)]],
    );
    return new Map(
      rows.map((r) => [
        r.id,
        {
          gpuModel: r.gpu_model,
          reversalStatus: r.reversal_status,
          keyName: r.key_name,
          keyPrefix: r.key_prefix,
          keyKind: r.key_kind,
        },
      ]),
    );
  }

  /**
   * Records `n` in the caller's transaction unless its cause is recorded already; returns the new
   * row's id, or null for a cause seen before. A concurrent record of the same cause waits on the
   * unique key, so exactly one of them gets an id.
   */
  async record(m: Sql, n: NewNotification, now: Date): Promise<string | null> {
    const res: { affectedRows: number; insertId: number } = await m.query(
      `INSERT INTO telegram_notifications (notify_key, account_id, chat_id, kind, text, created_at, attempts)
       VALUES (?, ?, ?, ?, ?, ?, 0) ON DUPLICATE KEY UPDATE notify_key = notify_key`,
      [n.key, n.accountId, n.chatId, n.kind, n.text, now],
    );
    // MySQL reports 1 affected row for an insert and 0 for an unchanged duplicate.
    return Number(res.affectedRows) === 1 ? String(res.insertId) : null;
  }

  /**
   * Records `n` as not to be sent (its chat turned its type off with /notify), in the caller's
   * transaction, so the same cause met again (after the owner turns the type back on) is not sent late.
   */
  async recordSkipped(m: Sql, n: NewNotification, now: Date): Promise<void> {
    await m.query(
      `INSERT INTO telegram_notifications (notify_key, account_id, chat_id, kind, text, created_at, attempts, failed_at, last_error)
       VALUES (?, ?, ?, ?, ?, ?, 0, ?, 'turned off with /notify') ON DUPLICATE KEY UPDATE notify_key = notify_key`,
      [n.key, n.accountId, n.chatId, n.kind, n.text, now, now],
    );
  }

  /** The notification, while it is neither sent nor given up on. */
  async pending(id: string): Promise<PendingNotification | null> {
    const rows: { chat_id: number | string; text: string; attempts: number }[] = await this.ds.query(
      'SELECT chat_id, text, attempts FROM telegram_notifications WHERE id = ? AND sent_at IS NULL AND failed_at IS NULL',
      [id],
    );
    return rows[0] ? { chatId: Number(rows[0].chat_id), text: rows[0].text, attempts: Number(rows[0].attempts) } : null;
  }

  /** Counts an attempt about to be made. */
  async startAttempt(id: string, now: Date): Promise<void> {
    await this.ds.query('UPDATE telegram_notifications SET claimed_at = ?, attempts = attempts + 1 WHERE id = ?', [
      now,
      id,
    ]);
  }

  async markSent(id: string, now: Date): Promise<void> {
    await this.ds.query('UPDATE telegram_notifications SET sent_at = ? WHERE id = ?', [now, id]);
  }

  /** Records why an attempt failed; with `givenUpAt`, no attempt follows. */
  async markFailedAttempt(id: string, error: string, givenUpAt: Date | null): Promise<void> {
    await this.ds.query('UPDATE telegram_notifications SET last_error = ?, failed_at = ? WHERE id = ?', [
      error.slice(0, 255),
      givenUpAt,
      id,
    ]);
  }
}
