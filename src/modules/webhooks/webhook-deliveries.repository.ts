import type { Executor } from '../../db/mysql-store.js';
import { inOpenTransaction } from '../../db/sql.js';
import { MysqlKeysRepository } from '../keys/keys.repository.js';
import {
  makerRevoked,
  revokedMakers,
  toEndpoint,
  type EndpointRow,
  type StoredEndpoint,
} from './webhook-endpoints.repository.js';
import { releaseSlot } from './webhook-slots.repository.js';

// The only code that reads or writes `webhook_deliveries` and `webhook_delivery_attempts` on
// MySQL (a try's claim on its delivery is taken with its slot: webhook-slots.repository.ts).

export type DeliveryStatus = 'PENDING' | 'SUCCEEDED' | 'FAILED';

export interface StoredDelivery {
  id: string;
  endpointId: string;
  /** The endpoint's account, kept on the delivery for the account's tries in flight. */
  accountId: string;
  /** The event's log-wide id, as a decimal string. */
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

/** A delivery as the dispatcher writes it: pending, due at `at`. */
export interface NewDelivery {
  id: string;
  endpointId: string;
  accountId: string;
  eventId: string;
  at: Date;
}

/** What one try sends to: the delivery and its endpoint (deleted, or its maker revoked: `receiving` false). */
export interface DeliveryTarget {
  delivery: StoredDelivery;
  endpoint: StoredEndpoint;
  receiving: boolean;
}

/** One try's outcome and what the delivery becomes after it, written together. */
export interface TryOutcome {
  attemptedAt: Date;
  statusCode: number | null;
  /** Kept to its first 300 characters. */
  error: string | null;
  durationMs: number;
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
}

/** A delivery, named with the account whose slot it may hold. */
export interface DeliveryOfAccount {
  id: string;
  accountId: string;
}

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

/** The deliveries of events to endpoints (one per endpoint and event) and their tries. */
export interface WebhookDeliveriesRepository {
  /** Records the delivery of an event to an endpoint, pending and due at `at`; false, writing nothing, when it already exists (once per endpoint and event). */
  record(d: NewDelivery): Promise<boolean>;
  /** The account of a pending delivery, or null when it is done or does not exist. */
  pendingAccount(id: string): Promise<string | null>;
  /** The delivery and its endpoint, or null when either does not exist. */
  target(id: string): Promise<DeliveryTarget | null>;
  /**
   * Records a try, moves the delivery to what the try made it (its next try, or done) and frees
   * the account's slot the delivery held; in a transaction (the three writes stand together).
   */
  recordTry(d: DeliveryOfAccount, t: TryOutcome): Promise<void>;
  /** Closes a pending delivery as FAILED without a try (its endpoint is gone or stopped) and frees its slot; in a transaction. */
  close(d: DeliveryOfAccount, at: Date): Promise<void>;
  /** Sends a delivery again from `at`: pending, with a fresh 24-hour window of retries (its tries are kept). */
  reopen(id: string, at: Date): Promise<void>;
  /** An endpoint's deliveries, newest event first, at most `limit`. */
  ofEndpoint(endpointId: string, limit: number): Promise<StoredDelivery[]>;
  /** One delivery of an endpoint, or null (another endpoint's is null too). */
  one(endpointId: string, deliveryId: string): Promise<StoredDelivery | null>;
  /** The tries of these deliveries, oldest first. */
  attemptsOf(deliveryIds: readonly string[]): Promise<StoredAttempt[]>;
  /**
   * Accounts (after `afterAccount`, in id order, at most `limit`) with a pending delivery whose next
   * try was due before `dueBefore`: one entry per account however many it has.
   */
  accountsWithOverdue(dueBefore: Date, afterAccount: string, limit: number): Promise<string[]>;
  /**
   * The account's pending deliveries due by `dueBy` that no run holds at `wallNow`, longest
   * waiting first, at most `limit`.
   */
  dueOf(accountId: string, dueBy: Date, wallNow: Date, limit: number): Promise<string[]>;
}

export class MysqlWebhookDeliveriesRepository implements WebhookDeliveriesRepository {
  constructor(private readonly sql: Executor) {}

  async record(d: NewDelivery): Promise<boolean> {
    const res = (await this.sql.query(
      `INSERT IGNORE INTO webhook_deliveries (id, endpoint_id, account_id, event_id, status, attempts, next_attempt_at, created_at) VALUES (?, ?, ?, ?, 'PENDING', 0, ?, ?)`,
      [d.id, d.endpointId, d.accountId, d.eventId, d.at, d.at],
    )) as { affectedRows: number };
    return res.affectedRows === 1;
  }

  async pendingAccount(id: string): Promise<string | null> {
    const [row] = (await this.sql.query(
      `SELECT account_id FROM webhook_deliveries WHERE id = ? AND status = 'PENDING'`,
      [id],
    )) as { account_id: string }[];
    return row?.account_id ?? null;
  }

  async target(id: string): Promise<DeliveryTarget | null> {
    const [d] = (await this.sql.query(`SELECT * FROM webhook_deliveries WHERE id = ?`, [id])) as DeliveryRow[];
    if (!d) return null;
    const [e] = (await this.sql.query(`SELECT e.* FROM webhook_endpoints e WHERE e.id = ?`, [
      d.endpoint_id,
    ])) as EndpointRow[];
    if (!e) return null;
    const endpoint = toEndpoint(e);
    // A deleted endpoint receives nothing whoever made it: its maker's key is not read.
    const receiving =
      e.deleted_at === null &&
      !makerRevoked(endpoint, await revokedMakers(new MysqlKeysRepository(this.sql), [endpoint]));
    return { delivery: toDelivery(d), endpoint, receiving };
  }

  async recordTry(d: DeliveryOfAccount, t: TryOutcome): Promise<void> {
    this.inTransaction('a try');
    const deliveryId = d.id;
    await releaseSlot(this.sql, d.accountId, deliveryId);
    await this.sql.query(
      `INSERT INTO webhook_delivery_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES (?, ?, ?, ?, ?)`,
      [deliveryId, t.attemptedAt, t.statusCode, t.error === null ? null : t.error.slice(0, 300), t.durationMs],
    );
    await this.sql.query(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, ?), status = ?, next_attempt_at = ?, completed_at = ?, claimed_until = NULL WHERE id = ?`,
      [t.attemptedAt, t.status, t.nextAttemptAt, t.status === 'PENDING' ? null : t.attemptedAt, deliveryId],
    );
  }

  async close(d: DeliveryOfAccount, at: Date): Promise<void> {
    this.inTransaction('closing a delivery');
    const id = d.id;
    await releaseSlot(this.sql, d.accountId, id);
    await this.sql.query(
      `UPDATE webhook_deliveries SET status = 'FAILED', completed_at = ?, next_attempt_at = NULL, claimed_until = NULL WHERE id = ? AND status = 'PENDING'`,
      [at, id],
    );
  }

  async reopen(id: string, at: Date): Promise<void> {
    await this.sql.query(
      `UPDATE webhook_deliveries SET status = 'PENDING', first_attempt_at = NULL, completed_at = NULL, next_attempt_at = ? WHERE id = ?`,
      [at, id],
    );
  }

  async ofEndpoint(endpointId: string, limit: number): Promise<StoredDelivery[]> {
    const rows: DeliveryRow[] = await this.sql.query(
      `SELECT * FROM webhook_deliveries WHERE endpoint_id = ? ORDER BY event_id DESC LIMIT ?`,
      [endpointId, limit],
    );
    return rows.map(toDelivery);
  }

  async one(endpointId: string, deliveryId: string): Promise<StoredDelivery | null> {
    const rows: DeliveryRow[] = await this.sql.query(
      `SELECT * FROM webhook_deliveries WHERE id = ? AND endpoint_id = ?`,
      [deliveryId, endpointId],
    );
    return rows[0] ? toDelivery(rows[0]) : null;
  }

  async attemptsOf(deliveryIds: readonly string[]): Promise<StoredAttempt[]> {
    if (deliveryIds.length === 0) return [];
    const rows = (await this.sql.query(`SELECT * FROM webhook_delivery_attempts WHERE delivery_id IN (?) ORDER BY id`, [
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

  async accountsWithOverdue(dueBefore: Date, afterAccount: string, limit: number): Promise<string[]> {
    // By the due index's groups: one entry per account however many it has.
    const rows = (await this.sql.query(
      `SELECT account_id, MIN(next_attempt_at) AS due FROM webhook_deliveries
     WHERE status = 'PENDING' AND account_id > ? AND next_attempt_at < ? GROUP BY status, account_id ORDER BY account_id LIMIT ?`,
      [afterAccount, dueBefore, limit],
    )) as { account_id: string }[];
    return rows.map((r) => r.account_id);
  }

  async dueOf(accountId: string, dueBy: Date, wallNow: Date, limit: number): Promise<string[]> {
    const rows = (await this.sql.query(
      `SELECT id FROM webhook_deliveries WHERE status = 'PENDING' AND account_id = ? AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until < ?)
     ORDER BY next_attempt_at LIMIT ?`,
      [accountId, dueBy, wallNow, limit],
    )) as { id: string }[];
    return rows.map((r) => r.id);
  }

  /** Writes that must stand together refuse to run statement by statement. */
  private inTransaction(what: string): void {
    if (!inOpenTransaction(this.sql)) throw new Error(`${what} is written only inside a transaction`);
  }
}
