import type { DataSource } from 'typeorm';
import type { Sql } from '../../db/sql.js';
import type { EventType } from '../events/event-types.js';
import { RentalsRepository } from '../rentals/rentals.repository.js';
import { NOTIFIED_STATUSES, type RentalStatus } from '../rentals/rental-status.js';

// The only code that reads or writes `telegram_notifications` and `telegram_cursors`, and the
// scans that notifications are derived from (the event log's account and rental events, rentals'
// changes).

/** An account event (topup.paid, credits.low) of an account whose owner has a Telegram chat. */
export interface AccountEventRow {
  id: string | number;
  type: EventType;
  account_id: string;
  chat_id: number | string;
  data: string | object;
}

/** A rental event (rental.expiring, rental.idle_warning) of an account whose owner has a Telegram chat. */
export interface RentalEventRow {
  id: string | number;
  type: EventType;
  account_id: string;
  chat_id: number | string;
  data: string | object;
  created_at: Date;
}

/** A deployment whose status changed to one owners are told about. */
export interface RentalChange {
  id: string;
  order_id: string;
  status: RentalStatus;
  account_id: string;
  chat_id: number | string;
  key_name: string | null;
  key_prefix: string | null;
  key_kind: string | null;
  offer_name: string | null;
  gpu_model: string | null;
  failure_reason: string | null;
  reversal_status: string | null;
  hourly_price_minor: number | string;
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

  /** How far the scans have got under `name`, or null before the first. */
  async cursor(name: string): Promise<Date | null> {
    const rows: { position: Date }[] = await this.ds.query('SELECT position FROM telegram_cursors WHERE name = ?', [
      name,
    ]);
    return rows[0] ? new Date(rows[0].position) : null;
  }

  /** Moves the cursor to `position`, never back (two scans may overlap). */
  async advanceCursor(name: string, position: Date): Promise<void> {
    await this.ds.query(
      'INSERT INTO telegram_cursors (name, position) VALUES (?, ?) ON DUPLICATE KEY UPDATE position = GREATEST(position, VALUES(position))',
      [name, position],
    );
  }

  /** The account events of `types` written since `since`, for accounts whose owner has a chat. */
  async accountEvents(since: Date, types: readonly EventType[]): Promise<AccountEventRow[]> {
    return this.ds.query(
      `SELECT e.id, e.type, e.account_id, a.telegram_chat_id AS chat_id, e.data
         FROM events e JOIN accounts a ON a.id = e.account_id
        WHERE e.created_at >= ? AND e.key_id IS NULL AND e.type IN (?) AND a.telegram_chat_id IS NOT NULL
        ORDER BY e.id`,
      [since, types],
    );
  }

  /** The rental events of `types` written since `since`, for accounts whose owner has a chat. */
  async rentalEvents(since: Date, types: readonly EventType[]): Promise<RentalEventRow[]> {
    return this.ds.query(
      `SELECT e.id, e.type, e.account_id, a.telegram_chat_id AS chat_id, e.data, e.created_at
         FROM events e JOIN accounts a ON a.id = e.account_id
        WHERE e.created_at >= ? AND e.rental_id IS NOT NULL AND e.type IN (?) AND a.telegram_chat_id IS NOT NULL
        ORDER BY e.id`,
      [since, types],
    );
  }

  /** Each change names its machine as the API does (the rentals repository's one rule). */
  async rentalChanges(since: Date): Promise<RentalChange[]> {
    const rows: Omit<RentalChange, 'offer_name'>[] = await this.ds.query(
      `SELECT d.id, d.order_id, d.status, d.account_id, a.telegram_chat_id AS chat_id, d.hourly_price_minor,
              k.name AS key_name, k.prefix AS key_prefix, k.kind AS key_kind,
              o.gpu_model, o.failure_reason, o.reversal_status
         FROM deployments d
         JOIN accounts a ON a.id = d.account_id
         LEFT JOIN api_keys k ON k.id = d.key_id
         LEFT JOIN orders o ON o.id = d.order_id
        WHERE (d.status_changed_at >= ? OR (d.status_changed_at IS NULL AND d.updated_at >= ?))
          AND d.status IN (?) AND a.telegram_chat_id IS NOT NULL`,
      [since, since, NOTIFIED_STATUSES],
    );
    const machines = await new RentalsRepository(this.ds).machinesOfDeployments(rows.map((r) => r.id));
    return rows.map((r) => ({ ...r, offer_name: machines.get(r.id)?.gpuName ?? null }));
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
   * Records `n` as not to be sent (its chat turned its type off with /notify), so a later scan
   * over the same cause, after the owner turns the type back on, does not send it late.
   */
  async recordSkipped(n: NewNotification, now: Date): Promise<void> {
    await this.ds.query(
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
