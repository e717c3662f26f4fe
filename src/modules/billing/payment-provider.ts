import type { CheckoutPurpose, PaymentProviderId } from './checkout.entity.js';

/** What we ask a payment provider to host: one fixed USD amount, paid once by a human. */
export interface CheckoutSessionRequest {
  /** Our checkout id (the top-up id for top-ups); echoed back in metadata and client_reference_id. */
  checkoutId: string;
  purpose: CheckoutPurpose;
  accountId: string;
  orderId: string | null;
  amountMinor: number;
  /** Lower-case ISO code as payment providers spell it (`usd`). */
  currency: string;
  /** The single line item's name, e.g. "Compute credits". */
  productName: string;
  productDescription?: string;
  customerEmail?: string | null;
  successUrl: string;
  cancelUrl: string;
  /**
   * Derived from the checkout id, never random: a retry after a crash asks again with the same key
   * and gets the same session back instead of a second one.
   */
  idempotencyKey: string;
}

/** The provider's view of a hosted session, reduced to what we store and act on. */
export interface CheckoutSessionInfo {
  id: string;
  url: string | null;
  expiresAt: Date;
  status: 'open' | 'complete' | 'expired';
  paymentStatus: 'paid' | 'unpaid' | 'no_payment_required';
  amountTotal: number | null;
  currency: string | null;
  metadata: Record<string, string>;
  clientReferenceId: string | null;
}

/** Money back to the card that paid a session, in full. */
export interface RefundRequest {
  sessionId: string;
  checkoutId: string;
  orderId: string | null;
  amountMinor: number;
  /** Derived from the checkout id: asking again after a crash returns the one refund already made. */
  idempotencyKey: string;
}

/** A refund as the provider reports it; `pending` is normal for cards and completes on its own. */
export interface RefundInfo {
  id: string;
  status: 'pending' | 'requires_action' | 'succeeded' | 'failed' | 'canceled';
}

/**
 * A card-payment provider hosting checkout pages. Payment is never inferred from these calls:
 * only a verified webhook event (or a session read back from the provider's API by reconciliation)
 * credits anything.
 */
export interface PaymentProvider {
  readonly id: PaymentProviderId;
  /** Idempotent under `request.idempotencyKey`. Throws when the provider cannot be reached. */
  createCheckoutSession(request: CheckoutSessionRequest): Promise<CheckoutSessionInfo>;
  /** The session as the provider sees it now; null when the provider keeps no such record. */
  retrieveCheckoutSession(sessionId: string): Promise<CheckoutSessionInfo | null>;
  /** Ends an open session so it can no longer be paid; idempotent under `idempotencyKey`. */
  expireCheckoutSession(sessionId: string, idempotencyKey: string): Promise<CheckoutSessionInfo | null>;
  /** Refunds a paid session in full; idempotent under `request.idempotencyKey`. Throws when it cannot. */
  refund(request: RefundRequest): Promise<RefundInfo>;
}

/** Metadata keys every session carries, so a webhook can find its checkout without a lookup table. */
export function sessionMetadata(
  r: Pick<CheckoutSessionRequest, 'checkoutId' | 'purpose' | 'accountId' | 'orderId'>,
): Record<string, string> {
  const m: Record<string, string> = { checkout_id: r.checkoutId, purpose: r.purpose, account_id: r.accountId };
  if (r.orderId) m.order_id = r.orderId;
  return m;
}
