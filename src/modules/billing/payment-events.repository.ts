import type { Executor } from '../../db/mysql-store.js';
import type { PaymentEventOutcome } from './payment-event.entity.js';

/** A verified provider event as it is recorded (the provider is Stripe's, the one that signs events). */
export interface NewPaymentEvent {
  eventId: string;
  type: string;
  checkoutId: string | null;
  outcome: PaymentEventOutcome;
  at: Date;
}

/** A recorded event, as {@link PaymentEventsRepository.find} answers it. */
export interface RecordedPaymentEvent {
  provider: string;
  eventId: string;
  type: string;
  checkoutId: string | null;
  outcome: PaymentEventOutcome;
  receivedAt: Date;
}

/** One audit row per provider event id; a redelivery keeps the first delivery's row (INSERT IGNORE). */
export async function recordPaymentEvent(m: Executor, event: NewPaymentEvent): Promise<void> {
  await m.query(
    `INSERT IGNORE INTO payment_events (provider, event_id, type, checkout_id, outcome, received_at) VALUES ('stripe', ?, ?, ?, ?, ?)`,
    [event.eventId, event.type.slice(0, 100), event.checkoutId, event.outcome, event.at],
  );
}

/** The audit trail of verified provider events: `payment_events`, part of the checkouts aggregate. */
export interface PaymentEventsRepository {
  /**
   * Records one event; a second record of the same (provider, event id), a redelivery, is ignored
   * and the first one's row kept. Written in the transaction that applied the event.
   */
  record(event: NewPaymentEvent): Promise<void>;
  /** The recorded event of (provider, event id), or null. A plain read. */
  find(provider: string, eventId: string): Promise<RecordedPaymentEvent | null>;
}

export class MysqlPaymentEventsRepository implements PaymentEventsRepository {
  constructor(private readonly sql: Executor) {}

  record(event: NewPaymentEvent): Promise<void> {
    return recordPaymentEvent(this.sql, event);
  }

  async find(provider: string, eventId: string): Promise<RecordedPaymentEvent | null> {
    const rows: {
      provider: string;
      event_id: string;
      type: string;
      checkout_id: string | null;
      outcome: PaymentEventOutcome;
      received_at: Date;
    }[] = await this.sql.query(
      `SELECT provider, event_id, type, checkout_id, outcome, received_at FROM payment_events WHERE provider = ? AND event_id = ?`,
      [provider, eventId],
    );
    const r = rows[0];
    return r
      ? {
          provider: r.provider,
          eventId: r.event_id,
          type: r.type,
          checkoutId: r.checkout_id,
          outcome: r.outcome,
          receivedAt: r.received_at,
        }
      : null;
  }
}
