import type { EntityManager } from 'typeorm';
import type { PaymentEventOutcome } from './payment-event.entity.js';

/** One audit row per provider event id; a redelivery keeps the first delivery's row (INSERT IGNORE). */
export async function recordPaymentEvent(
  m: EntityManager,
  event: { eventId: string; type: string; checkoutId: string | null; outcome: PaymentEventOutcome; at: Date },
): Promise<void> {
  await m.query(
    `INSERT IGNORE INTO payment_events (provider, event_id, type, checkout_id, outcome, received_at) VALUES ('stripe', ?, ?, ?, ?, ?)`,
    [event.eventId, event.type.slice(0, 100), event.checkoutId, event.outcome, event.at],
  );
}
