import type { CheckoutsRepository } from './checkouts.repository.js';

/**
 * The billing transaction a card order's change joins: its repositories. The rentals module moves
 * the order in that same transaction, so a payment and its order commit together.
 */
export interface PaymentTransaction {
  checkouts: CheckoutsRepository;
}

/** Where a card order stands as far as its payment is concerned. */
export interface CardOrderState {
  /** It still waits for its payment. */
  awaitingPayment: boolean;
  /** Its owner asked to terminate it (while unpaid, that cancels it). */
  cancelled: boolean;
  /** Its rental status, for logs. */
  status: string;
}

/** The one rule for whether a card order may still be paid: it awaits payment and nobody cancelled it. */
export function isPayable(order: CardOrderState | null): boolean {
  return order !== null && order.awaitingPayment && !order.cancelled;
}

/**
 * Implemented by the rentals module: what a card payment's outcome does to the order it pays for.
 * Billing decides about the checkout (locked) and calls these in the same transaction, so a
 * payment and its order move together; billing never reads or writes rental rows itself.
 * createServices hands the implementation to `createPayments`.
 */
export interface CardOrders {
  /** The order's payment state; `lock` holds its row for the caller's decision (needs a transaction). */
  state(tx: PaymentTransaction, orderId: string, opts: { lock: boolean }): Promise<CardOrderState | null>;
  /** The payment arrived while the order was payable: it goes on to provisioning. */
  paid(tx: PaymentTransaction, orderId: string, at: Date): Promise<void>;
  /**
   * The payment arrived for an order that can no longer run (`state` as read under lock): it ends,
   * or stays ended, without starting, and its reversal (the refund billing makes) is pending.
   */
  paidTooLate(tx: PaymentTransaction, orderId: string, state: CardOrderState | null, at: Date): Promise<void>;
  /** The checkout closed unpaid: the order fails with a customer-safe reason, or ends as its owner asked. */
  closedUnpaid(tx: PaymentTransaction, orderId: string, why: 'EXPIRED' | 'FAILED', at: Date): Promise<void>;
  /** The order's payment went back to the card: its reversal is complete. */
  refunded(tx: PaymentTransaction, orderId: string, at: Date): Promise<void>;
  /** Whether the order was released to provisioning (and so its hand-off is due). */
  released(orderId: string): Promise<boolean>;
  /** Unpaid orders their owners cancelled, oldest request first; `orderId` limits it to that one. */
  cancelledUnpaid(opts: { limit: number; orderId?: string }): Promise<string[]>;
  /** The whole hours an order buys, for the words of a payment page; null when unknown. */
  hours(orderId: string): Promise<number | null>;
}
