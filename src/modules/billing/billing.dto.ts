import type { CheckoutStatus } from './checkout.entity.js';
import type { LedgerKind } from './ledger-entry.entity.js';

export interface LedgerEntryDto {
  /** @isLong */
  id: number;
  /** Why money moved: TOPUP, RENTAL_DEBIT, USAGE, TRAFFIC (a rental's internet traffic, per GB as used), REVERSAL or ADJUSTMENT. */
  kind: LedgerKind;
  /**
   * Signed cents: credits positive, debits negative.
   * @isLong
   */
  amountMinor: number;
  /** @isLong */
  balanceAfterMinor: number;
  description: string;
  /** The unique cause of this entry, e.g. `topup:<topupId>`; one entry per cause, ever. */
  reference: string;
  /** The rental this entry belongs to, if any. */
  rentalId: string | null;
  keyId: string | null;
  /** @format date-time */
  createdAt: string;
}

export interface BalanceResponse {
  /**
   * Account credits in cents.
   * @isLong
   */
  creditsMinor: number;
  currency: string;
  frozen: boolean;
  /**
   * The calling key's remaining budget: lifetime budget minus net rental debits.
   * @isLong
   */
  keyRemainingBudgetMinor: number;
  /**
   * Most recent entries first. An agent key sees only the entries it caused (its rentals' debits,
   * usage and reversals, and its own top-ups); an owner key sees every entry of the account.
   */
  entries: LedgerEntryDto[];
  /**
   * Pass as `before` to read the next older page; null when there is none.
   * @isLong
   */
  nextBefore: number | null;
}

export interface TopupRequest {
  /**
   * Credits to buy, in USD cents; the card is charged exactly this.
   * @isInt
   * @minimum 500
   * @maximum 50000
   */
  amountMinor: number;
}

/** A hosted top-up link for a human to pay once. */
export interface TopupDto {
  /** The top-up id (also the payment provider's client reference). */
  topupId: string;
  /** OPEN until paid; PAID once a verified payment credited the account; EXPIRED or FAILED when it can no longer be paid. */
  status: CheckoutStatus;
  /** @isInt */
  amountMinor: number;
  currency: string;
  /**
   * The hosted payment page to give to a human. Null only while the link is still being created.
   * @format uri
   */
  paymentUrl: string | null;
  /**
   * After this moment the link cannot be paid; ask for a new top-up with a new Idempotency-Key.
   * @format date-time
   */
  expiresAt: string | null;
  /** @format date-time */
  createdAt: string;
  /** @format date-time */
  paidAt: string | null;
}

export interface EmailRequest {
  /**
   * Where payment receipts and card-checkout notices go.
   * @maxLength 254
   * @pattern ^[^\s@]+@[^\s@]+\.[^\s@]+$
   */
  email: string;
}

export interface EmailResponse {
  email: string;
}

export interface WebhookAck {
  received: boolean;
}
