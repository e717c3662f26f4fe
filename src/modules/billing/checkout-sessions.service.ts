import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Clock } from '../../clock.js';
import { inTransaction } from '../../db/transaction.js';
import { AppError } from '../../errors/app-error.js';
import type { Logger } from '../../logger.js';
import type { CardOrders } from './card-orders.js';
import { Checkout, type CheckoutPurpose } from './checkout.entity.js';
import {
  checkoutOfOrder,
  countRefundAttempt,
  findCheckout,
  getCheckout,
  insertCheckout,
  lockCheckout,
  markRefundPending,
  markRefunded,
  paidCheckoutOfOrder,
  refundsDue,
  setCheckoutStatus,
  storeSession,
} from './checkouts.repository.js';
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
    private readonly ds: DataSource,
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

  /** Inserts a CREATING checkout in the caller's transaction. */
  async insert(manager: EntityManager, input: NewCheckout): Promise<Checkout> {
    const now = this.clock.now();
    const checkout = manager.create(Checkout, {
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
    await insertCheckout(manager, checkout);
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
    await storeSession(this.ds, checkout.id, {
      status: session.status === 'expired' ? 'EXPIRED' : 'OPEN',
      sessionId: session.id,
      checkoutUrl: session.url,
      expiresAt: session.expiresAt,
      updatedAt: this.clock.now(),
    });
    return getCheckout(this.ds, checkout.id);
  }

  /**
   * An OPEN checkout whose session lifetime has passed can no longer be paid; record that. A
   * payment that completed just before expiry still credits when its event arrives.
   */
  async expireIfDue(checkout: Checkout): Promise<Checkout> {
    if (checkout.status !== 'OPEN' || !checkout.expiresAt || checkout.expiresAt.getTime() > this.clock.now().getTime())
      return checkout;
    await inTransaction(this.ds, (m) => this.closeUnpaid(m, checkout.id, 'EXPIRED'));
    return getCheckout(this.ds, checkout.id);
  }

  /** The checkout of a card order, in the caller's transaction; it must exist. */
  checkoutOfOrder(manager: EntityManager, orderId: string): Promise<Checkout> {
    return checkoutOfOrder(manager, orderId);
  }

  /** Locks a checkout row for a decision about it; null when there is no such checkout. */
  async lock(manager: EntityManager, checkoutId: string): Promise<Checkout | null> {
    return lockCheckout(manager, checkoutId);
  }

  /**
   * Ends an unpaid checkout (session expired, or an asynchronous payment failed). A card order it
   * was paying fails with a customer-safe reason, or ends as TERMINATED when its owner had
   * cancelled it; nothing was charged, so nothing is reversed. Returns false when the checkout was
   * already paid or closed.
   */
  async closeUnpaid(
    manager: EntityManager,
    checkoutId: string,
    status: 'EXPIRED' | 'FAILED',
    sessionId?: string,
  ): Promise<boolean> {
    const checkout = await this.lock(manager, checkoutId);
    if (!checkout || (checkout.status !== 'CREATING' && checkout.status !== 'OPEN')) return false;
    const now = this.clock.now();
    await setCheckoutStatus(manager, checkout.id, status, checkout.sessionId ?? sessionId ?? null, now);
    if (checkout.purpose === 'ORDER' && checkout.orderId)
      await this.cardOrders.closedUnpaid(manager, checkout.orderId, status, now);
    return true;
  }

  /**
   * Gives a failed card order's payment back to the card, in full and once (see {@link settleRefund}).
   * 'NOTHING_PAID' when the order has no paid checkout. Throws when the provider cannot refund now.
   */
  async refundOrder(orderId: string): Promise<'REFUNDED' | 'NOTHING_PAID'> {
    const checkout = await paidCheckoutOfOrder(this.ds, orderId);
    if (!checkout) return 'NOTHING_PAID';
    if (checkout.refundStatus === null) {
      await this.markRefundDue(this.ds.manager, checkout.id);
    }
    return (await this.settleRefund(checkout.id)) === 'REFUNDED' ? 'REFUNDED' : 'NOTHING_PAID';
  }

  /** See `CardRefunds.markOrderRefundDue`: a card order whose payment must go back to the card. */
  async markOrderRefundDue(manager: EntityManager, orderId: string): Promise<boolean> {
    const checkout = await paidCheckoutOfOrder(manager, orderId);
    if (!checkout) return false;
    await this.markRefundDue(manager, checkout.id);
    return true;
  }

  /**
   * Records, in the caller's transaction, that a paid checkout's payment is owed back. Only the
   * first call counts; the refund itself is made by {@link settleRefund} after the commit.
   */
  async markRefundDue(manager: EntityManager, checkoutId: string): Promise<void> {
    await markRefundPending(manager, checkoutId, this.clock.now());
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
    const checkout = await findCheckout(this.ds, checkoutId);
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
      await countRefundAttempt(this.ds, checkout.id, this.clock.now());
      const level = attempts >= REFUND_ALERT_AFTER ? 'error' : 'warn';
      this.logger[level]({ err, ...context, attempts }, 'refund did not go through; the payments job retries');
      throw err;
    }
    const now = this.clock.now();
    await inTransaction(this.ds, async (m) => {
      const settled = await markRefunded(m, checkout.id, refund.id, now);
      // A card order's whole reversal is this refund: its money never became credits.
      if (settled && checkout.orderId) await this.cardOrders.refunded(m, checkout.orderId, now);
    });
    this.logger.warn({ ...context, refundId: refund.id, status: refund.status }, 'payment refunded to the card');
    return 'REFUNDED';
  }

  /** The payments job's retry of refunds still owed, oldest first. Returns how many it made. */
  async settleDueRefunds(limit = 50): Promise<number> {
    let refunded = 0;
    for (const id of await refundsDue(this.ds, limit)) {
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
