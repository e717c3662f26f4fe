import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** What a verified provider event did to us. */
export type PaymentEventOutcome =
  | 'CREDITED'
  | 'ORDER_PAID'
  /** Paid, but for a card order that could no longer run: the payment is refunded. */
  | 'REFUND_DUE'
  | 'ALREADY_PAID'
  | 'EXPIRED'
  | 'FAILED'
  | 'AWAITING_ASYNC_PAYMENT'
  | 'IGNORED'
  | 'UNKNOWN_CHECKOUT'
  | 'MISMATCH';

/** A verified payment-provider event, recorded once per (provider, event id). Append-only. */
@Entity({ name: 'payment_events' })
export class PaymentEvent {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ type: 'varchar', length: 16 })
  provider: string;

  @Column({ name: 'event_id', type: 'varchar', length: 191 })
  eventId: string;

  @Column({ type: 'varchar', length: 100 })
  type: string;

  @Column({ name: 'checkout_id', type: 'char', length: 36, nullable: true })
  checkoutId: string | null;

  @Column({ type: 'varchar', length: 32 })
  outcome: PaymentEventOutcome;

  @Column({ name: 'received_at', type: 'datetime', precision: 3 })
  receivedAt: Date;
}
