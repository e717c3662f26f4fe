import { createHash, randomUUID } from 'node:crypto';
import { ManualClock, type Clock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { KeyKind } from '../../src/modules/keys/api-key.entity.js';
import { KeysService } from '../../src/modules/keys/keys.service.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import { BillingService } from '../../src/modules/billing/billing.service.js';
import type { CardOrders, CardOrderState, PaymentTransaction } from '../../src/modules/billing/card-orders.js';
import type { Checkout, PaymentProviderId } from '../../src/modules/billing/checkout.entity.js';
import { CheckoutSessionsService } from '../../src/modules/billing/checkout-sessions.service.js';
import { LedgerService, type Posting } from '../../src/modules/billing/ledger.service.js';
import { PaymentEventsService } from '../../src/modules/billing/payment-events.service.js';
import type {
  CheckoutSessionInfo,
  CheckoutSessionRequest,
  PaymentProvider,
  RefundInfo,
  RefundRequest,
} from '../../src/modules/billing/payment-provider.js';
import type { RentalHandoff } from '../../src/modules/billing/rental-handoff.js';
import { loadStripe } from '../../src/modules/billing/stripe-sdk.js';
import { TopupsService } from '../../src/modules/billing/topups.service.js';
import { newAccount, newKey } from '../contracts/accounts.contract.js';
import { memoryStore } from './store/memory-repositories.js';

export const T0 = new Date('2026-05-01T12:00:00.000Z');
export const WEBHOOK_SECRET = 'whsec_unit_tier_secret';
/** How long the fake provider's sessions stay payable. */
export const SESSION_MS = 3600_000;

const digest = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 24);

/**
 * A payment provider for the unit tier: sessions kept by id (the same idempotency key answers the
 * same session, as Stripe's does), every call recorded, and failures on demand.
 */
export class FakePaymentProvider implements PaymentProvider {
  readonly created: CheckoutSessionRequest[] = [];
  readonly refunds: RefundRequest[] = [];
  readonly expired: string[] = [];
  readonly sessions = new Map<string, CheckoutSessionInfo>();
  /** The next calls of each kind that throw, as an unreachable provider does. */
  failCreates = 0;
  failRefunds = 0;
  failExpires = 0;
  refundStatus: RefundInfo['status'] = 'succeeded';

  constructor(
    private readonly clock: Clock,
    readonly id: PaymentProviderId = 'stripe',
  ) {}

  async createCheckoutSession(r: CheckoutSessionRequest): Promise<CheckoutSessionInfo> {
    this.created.push(r);
    if (this.failCreates > 0 && this.failCreates--) throw new Error('the provider is unreachable');
    const id = `cs_${digest(r.idempotencyKey)}`;
    if (!this.sessions.has(id))
      this.sessions.set(id, {
        id,
        url: `https://pay.example/${id}`,
        expiresAt: new Date(this.clock.now().getTime() + SESSION_MS),
        status: 'open',
        paymentStatus: 'unpaid',
        amountTotal: r.amountMinor,
        currency: r.currency,
        metadata: { checkout_id: r.checkoutId, account_id: r.accountId },
        clientReferenceId: r.checkoutId,
      });
    return structuredClone(this.sessions.get(id)!);
  }

  async retrieveCheckoutSession(sessionId: string): Promise<CheckoutSessionInfo | null> {
    const s = this.sessions.get(sessionId);
    return s ? structuredClone(s) : null;
  }

  async expireCheckoutSession(sessionId: string): Promise<CheckoutSessionInfo | null> {
    this.expired.push(sessionId);
    if (this.failExpires > 0 && this.failExpires--) throw new Error('the provider is unreachable');
    const s = this.sessions.get(sessionId);
    if (!s) return null;
    if (s.status === 'open') s.status = 'expired';
    return structuredClone(s);
  }

  async refund(r: RefundRequest): Promise<RefundInfo> {
    this.refunds.push(r);
    if (this.failRefunds > 0 && this.failRefunds--) throw new Error('the card can take no refund now');
    return { id: `re_${digest(r.idempotencyKey)}`, status: this.refundStatus };
  }

  /** The customer pays on the hosted page. */
  pay(sessionId: string): CheckoutSessionInfo {
    const s = this.sessions.get(sessionId);
    if (!s) throw new Error(`no session ${sessionId}`);
    Object.assign(s, { status: 'complete', paymentStatus: 'paid' });
    return structuredClone(s);
  }
}

/** A card order as the rentals module would hold it, reduced to what billing asks of it. */
export interface FakeOrder extends CardOrderState {
  hours: number | null;
  cancelRequestedAt?: number;
}

/** The rentals module's side of card payments: orders in a map, every call recorded in order. */
export class RecordingCardOrders implements CardOrders {
  readonly orders = new Map<string, FakeOrder>();
  readonly calls: string[] = [];

  /** An order waiting for its payment. */
  add(orderId: string = randomUUID(), o: Partial<FakeOrder> = {}): string {
    this.orders.set(orderId, { awaitingPayment: true, cancelled: false, status: 'AWAITING_PAYMENT', hours: 2, ...o });
    return orderId;
  }

  private order(tx: PaymentTransaction, orderId: string): FakeOrder {
    if (!tx.checkouts) throw new Error("a card order's change joins billing's transaction");
    const o = this.orders.get(orderId);
    if (!o) throw new Error(`no order ${orderId}`);
    return o;
  }

  async state(tx: PaymentTransaction, orderId: string): Promise<CardOrderState | null> {
    if (!tx.checkouts) throw new Error("a card order's state is read through billing's repositories");
    const o = this.orders.get(orderId);
    return o ? { awaitingPayment: o.awaitingPayment, cancelled: o.cancelled, status: o.status } : null;
  }

  async paid(tx: PaymentTransaction, orderId: string): Promise<void> {
    Object.assign(this.order(tx, orderId), { awaitingPayment: false, status: 'PENDING' });
    this.calls.push(`paid:${orderId}`);
  }

  async paidTooLate(tx: PaymentTransaction, orderId: string): Promise<void> {
    const o = this.order(tx, orderId);
    if (o.awaitingPayment) Object.assign(o, { awaitingPayment: false, status: 'TERMINATED' });
    this.calls.push(`paidTooLate:${orderId}`);
  }

  async closedUnpaid(tx: PaymentTransaction, orderId: string, why: 'EXPIRED' | 'FAILED'): Promise<void> {
    const o = this.order(tx, orderId);
    Object.assign(o, { awaitingPayment: false, status: o.cancelled ? 'TERMINATED' : 'FAILED' });
    this.calls.push(`closedUnpaid:${orderId}:${why}`);
  }

  async refunded(tx: PaymentTransaction, orderId: string): Promise<void> {
    this.order(tx, orderId);
    this.calls.push(`refunded:${orderId}`);
  }

  async released(orderId: string): Promise<boolean> {
    return this.orders.get(orderId)?.status === 'PENDING';
  }

  async cancelledUnpaid(opts: { limit: number; orderId?: string }): Promise<string[]> {
    return [...this.orders]
      .filter(([id, o]) => o.cancelled && o.awaitingPayment && (!opts.orderId || opts.orderId === id))
      .slice(0, opts.limit)
      .map(([id]) => id);
  }

  async hours(orderId: string): Promise<number | null> {
    return this.orders.get(orderId)?.hours ?? null;
  }
}

/** The billing module's services on one memory store, wired as the composition root wires them. */
export interface BillingWorld {
  store: ReturnType<typeof memoryStore>;
  clock: ManualClock;
  provider: FakePaymentProvider;
  cardOrders: RecordingCardOrders;
  /** Card orders handed to the rentals module after their payment committed. */
  handedOff: string[];
  ledger: LedgerService;
  keys: KeysService;
  billing: BillingService;
  sessions: CheckoutSessionsService;
  topups: TopupsService;
  events: PaymentEventsService;
}

export function billingWorld(
  o: { provider?: PaymentProviderId | null; webhookSecret?: string | null } = {},
): BillingWorld {
  const store = memoryStore();
  const clock = new ManualClock(T0);
  const logger = createLogger('silent');
  const provider = new FakePaymentProvider(clock, o.provider ?? 'stripe');
  const cardOrders = new RecordingCardOrders();
  const handedOff: string[] = [];
  const handoff: RentalHandoff = { cardOrderPaid: async (orderId) => void handedOff.push(orderId) };
  const ledger = new LedgerService(store, clock, { lowCreditsMinor: 500 });
  const keys = new KeysService(store, clock);
  const sessions = new CheckoutSessionsService(
    store,
    clock,
    logger,
    o.provider === null ? null : provider,
    'https://gpu.example',
    cardOrders,
  );
  return {
    store,
    clock,
    provider,
    cardOrders,
    handedOff,
    ledger,
    keys,
    billing: new BillingService(store, keys),
    sessions,
    topups: new TopupsService(store, clock, sessions),
    events: new PaymentEventsService(store, clock, logger, ledger, sessions, {
      webhookSecret: o.webhookSecret === undefined ? WEBHOOK_SECRET : o.webhookSecret,
      cardOrders,
      rentalHandoff: handoff,
    }),
  };
}

/** A new account with one key of `kind`, as the key's principal. */
export async function principal(w: BillingWorld, kind: KeyKind = 'AGENT', accountId?: string): Promise<Principal> {
  const account = newAccount({ ...(accountId ? { id: accountId } : {}) });
  if (!accountId) await w.store.transaction((r) => r.accounts.insert(account));
  const key = newKey(account.id, { kind, scopes: ['read', 'rent', 'billing'] });
  await w.store.transaction((r) => r.accounts.keys.insert(key));
  return { keyId: key.id, accountId: account.id, kind, scopes: key.scopes, key };
}

/** Posts to an account through the ledger, in a transaction of its own. */
export function post(w: BillingWorld, p: Omit<Posting, 'externalRef' | 'description'> & Partial<Posting>) {
  return w.store.transaction((r) =>
    w.ledger.post(r, { externalRef: `unit:${randomUUID()}`, description: 'unit posting', ...p }),
  );
}

/** The Stripe event a provider would send about a session, and its signature at the world's clock. */
export function signedEvent(
  w: BillingWorld,
  type: string,
  s: CheckoutSessionInfo,
  eventId = `evt_${randomUUID().replace(/-/g, '')}`,
): { body: Buffer; signature: string; eventId: string } {
  const payload = JSON.stringify({
    id: eventId,
    object: 'event',
    type,
    created: Math.floor(w.clock.now().getTime() / 1000),
    data: {
      object: {
        id: s.id,
        object: 'checkout.session',
        url: s.url,
        expires_at: Math.floor(s.expiresAt.getTime() / 1000),
        status: s.status,
        payment_status: s.paymentStatus,
        amount_total: s.amountTotal,
        currency: s.currency,
        metadata: s.metadata,
        client_reference_id: s.clientReferenceId,
      },
    },
  });
  const signature = loadStripe().webhooks.generateTestHeaderString({
    payload,
    secret: WEBHOOK_SECRET,
    timestamp: Math.floor(w.clock.now().getTime() / 1000),
  });
  return { body: Buffer.from(payload), signature, eventId };
}

/** Delivers a signed event to the webhook route's service; answers its event id. */
export async function deliver(w: BillingWorld, type: string, s: CheckoutSessionInfo, eventId?: string) {
  const e = signedEvent(w, type, s, eventId);
  await w.events.receiveStripe(e.body, e.signature);
  return e.eventId;
}

/** The checkout row as the store holds it. */
export function checkoutRow(w: BillingWorld, id: string): Checkout {
  const row = w.store.tables.table<Checkout>('checkouts').get(id);
  if (!row) throw new Error(`no checkout ${id}`);
  return row;
}

/** The code of the AppError a call is refused with. */
export async function refusal(p: Promise<unknown>): Promise<{ code?: string; message: string }> {
  try {
    await p;
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error('expected a refusal');
}
