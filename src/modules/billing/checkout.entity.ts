import { Column, Entity, PrimaryColumn } from 'typeorm';
import { minorUnits } from '../../db/columns.js';

/** TOPUP buys compute credits; ORDER pays one card-funded rental (no credits involved). */
export type CheckoutPurpose = 'TOPUP' | 'ORDER';

/**
 * CREATING: row and idempotency claim committed, provider session not stored yet (a retry re-asks
 * the provider with the same idempotency key). OPEN: link handed out. PAID: verified payment
 * applied. EXPIRED: the session ended unpaid. FAILED: an asynchronous payment method failed.
 */
export type CheckoutStatus = 'CREATING' | 'OPEN' | 'PAID' | 'EXPIRED' | 'FAILED';

export type PaymentProviderId = 'stripe' | 'local';

/**
 * A paid checkout's refund: PENDING once we owe the payment back (recorded before the provider is
 * asked, so the payments job retries after any failure or crash), SUCCEEDED once the provider
 * accepted the refund. Null: nothing is owed back.
 */
export type RefundStatus = 'PENDING' | 'SUCCEEDED';

/** One hosted payment page. A top-up is a checkout with purpose TOPUP; its id is the top-up id. */
@Entity({ name: 'checkouts' })
export class Checkout {
  @PrimaryColumn({ type: 'char', length: 36 })
  id: string;

  @Column({ type: 'varchar', length: 8 })
  purpose: CheckoutPurpose;

  @Column({ name: 'account_id', type: 'char', length: 36 })
  accountId: string;

  /** The key that asked for the link. */
  @Column({ name: 'key_id', type: 'char', length: 36, nullable: true })
  keyId: string | null;

  /** The card-funded order this checkout pays (purpose ORDER only). */
  @Column({ name: 'order_id', type: 'char', length: 36, nullable: true })
  orderId: string | null;

  /** Exactly what the provider is asked to charge. */
  @Column({ name: 'amount_minor', type: 'bigint', transformer: minorUnits })
  amountMinor: number;

  @Column({ type: 'char', length: 3 })
  currency: string;

  @Column({ type: 'varchar', length: 16 })
  status: CheckoutStatus;

  @Column({ type: 'varchar', length: 16 })
  provider: PaymentProviderId;

  @Column({ name: 'session_id', type: 'varchar', length: 191, nullable: true })
  sessionId: string | null;

  @Column({ name: 'checkout_url', type: 'varchar', length: 2048, nullable: true })
  checkoutUrl: string | null;

  @Column({ name: 'expires_at', type: 'datetime', precision: 3, nullable: true })
  expiresAt: Date | null;

  @Column({ name: 'paid_at', type: 'datetime', precision: 3, nullable: true })
  paidAt: Date | null;

  /** The provider event that proved payment. */
  @Column({ name: 'paid_event_id', type: 'varchar', length: 191, nullable: true })
  paidEventId: string | null;

  /** The provider's refund of this payment (a card order that did not run). */
  @Column({ name: 'refund_id', type: 'varchar', length: 191, nullable: true })
  refundId: string | null;

  @Column({ name: 'refunded_at', type: 'datetime', precision: 3, nullable: true })
  refundedAt: Date | null;

  @Column({ name: 'refund_status', type: 'varchar', length: 16, nullable: true })
  refundStatus: RefundStatus | null;

  /** When the refund became owed. */
  @Column({ name: 'refund_requested_at', type: 'datetime', precision: 3, nullable: true })
  refundRequestedAt: Date | null;

  /** Provider calls for the refund that failed so far. */
  @Column({ name: 'refund_attempts', type: 'int', default: 0 })
  refundAttempts: number;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'datetime', precision: 3 })
  updatedAt: Date;
}
