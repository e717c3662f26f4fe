import type Stripe from 'stripe';
import { loadStripe } from './stripe-sdk.js';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import { normaliseId } from '../../ids.js';
import type { Logger } from '../../logger.js';
import type { AccountsRepository } from '../accounts/accounts.repository.js';
import { recordAccountEvent } from './account-events.js';
import type { WebhookAck } from './billing.dto.js';
import { isPayable, type CardOrders } from './card-orders.js';
import type { Checkout } from './checkout.entity.js';
import type { CheckoutsRepository } from './checkouts.repository.js';
import type { CheckoutSessionsService } from './checkout-sessions.service.js';
import type { LedgerRepository } from './ledger.repository.js';
import type { LedgerService } from './ledger.service.js';
import type { PaymentEventOutcome } from './payment-event.entity.js';
import type { CheckoutSessionInfo } from './payment-provider.js';
import type { RentalHandoff } from './rental-handoff.js';
import { toInfo } from './stripe-payment-provider.js';

/** Stripe's own default: a signed event older than this is refused as a possible replay. */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** How long past a session's expiry reconciliation waits for the provider's own event. */
const RECONCILE_GRACE_MS = 10 * 60 * 1000;

/** The repositories a payment decision's transaction uses: the checkout, the ledger it credits, the account locks. */
export interface PaymentRepos {
  checkouts: CheckoutsRepository;
  ledger: LedgerRepository;
  accounts: AccountsRepository;
}

interface Applied {
  outcome: PaymentEventOutcome;
  checkout: Checkout | null;
}

export interface PaymentEventsOptions {
  /** Null refuses every event: in production the public development secret proves nothing. */
  webhookSecret: string | null;
  /** The rentals module's side of a card order's payment. */
  cardOrders: CardOrders;
  /** The rentals module's hook, looked up at call time because it is wired after billing. */
  rentalHandoff?: RentalHandoff;
}

/**
 * Turns verified payment events into money: a paid session credits its top-up exactly once (or
 * releases its card order to provisioning), an expired one closes its checkout. Every path is
 * keyed by the checkout row, locked for the decision, so concurrent and repeated deliveries of the
 * same payment converge; the ledger's unique `topup:<id>` reference is the last line of defence.
 */
export class PaymentEventsService {
  constructor(
    private readonly store: Store<PaymentRepos>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly ledger: LedgerService,
    private readonly sessions: CheckoutSessionsService,
    private readonly options: PaymentEventsOptions,
  ) {}

  /** Verifies and applies one Stripe webhook delivery. Nothing is written unless the signature holds. */
  async receiveStripe(rawBody: Buffer | undefined, signature: string | undefined): Promise<WebhookAck> {
    const secret = this.options.webhookSecret;
    // 503 rather than 400: the provider keeps redelivering until the secret is configured.
    if (!secret)
      throw new AppError('UNAVAILABLE', 'Webhooks are not configured on this service (STRIPE_WEBHOOK_SECRET).');
    if (!signature) throw new AppError('INVALID_REQUEST', 'The Stripe-Signature header is required.');
    if (!rawBody || rawBody.length === 0)
      throw new AppError('INVALID_REQUEST', 'The webhook body must be the JSON event exactly as signed.');
    let event: Stripe.Event;
    try {
      event = loadStripe().webhooks.constructEvent(
        rawBody,
        signature,
        secret,
        WEBHOOK_TOLERANCE_SECONDS,
        undefined,
        this.clock.now().getTime(),
      );
    } catch (err) {
      this.logger.warn(
        { reason: (err as Error).message.split('\n')[0] },
        'stripe webhook rejected: signature verification failed',
      );
      throw new AppError('INVALID_REQUEST', 'The webhook signature could not be verified.');
    }

    let applied: Applied;
    switch (event.type) {
      case 'checkout.session.completed':
      case 'checkout.session.async_payment_succeeded': {
        const session = toInfo(event.data.object);
        applied =
          session.paymentStatus === 'paid'
            ? await this.applyPaid(session, event.id, event.type)
            : await this.record(event.id, event.type, checkoutIdOf(session), 'AWAITING_ASYNC_PAYMENT');
        break;
      }
      case 'checkout.session.expired':
        applied = await this.applyClosed(toInfo(event.data.object), 'EXPIRED', event.id, event.type);
        break;
      case 'checkout.session.async_payment_failed':
        applied = await this.applyClosed(toInfo(event.data.object), 'FAILED', event.id, event.type);
        break;
      default:
        // Acknowledged so the provider stops resending; endpoints receive every type they subscribe to.
        this.logger.debug({ eventId: event.id, type: event.type }, 'stripe webhook ignored');
        return { received: true };
    }
    this.logger.info(
      { eventId: event.id, type: event.type, outcome: applied.outcome, checkoutId: applied.checkout?.id },
      'payment event applied',
    );
    await this.afterCommit(applied.checkout);
    return { received: true };
  }

  /**
   * Applies a paid session: credits a top-up or releases a card order, once per checkout.
   * `eventId` names the proof (a webhook event id, or `reconcile:<session>`).
   */
  async applyPaid(session: CheckoutSessionInfo, eventId: string, eventType: string): Promise<Applied> {
    const checkoutId = checkoutIdOf(session);
    return this.store.transaction(async (r) => {
      const checkout = checkoutId ? await this.sessions.lock(r.checkouts, checkoutId) : null;
      if (!checkout) {
        this.logger.warn({ eventId, sessionId: session.id }, 'paid session names no checkout of ours');
        return this.insertEvent(r, eventId, eventType, null, 'UNKNOWN_CHECKOUT');
      }
      if (checkout.status === 'PAID') return this.insertEvent(r, eventId, eventType, checkout, 'ALREADY_PAID');
      const problem = mismatch(checkout, session);
      if (problem) {
        // Money may have moved at the provider; this needs a person, not an automatic credit.
        this.logger.error(
          { eventId, checkoutId: checkout.id, sessionId: session.id, problem },
          'paid session does not match its checkout; not applied',
        );
        return this.insertEvent(r, eventId, eventType, checkout, 'MISMATCH');
      }
      const now = this.clock.now();
      let outcome: PaymentEventOutcome;
      if (checkout.purpose === 'TOPUP') {
        if (checkout.status !== 'OPEN' && checkout.status !== 'CREATING') {
          // A late payment of an expired link still buys the credits it was for: a top-up reserves
          // nothing that could have lapsed, so the money is kept as credits rather than refunded.
          this.logger.warn(
            { eventId, checkoutId: checkout.id, amountMinor: checkout.amountMinor, was: checkout.status },
            'late payment of a closed top-up credited',
          );
        }
        const credit = await this.ledger.post(r, {
          accountId: checkout.accountId,
          kind: 'TOPUP',
          amountMinor: checkout.amountMinor,
          externalRef: `topup:${checkout.id}`,
          description: `Card top-up ${checkout.id} (${checkout.provider} ${session.id})`,
          keyId: checkout.keyId,
        });
        // An account event (no key): the top-up is the account's, whichever key asked for the link.
        if (credit.posted)
          await recordAccountEvent(r, 'topup.paid', checkout.accountId, now, { amountMinor: checkout.amountMinor });
        outcome = 'CREDITED';
      } else {
        outcome = checkout.orderId
          ? await this.applyOrderPayment(r, checkout, checkout.orderId, eventId)
          : 'REFUND_DUE';
        if (outcome === 'REFUND_DUE') await this.sessions.markRefundDue(r.checkouts, checkout.id);
      }
      await r.checkouts.markPaid(checkout.id, eventId, checkout.sessionId ?? session.id, now);
      checkout.status = 'PAID';
      return this.insertEvent(r, eventId, eventType, checkout, outcome);
    });
  }

  /**
   * Releases a paid card order to provisioning while it may still run. A payment for an order that
   * can no longer run (cancelled, expired or failed before the money landed) is owed back in full:
   * the order ends without starting and the caller records the refund as due.
   */
  private async applyOrderPayment(
    r: PaymentRepos,
    checkout: Checkout,
    orderId: string,
    eventId: string,
  ): Promise<PaymentEventOutcome> {
    const now = this.clock.now();
    const order = await this.options.cardOrders.state(r, orderId, { lock: true });
    if (isPayable(order)) {
      await this.options.cardOrders.paid(r, orderId, now);
      return 'ORDER_PAID';
    }
    await this.options.cardOrders.paidTooLate(r, orderId, order, now);
    this.logger.warn(
      {
        eventId,
        orderId,
        checkoutId: checkout.id,
        amountMinor: checkout.amountMinor,
        currency: checkout.currency,
        orderStatus: order?.status ?? null,
        cancelled: order?.cancelled ?? false,
      },
      'payment arrived for a card order that can no longer run; refunding it',
    );
    return 'REFUND_DUE';
  }

  private async applyClosed(
    session: CheckoutSessionInfo,
    status: 'EXPIRED' | 'FAILED',
    eventId: string,
    eventType: string,
  ): Promise<Applied> {
    const checkoutId = checkoutIdOf(session);
    return this.store.transaction(async (r) => {
      const checkout = checkoutId ? await this.sessions.lock(r.checkouts, checkoutId) : null;
      if (!checkout) return this.insertEvent(r, eventId, eventType, null, 'UNKNOWN_CHECKOUT');
      if (checkout.sessionId && checkout.sessionId !== session.id)
        return this.insertEvent(r, eventId, eventType, checkout, 'MISMATCH');
      const closed = await this.sessions.closeUnpaid(r, checkout.id, status, session.id);
      return this.insertEvent(r, eventId, eventType, checkout, closed ? status : 'IGNORED');
    });
  }

  private async record(
    eventId: string,
    eventType: string,
    checkoutId: string | null,
    outcome: PaymentEventOutcome,
  ): Promise<Applied> {
    return this.store.transaction((r) => this.insertEvent(r, eventId, eventType, null, outcome, checkoutId));
  }

  /** One audit row per event id; a redelivery keeps the first delivery's outcome. */
  private async insertEvent(
    r: Pick<PaymentRepos, 'checkouts'>,
    eventId: string,
    type: string,
    checkout: Checkout | null,
    outcome: PaymentEventOutcome,
    checkoutId: string | null = checkout?.id ?? null,
  ): Promise<Applied> {
    await r.checkouts.paymentEvents.record({ eventId, type, checkoutId, outcome, at: this.clock.now() });
    return { outcome, checkout };
  }

  /**
   * What follows a committed payment decision: a refund it made due is attempted at once (a failure
   * is left to the payments job, so the provider is not asked to redeliver), and a paid card order
   * is released to the rentals module. Runs again on every redelivery of the same payment.
   */
  private async afterCommit(checkout: Checkout | null): Promise<void> {
    if (!checkout || checkout.status !== 'PAID') return;
    try {
      await this.sessions.settleRefund(checkout.id);
    } catch {
      // Counted and logged by settleRefund; the refund stays owed until the job makes it.
    }
    await this.handOff(checkout);
  }

  /** At-least-once release of a paid card order to the rentals module. */
  private async handOff(checkout: Checkout): Promise<void> {
    if (checkout.purpose !== 'ORDER' || !checkout.orderId) return;
    const handoff = this.options.rentalHandoff;
    if (!handoff) return;
    if (!(await this.options.cardOrders.released(checkout.orderId))) return;
    await handoff.cardOrderPaid(checkout.orderId);
  }

  /**
   * Closes the payment links of card orders their owners cancelled before paying: the provider's
   * session is expired first, so the link can no longer be paid, then the checkout closes and the
   * order ends as TERMINATED. A session paid in the meantime is left to its payment event, which
   * refunds it. `orderId` limits it to that order (a caller that has just cancelled one). Returns
   * how many it closed.
   */
  async closeCancelled(opts: { limit?: number; orderId?: string } = {}): Promise<number> {
    const provider = this.sessions.provider;
    const orderIds = await this.options.cardOrders.cancelledUnpaid({
      limit: opts.limit ?? 50,
      ...(opts.orderId ? { orderId: opts.orderId } : {}),
    });
    const rows = await this.store.read((r) => r.checkouts.unpaidOfOrders(orderIds));
    let closed = 0;
    for (const r of rows) {
      if (r.sessionId && provider && provider.id === r.provider) {
        let session: CheckoutSessionInfo | null;
        try {
          session = await provider.expireCheckoutSession(r.sessionId, `expire:${r.id}`);
        } catch (err) {
          this.logger.warn(
            { err, checkoutId: r.id },
            'the payment session of a cancelled card order could not be expired; a payment on it is refunded',
          );
          continue;
        }
        if (session && session.status !== 'expired') continue;
      }
      if (await this.store.transaction((tx) => this.sessions.closeUnpaid(tx, r.id, 'EXPIRED'))) closed++;
    }
    return closed;
  }

  /**
   * Safety net for lost webhooks: asks the provider about OPEN checkouts well past their expiry and
   * applies what it reports (a paid session read back over the authenticated API is as good a
   * proof as a signed event). Checkouts the provider keeps no record of are closed as expired.
   * Then closes the links of cancelled unpaid card orders and retries the refunds still owed.
   * Safe to run in several workers at once. Returns how many checkouts it settled.
   */
  async reconcile(limit = 50): Promise<number> {
    const provider = this.sessions.provider;
    const cutoff = new Date(this.clock.now().getTime() - RECONCILE_GRACE_MS);
    const stale = await this.store.read((r) => r.checkouts.staleOpen(cutoff, limit));
    let settled = 0;
    for (const checkout of stale) {
      const session =
        provider && provider.id === checkout.provider && checkout.sessionId
          ? await provider.retrieveCheckoutSession(checkout.sessionId)
          : null;
      let applied: Applied;
      if (session && session.status === 'complete' && session.paymentStatus === 'paid') {
        applied = await this.applyPaid(session, `reconcile:${session.id}`, 'reconcile.paid');
      } else if (session && session.status === 'open') {
        continue;
      } else if (session && session.status === 'complete') {
        // Completed with a delayed payment method; its own event will settle it.
        continue;
      } else {
        applied = await this.applyClosed(
          session ?? { ...closedStub(checkout) },
          'EXPIRED',
          `reconcile:${checkout.sessionId ?? checkout.id}`,
          'reconcile.expired',
        );
      }
      settled++;
      await this.afterCommit(applied.checkout);
    }
    return settled + (await this.closeCancelled({ limit })) + (await this.sessions.settleDueRefunds(limit));
  }
}

function checkoutIdOf(session: CheckoutSessionInfo): string | null {
  const id = session.metadata.checkout_id ?? session.clientReferenceId;
  return typeof id === 'string' ? normaliseId(id) : null;
}

/** Why a paid session cannot be applied to this checkout, or null when it matches. */
function mismatch(checkout: Checkout, session: CheckoutSessionInfo): string | null {
  if (checkout.sessionId && checkout.sessionId !== session.id)
    return `session ${session.id} is not the checkout's ${checkout.sessionId}`;
  if (session.amountTotal !== checkout.amountMinor)
    return `amount ${session.amountTotal} differs from ${checkout.amountMinor}`;
  if ((session.currency ?? '').toUpperCase() !== checkout.currency.toUpperCase())
    return `currency ${session.currency} differs from ${checkout.currency}`;
  if (session.metadata.account_id && session.metadata.account_id !== checkout.accountId) return 'account differs';
  return null;
}

function closedStub(checkout: Checkout): CheckoutSessionInfo {
  return {
    id: checkout.sessionId ?? checkout.id,
    url: null,
    expiresAt: checkout.expiresAt ?? new Date(0),
    status: 'expired',
    paymentStatus: 'unpaid',
    amountTotal: checkout.amountMinor,
    currency: checkout.currency,
    metadata: { checkout_id: checkout.id },
    clientReferenceId: checkout.id,
  };
}
