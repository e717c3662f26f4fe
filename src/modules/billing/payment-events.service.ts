import Stripe from 'stripe';
import type { DataSource, EntityManager } from 'typeorm';
import type { Clock } from '../../clock.js';
import { inTransaction } from '../../db/transaction.js';
import { AppError } from '../../errors/app-error.js';
import type { Logger } from '../../logger.js';
import { Order } from '../rentals/order.entity.js';
import { transition } from '../rentals/rental-state.js';
import type { WebhookAck } from './billing.dto.js';
import { Checkout } from './checkout.entity.js';
import type { CheckoutSessionsService } from './checkout-sessions.service.js';
import type { LedgerService } from './ledger.service.js';
import type { PaymentEventOutcome } from './payment-event.entity.js';
import type { CheckoutSessionInfo } from './payment-provider.js';
import type { RentalHandoff } from './rental-handoff.js';
import { toInfo } from './stripe-payment-provider.js';

/** Stripe's own default: a signed event older than this is refused as a possible replay. */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** How long past a session's expiry reconciliation waits for the provider's own event. */
const RECONCILE_GRACE_MS = 10 * 60 * 1000;

interface Applied {
  outcome: PaymentEventOutcome;
  checkout: Checkout | null;
}

export interface PaymentEventsOptions {
  /** Null refuses every event: in production the public development secret proves nothing. */
  webhookSecret: string | null;
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
    private readonly ds: DataSource,
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
    if (!secret) throw new AppError('UNAVAILABLE', 'Webhooks are not configured on this service (STRIPE_WEBHOOK_SECRET).');
    if (!signature) throw new AppError('INVALID_REQUEST', 'The Stripe-Signature header is required.');
    if (!rawBody || rawBody.length === 0) throw new AppError('INVALID_REQUEST', 'The webhook body must be the JSON event exactly as signed.');
    let event: Stripe.Event;
    try {
      event = Stripe.webhooks.constructEvent(rawBody, signature, secret, WEBHOOK_TOLERANCE_SECONDS, undefined, this.clock.now().getTime());
    } catch (err) {
      this.logger.warn({ reason: (err as Error).message.split('\n')[0] }, 'stripe webhook rejected: signature verification failed');
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
    this.logger.info({ eventId: event.id, type: event.type, outcome: applied.outcome, checkoutId: applied.checkout?.id }, 'payment event applied');
    await this.handOff(applied.checkout);
    return { received: true };
  }

  /**
   * Applies a paid session: credits a top-up or releases a card order, once per checkout.
   * `eventId` names the proof (a webhook event id, or `reconcile:<session>`).
   */
  async applyPaid(session: CheckoutSessionInfo, eventId: string, eventType: string): Promise<Applied> {
    const checkoutId = checkoutIdOf(session);
    return inTransaction(this.ds, async (m) => {
      const checkout = checkoutId ? await this.sessions.lock(m, checkoutId) : null;
      if (!checkout) {
        this.logger.warn({ eventId, sessionId: session.id }, 'paid session names no checkout of ours');
        return this.insertEvent(m, eventId, eventType, null, 'UNKNOWN_CHECKOUT');
      }
      if (checkout.status === 'PAID') return this.insertEvent(m, eventId, eventType, checkout, 'ALREADY_PAID');
      const problem = mismatch(checkout, session);
      if (problem) {
        // Money may have moved at the provider; this needs a person, not an automatic credit.
        this.logger.error({ eventId, checkoutId: checkout.id, sessionId: session.id, problem }, 'paid session does not match its checkout; not applied');
        return this.insertEvent(m, eventId, eventType, checkout, 'MISMATCH');
      }
      const now = this.clock.now();
      if (checkout.purpose === 'TOPUP') {
        await this.ledger.post(m, {
          accountId: checkout.accountId,
          kind: 'TOPUP',
          amountMinor: checkout.amountMinor,
          externalRef: `topup:${checkout.id}`,
          description: `Card top-up ${checkout.id} (${checkout.provider} ${session.id})`,
          keyId: checkout.keyId,
        });
      } else if (checkout.orderId) {
        const moved = await transition(m, { orderId: checkout.orderId }, ['AWAITING_PAYMENT'], 'PENDING', { at: now });
        if (!moved) {
          this.logger.error({ eventId, checkoutId: checkout.id, orderId: checkout.orderId }, 'card order paid but no longer awaiting payment; refund it by hand');
        }
      }
      await m.update(Checkout, { id: checkout.id }, { status: 'PAID', paidAt: now, paidEventId: eventId, sessionId: checkout.sessionId ?? session.id, updatedAt: now });
      checkout.status = 'PAID';
      return this.insertEvent(m, eventId, eventType, checkout, checkout.purpose === 'TOPUP' ? 'CREDITED' : 'ORDER_PAID');
    });
  }

  private async applyClosed(session: CheckoutSessionInfo, status: 'EXPIRED' | 'FAILED', eventId: string, eventType: string): Promise<Applied> {
    const checkoutId = checkoutIdOf(session);
    return inTransaction(this.ds, async (m) => {
      const checkout = checkoutId ? await this.sessions.lock(m, checkoutId) : null;
      if (!checkout) return this.insertEvent(m, eventId, eventType, null, 'UNKNOWN_CHECKOUT');
      if (checkout.sessionId && checkout.sessionId !== session.id) return this.insertEvent(m, eventId, eventType, checkout, 'MISMATCH');
      const closed = await this.sessions.closeUnpaid(m, checkout.id, status, session.id);
      return this.insertEvent(m, eventId, eventType, checkout, closed ? status : 'IGNORED');
    });
  }

  private async record(eventId: string, eventType: string, checkoutId: string | null, outcome: PaymentEventOutcome): Promise<Applied> {
    return inTransaction(this.ds, (m) => this.insertEvent(m, eventId, eventType, null, outcome, checkoutId));
  }

  /** One audit row per event id; a redelivery keeps the first delivery's outcome. */
  private async insertEvent(
    m: EntityManager,
    eventId: string,
    type: string,
    checkout: Checkout | null,
    outcome: PaymentEventOutcome,
    checkoutId: string | null = checkout?.id ?? null,
  ): Promise<Applied> {
    await m.query(
      `INSERT IGNORE INTO payment_events (provider, event_id, type, checkout_id, outcome, received_at) VALUES ('stripe', ?, ?, ?, ?, ?)`,
      [eventId, type.slice(0, 100), checkoutId, outcome, this.clock.now()],
    );
    return { outcome, checkout };
  }

  /** At-least-once release of a paid card order to the rentals module. */
  private async handOff(checkout: Checkout | null): Promise<void> {
    if (!checkout || checkout.purpose !== 'ORDER' || checkout.status !== 'PAID' || !checkout.orderId) return;
    const handoff = this.options.rentalHandoff;
    if (!handoff) return;
    const order = await this.ds.getRepository(Order).findOneBy({ id: checkout.orderId });
    if (order?.status !== 'PENDING') return;
    await handoff.cardOrderPaid(order.id);
  }

  /**
   * Safety net for lost webhooks: asks the provider about OPEN checkouts well past their expiry and
   * applies what it reports (a paid session read back over the authenticated API is as good a
   * proof as a signed event). Checkouts the provider keeps no record of are closed as expired.
   * Safe to run in several workers at once. Returns how many checkouts it settled.
   */
  async reconcile(limit = 50): Promise<number> {
    const provider = this.sessions.provider;
    const cutoff = new Date(this.clock.now().getTime() - RECONCILE_GRACE_MS);
    const stale = await this.ds
      .getRepository(Checkout)
      .createQueryBuilder('c')
      .where('c.status = :open AND c.expires_at < :cutoff', { open: 'OPEN', cutoff })
      .orderBy('c.expires_at', 'ASC')
      .take(limit)
      .getMany();
    let settled = 0;
    for (const checkout of stale) {
      const session = provider && provider.id === checkout.provider && checkout.sessionId ? await provider.retrieveCheckoutSession(checkout.sessionId) : null;
      let applied: Applied;
      if (session && session.status === 'complete' && session.paymentStatus === 'paid') {
        applied = await this.applyPaid(session, `reconcile:${session.id}`, 'reconcile.paid');
      } else if (session && session.status === 'open') {
        continue;
      } else if (session && session.status === 'complete') {
        // Completed with a delayed payment method; its own event will settle it.
        continue;
      } else {
        applied = await this.applyClosed(session ?? { ...closedStub(checkout) }, 'EXPIRED', `reconcile:${checkout.sessionId ?? checkout.id}`, 'reconcile.expired');
      }
      settled++;
      await this.handOff(applied.checkout);
    }
    return settled;
  }
}

function checkoutIdOf(session: CheckoutSessionInfo): string | null {
  const id = session.metadata.checkout_id ?? session.clientReferenceId;
  return typeof id === 'string' && /^[0-9a-f-]{36}$/.test(id) ? id : null;
}

/** Why a paid session cannot be applied to this checkout, or null when it matches. */
function mismatch(checkout: Checkout, session: CheckoutSessionInfo): string | null {
  if (checkout.sessionId && checkout.sessionId !== session.id) return `session ${session.id} is not the checkout's ${checkout.sessionId}`;
  if (session.amountTotal !== checkout.amountMinor) return `amount ${session.amountTotal} differs from ${checkout.amountMinor}`;
  if ((session.currency ?? '').toUpperCase() !== checkout.currency.toUpperCase()) return `currency ${session.currency} differs from ${checkout.currency}`;
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
