/**
 * Implemented by the rentals module: how a paid card checkout becomes a provisioning rental.
 *
 * Billing calls `cardOrderPaid` after the transaction that recorded the verified payment has
 * committed and moved the order (and its deployment) from AWAITING_PAYMENT to PENDING. It may be
 * called more than once for the same order (webhook redeliveries, concurrent deliveries), so it
 * must be idempotent. If it throws, the webhook answers 500 and the provider redelivers, which
 * calls it again while the order is still PENDING. createServices hands it to `createPayments`.
 */
export interface RentalHandoff {
  cardOrderPaid(orderId: string): Promise<void>;
}
