import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { Logger } from '../../logger.js';
import type { CardOrders, CardOrderState, PaymentTransaction } from './card-orders.js';
import { Checkout, type CheckoutPurpose } from './checkout.entity.js';
import type { CheckoutsRepository } from './checkouts.repository.js';
import type { PaymentProvider } from './payment-provider.js';

/** Failed refund attempts after which each further failure logs at error: a person should look. */
const REFUND_ALERT_AFTER = 5;

export interface NewCheckout {
  purpose: CheckoutPurpose;
  accountId: string;
  keyId: string | null;
  orderId?: string | null;
  amountMinor: number;
}

/** What the line item says; must be derived from stored data so every retry sends the same. */
export interface CheckoutDescription {
  productName: string;
  productDescription?: string;
  customerEmail?: string | null;
}

/**
 * The part of a top-up or card checkout that talks to the payment provider. The checkout row is
 * committed first (status CREATING) together with the idempotency claim; the provider is called
 * outside any transaction with an idempotency key derived from the checkout id; the session is
 * stored afterwards. A retry after a crash anywhere in between finds CREATING and asks again with
 * the same key, so it converges on the one session the provider created.
 */
export class CheckoutSessionsService {
  constructor(
    private readonly store: Store<PaymentTransaction>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    readonly provider: PaymentProvider | null,
    private readonly publicBaseUrl: string,
    private readonly cardOrders: CardOrders,
  ) {}

  requireProvider(): PaymentProvider {
    if (!this.provider) throw new AppError('UNAVAILABLE', 'Card payments are not configured on this service.');
    return this.provider;
  }

  /** Inserts a CREATING checkout in the caller's transaction (`checkouts` is its repository). */
  async insert(checkouts: CheckoutsRepository, input: NewCheckout): Promise<Checkout> {
    const now = this.clock.now();
    const checkout = Object.assign(new Checkout(), {
      id: randomUUID(),
      purpose: input.purpose,
      accountId: input.accountId,
      keyId: input.keyId,
      orderId: input.orderId ?? null,
      amountMinor: input.amountMinor,
      currency: 'USD',
      status: 'CREATING',
      provider: this.requireProvider().id,
      sessionId: null,
      checkoutUrl: null,
      expiresAt: null,
      paidAt: null,
      paidEventId: null,
      refundId: null,
      refundedAt: null,
      refundStatus: null,
      refundRequestedAt: null,
      refundAttempts: 0,
      createdAt: now,
      updatedAt: now,
    });
    await checkouts.insert(checkout);
    return checkout;
  }

  /** Makes sure a CREATING checkout has its provider session; safe to run concurrently and twice. */
  async open(checkout: Checkout, description: CheckoutDescription): Promise<Checkout> {
    if (checkout.status !== 'CREATING') return checkout;
    const provider = this.requireProvider();
    if (provider.id !== checkout.provider) {
      throw new AppError(
        'UNAVAILABLE',
        'This payment link was started with a payment provider that is no longer configured; use a new Idempotency-Key.',
      );
    }
    let session;
    try {
      session = await provider.createCheckoutSession({
        checkoutId: checkout.id,
        purpose: checkout.purpose,
        accountId: checkout.accountId,
        orderId: checkout.orderId,
        amountMinor: checkout.amountMinor,
        currency: checkout.currency.toLowerCase(),
        productName: description.productName,
        productDescription: description.productDescription,
        customerEmail: description.customerEmail,
        successUrl: this.successUrl(checkout.id),
        cancelUrl: this.cancelUrl(checkout.id),
        idempotencyKey: `checkout-session:${checkout.id}`,
      });
    } catch (err) {
      this.logger.error(
        { err, checkoutId: checkout.id, provider: provider.id },
        'payment provider did not create a checkout session',
      );
      throw new AppError(
        'UNAVAILABLE',
        'The payment provider could not be reached. Retry with the same Idempotency-Key; no payment link was lost.',
      );
    }
    if (!session.url) {
      this.logger.error(
        { checkoutId: checkout.id, sessionId: session.id },
        'payment provider returned a session without a URL',
      );
      throw new AppError(
        'UNAVAILABLE',
        'The payment provider returned no payment page. Retry with the same Idempotency-Key.',
      );
    }
    // Concurrent openers got the same session (same idempotency key); whichever stores first wins
    // and the others read the stored row.
    const stored = {
      status: session.status === 'expired' ? ('EXPIRED' as const) : ('OPEN' as const),
      sessionId: session.id,
      checkoutUrl: session.url,
      expiresAt: session.expiresAt,
      updatedAt: this.clock.now(),
    };
    return this.store.read(async (r) => {
      await r.checkouts.storeSession(checkout.id, stored);
      return r.checkouts.get(checkout.id);
    });
  }

  /**
   * An OPEN checkout whose session lifetime has passed can no longer be paid; record that. A
   * payment that completed just before expiry still credits when its event arrives.
   */
  async expireIfDue(checkout: Checkout): Promise<Checkout> {
    if (checkout.status !== 'OPEN' || !checkout.expiresAt || checkout.expiresAt.getTime() > this.clock.now().getTime())
      return checkout;
    await this.store.transaction((r) => this.closeUnpaid(r, checkout.id, 'EXPIRED'));
    return this.store.read((r) => r.checkouts.get(checkout.id));
  }

  /** Checkout `id` as last committed, or null (the payment pages' read). */
  find(checkoutId: string): Promise<Checkout | null> {
    return this.store.read((r) => r.checkouts.find(checkoutId));
  }

  /** A card order's payment state as last committed, read without a lock (the payment pages' read). */
  orderState(orderId: string): Promise<CardOrderState | null> {
    return this.store.read((r) => this.cardOrders.state(r, orderId, { lock: false }));
  }

  /** The checkout of a card order, in the caller's transaction (`checkouts` is its repository); it must exist. */
  checkoutOfOrder(checkouts: CheckoutsRepository, orderId: string): Promise<Checkout> {
    return checkouts.ofOrder(orderId);
  }

  /** Locks a checkout row for a decision about it; null when there is no such checkout. */
  async lock(checkouts: CheckoutsRepository, checkoutId: string): Promise<Checkout | null> {
    return checkouts.lock(checkoutId);
  }

  /**
   * Ends an unpaid checkout (session expired, or an asynchronous payment failed). A card order it
   * was paying fails with a customer-safe reason, or ends as TERMINATED when its owner had
   * cancelled it; nothing was charged, so nothing is reversed. Returns false when the checkout was
   * already paid or closed.
   */
  async closeUnpaid(
    tx: PaymentTransaction,
    checkoutId: string,
    status: 'EXPIRED' | 'FAILED',
    sessionId?: string,
  ): Promise<boolean> {
    const checkout = await this.lock(tx.checkouts, checkoutId);
    if (!checkout || (checkout.status !== 'CREATING' && checkout.status !== 'OPEN')) return false;
    const now = this.clock.now();
    await tx.checkouts.setStatus(checkout.id, status, checkout.sessionId ?? sessionId ?? null, now);
    if (checkout.purpose === 'ORDER' && checkout.orderId)
      await this.cardOrders.closedUnpaid(tx, checkout.orderId, status, now);
    return true;
  }

  /**
   * Gives a failed card order's payment back to the card, in full and once (see {@link settleRefund}).
   * 'NOTHING_PAID' when the order has no paid checkout. Throws when the provider cannot refund now.
   */
  async refundOrder(orderId: string): Promise<'REFUNDED' | 'NOTHING_PAID'> {
    const checkout = await this.store.read((r) => r.checkouts.paidOfOrder(orderId));
    if (!checkout) return 'NOTHING_PAID';
    if (checkout.refundStatus === null) {
      await this.store.read((r) => this.markRefundDue(r.checkouts, checkout.id));
    }
    return (await this.settleRefund(checkout.id)) === 'REFUNDED' ? 'REFUNDED' : 'NOTHING_PAID';
  }

  /** See `CardRefunds.markOrderRefundDue`: a card order whose payment must go back to the card. */
  async markOrderRefundDue(checkouts: CheckoutsRepository, orderId: string): Promise<boolean> {
    const checkout = await checkouts.paidOfOrder(orderId);
    if (!checkout) return false;
    await this.markRefundDue(checkouts, checkout.id);
    return true;
  }

  /**
   * Records, in the caller's transaction, that a paid checkout's payment is owed back. Only the
   * first call counts; the refund itself is made by {@link settleRefund} after the commit.
   */
  async markRefundDue(checkouts: CheckoutsRepository, checkoutId: string): Promise<void> {
    await checkouts.markRefundPending(checkoutId, this.clock.now());
  }

  /**
   * Makes the refund a checkout is owed, in full and at most once: the provider call carries an
   * idempotency key derived from the checkout, so concurrent callers and a retry after a crash
   * converge on the one refund, and a payment the provider reports as already refunded counts as
   * done. The card money never reached the account balance, so no ledger entry moves with it.
   * 'NOT_DUE' when nothing is owed. Throws (after counting the attempt) when the provider cannot
   * refund now; the payments job calls again.
   */
  async settleRefund(checkoutId: string): Promise<'REFUNDED' | 'NOT_DUE'> {
    const checkout = await this.store.read((r) => r.checkouts.find(checkoutId));
    if (!checkout || checkout.status !== 'PAID' || checkout.refundStatus === null) return 'NOT_DUE';
    if (checkout.refundStatus === 'SUCCEEDED') return 'REFUNDED';
    const context = {
      checkoutId: checkout.id,
      orderId: checkout.orderId,
      amountMinor: checkout.amountMinor,
      currency: checkout.currency,
    };
    let refund;
    try {
      const provider = this.requireProvider();
      if (provider.id !== checkout.provider || !checkout.sessionId) {
        throw new Error(
          `checkout ${checkout.id} was paid through ${checkout.provider}, which is not configured now; refund it by hand`,
        );
      }
      refund = await provider.refund({
        sessionId: checkout.sessionId,
        checkoutId: checkout.id,
        orderId: checkout.orderId,
        amountMinor: checkout.amountMinor,
        idempotencyKey: `refund:${checkout.id}`,
      });
      if (refund.status === 'failed' || refund.status === 'canceled')
        throw new Error(`refund ${refund.id} is ${refund.status}`);
    } catch (err) {
      const attempts = checkout.refundAttempts + 1;
      await this.store.read((r) => r.checkouts.countRefundAttempt(checkout.id, this.clock.now()));
      const level = attempts >= REFUND_ALERT_AFTER ? 'error' : 'warn';
      this.logger[level]({ err, ...context, attempts }, 'refund did not go through; the payments job retries');
      throw err;
    }
    const now = this.clock.now();
    await this.store.transaction(async (r) => {
      const settled = await r.checkouts.markRefunded(checkout.id, refund.id, now);
      // A card order's whole reversal is this refund: its money never became credits.
      if (settled && checkout.orderId) await this.cardOrders.refunded(r, checkout.orderId, now);
    });
    this.logger.warn({ ...context, refundId: refund.id, status: refund.status }, 'payment refunded to the card');
    return 'REFUNDED';
  }

  /** The payments job's retry of refunds still owed, oldest first. Returns how many it made. */
  async settleDueRefunds(limit = 50): Promise<number> {
    let refunded = 0;
    for (const id of await this.store.read((r) => r.checkouts.refundsDue(limit))) {
      try {
        if ((await this.settleRefund(id)) === 'REFUNDED') refunded++;
      } catch {
        // Counted and logged by settleRefund; the next run tries again.
      }
    }
    return refunded;
  }

  successUrl(checkoutId: string): string {
    return `${this.publicBaseUrl}/checkout/${checkoutId}/success`;
  }

  cancelUrl(checkoutId: string): string {
    return `${this.publicBaseUrl}/checkout/${checkoutId}/cancel`;
  }
}
