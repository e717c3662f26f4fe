import type { Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import type { Store } from '../../db/store.js';
import type { Logger } from '../../logger.js';
import type { IdempotencyRepository } from '../idempotency/idempotency.repository.js';
import type { CardOrders } from './card-orders.js';
import { CheckoutSessionsService } from './checkout-sessions.service.js';
import type { LedgerService } from './ledger.service.js';
import { PaymentEventsService, type PaymentRepos } from './payment-events.service.js';
import { createPaymentProvider } from './payment-provider-factory.js';
import type { PaymentProvider } from './payment-provider.js';
import type { RentalHandoff } from './rental-handoff.js';
import { TopupsService } from './topups.service.js';

/** Card payments: hosted top-ups, the checkouts of card orders, and the events that settle them. */
export interface Payments {
  /** Null when no provider may run (production without a Stripe key). */
  provider: PaymentProvider | null;
  sessions: CheckoutSessionsService;
  topups: TopupsService;
  events: PaymentEventsService;
  /** The rentals module's side of a card order's payment. */
  cardOrders: CardOrders;
}

export interface PaymentsDeps {
  config: Config;
  /** The store of the checkouts, the ledger and the account locks, and the top-ups' Idempotency-Keys. */
  store: Store<PaymentRepos & { idempotency: IdempotencyRepository }>;
  clock: Clock;
  logger: Logger;
  ledger: LedgerService;
  /** The rentals module's side of a card order's payment. */
  cardOrders: CardOrders;
  /** Receives paid card orders (the rentals module's hand-off). Absent, they wait in PENDING. */
  rentalHandoff?: RentalHandoff;
  /** Overrides the provider chosen from config (tests). */
  provider?: PaymentProvider | null;
}

export function createPayments({
  config,
  store,
  clock,
  logger,
  ledger,
  cardOrders,
  rentalHandoff,
  provider,
}: PaymentsDeps): Payments {
  const log = logger.child({ component: 'payments' });
  const chosen = provider === undefined ? createPaymentProvider(config, clock, log) : provider;
  const sessions = new CheckoutSessionsService(store, clock, log, chosen, config.http.publicBaseUrl, cardOrders);
  return {
    provider: chosen,
    sessions,
    topups: new TopupsService(store, clock, sessions),
    events: new PaymentEventsService(store, clock, log, ledger, sessions, {
      webhookSecret:
        config.nodeEnv === 'production' && config.stripe.webhookSecretGenerated ? null : config.stripe.webhookSecret,
      cardOrders,
      rentalHandoff,
    }),
    cardOrders,
  };
}

/** How often the worker looks for payments whose webhook never arrived. */
export const RECONCILE_PAYMENTS_EVERY_MS = 5 * 60 * 1000;

/**
 * The payments.reconcile job: settles checkouts left OPEN well past their expiry (lost or
 * misconfigured webhooks) by asking the payment provider, closes the payment links of card orders
 * cancelled before payment, and retries refunds the provider has not made yet. Safe to run twice
 * or in several workers at once: every settlement goes through the same locked, once-per-checkout
 * path as a webhook, and every refund carries its checkout's idempotency key.
 */
export async function reconcilePayments(deps: { payments: Pick<Payments, 'events'>; logger: Logger }): Promise<number> {
  const settled = await deps.payments.events.reconcile();
  if (settled) deps.logger.info({ settled }, 'payments reconciled');
  return settled;
}
