import { Checkout, type CheckoutStatus } from '../../../src/modules/billing/checkout.entity.js';
import type {
  CheckoutSession,
  CheckoutsRepository,
  UnpaidOrderCheckout,
} from '../../../src/modules/billing/checkouts.repository.js';
import type {
  NewPaymentEvent,
  PaymentEventsRepository,
  RecordedPaymentEvent,
} from '../../../src/modules/billing/payment-events.repository.js';
import type { Viewer } from '../../../src/modules/keys/visibility.js';
import { DuplicateEntry } from './accounts.js';
import { MissingReference } from './ledger.js';
import type { MemoryTables } from './memory-store.js';

/*
 * The checkouts aggregate in memory: `checkouts` keyed by id, with the unique keys the SQL has (a
 * card order's one checkout, a provider's session) refused as the server refuses them, and
 * `payment_events` keyed by (provider, event id), a redelivery ignored as INSERT IGNORE does; a
 * checkout's account must exist, as its foreign key requires.
 * Transactions of the memory store run one at a time, so a row lock is a plain read.
 */

const time = (d: Date | null) => (d === null ? Number.POSITIVE_INFINITY : d.getTime());

export class MemoryPaymentEventsRepository implements PaymentEventsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<RecordedPaymentEvent>('payment_events');
  }

  async record(e: NewPaymentEvent): Promise<void> {
    this.rows.insert(`stripe\u0000${e.eventId}`, {
      provider: 'stripe',
      eventId: e.eventId,
      type: e.type.slice(0, 100),
      checkoutId: e.checkoutId,
      outcome: e.outcome,
      receivedAt: e.at,
    });
  }

  async find(provider: string, eventId: string): Promise<RecordedPaymentEvent | null> {
    return this.rows.get(`${provider}\u0000${eventId}`) ?? null;
  }
}

export class MemoryCheckoutsRepository implements CheckoutsRepository {
  constructor(private readonly tables: MemoryTables) {}

  get paymentEvents(): PaymentEventsRepository {
    return new MemoryPaymentEventsRepository(this.tables);
  }

  private get rows() {
    return this.tables.table<Checkout>('checkouts');
  }

  /** Refuses a write that would give a provider's session to a second checkout (uq_checkouts_session). */
  private assertSessionFree(id: string, provider: string, sessionId: string | null): void {
    if (sessionId === null) return;
    if (this.rows.first((c) => c.id !== id && c.provider === provider && c.sessionId === sessionId))
      throw new DuplicateEntry(`uq_checkouts_session ${provider}-${sessionId}`);
  }

  private change(id: string, patch: Partial<Checkout>): void {
    const row = this.rows.get(id);
    if (!row) return;
    if (patch.sessionId !== undefined) this.assertSessionFree(id, row.provider, patch.sessionId);
    this.rows.update(id, patch);
  }

  async insert(checkout: Checkout): Promise<void> {
    if (this.rows.has(checkout.id)) throw new DuplicateEntry(`checkouts.PRIMARY ${checkout.id}`);
    if (checkout.orderId !== null && this.rows.first((c) => c.orderId === checkout.orderId))
      throw new DuplicateEntry(`uq_checkouts_order ${checkout.orderId}`);
    this.assertSessionFree(checkout.id, checkout.provider, checkout.sessionId);
    if (!this.tables.table('accounts').has(checkout.accountId))
      throw new MissingReference(`fk_checkouts_account ${checkout.accountId}`);
    this.rows.insert(checkout.id, Object.assign(new Checkout(), checkout));
  }

  async find(id: string): Promise<Checkout | null> {
    return this.rows.get(id) ?? null;
  }

  async get(id: string): Promise<Checkout> {
    const row = this.rows.get(id);
    if (!row) throw new Error(`Could not find any entity of type "Checkout" matching id ${id} (memory store)`);
    return row;
  }

  async visibleTopup(viewer: Viewer, id: string): Promise<Checkout | null> {
    const row = this.rows.get(id);
    if (!row || row.purpose !== 'TOPUP' || row.accountId !== viewer.accountId) return null;
    return viewer.kind === 'AGENT' && row.keyId !== viewer.keyId ? null : row;
  }

  async storeSession(id: string, session: CheckoutSession): Promise<void> {
    if (this.rows.get(id)?.status === 'CREATING') this.change(id, session);
  }

  async lock(id: string): Promise<Checkout | null> {
    return this.find(id);
  }

  async setStatus(id: string, status: CheckoutStatus, sessionId: string | null, at: Date): Promise<void> {
    this.change(id, { status, sessionId, updatedAt: at });
  }

  async ofOrder(orderId: string): Promise<Checkout> {
    const row = this.rows.first((c) => c.orderId === orderId);
    if (!row) throw new Error(`Could not find any entity of type "Checkout" matching order ${orderId} (memory store)`);
    return row;
  }

  async paidOfOrder(orderId: string): Promise<Checkout | null> {
    return this.rows.first((c) => c.orderId === orderId && c.purpose === 'ORDER' && c.status === 'PAID') ?? null;
  }

  async markRefundPending(id: string, at: Date): Promise<void> {
    if (this.rows.get(id)?.refundStatus === null)
      this.change(id, { refundStatus: 'PENDING', refundRequestedAt: at, updatedAt: at });
  }

  async countRefundAttempt(id: string, at: Date): Promise<void> {
    const row = this.rows.get(id);
    if (row?.refundStatus === 'PENDING') this.change(id, { refundAttempts: row.refundAttempts + 1, updatedAt: at });
  }

  async markRefunded(id: string, refundId: string, at: Date): Promise<boolean> {
    if (this.rows.get(id)?.refundStatus !== 'PENDING') return false;
    this.change(id, { refundStatus: 'SUCCEEDED', refundId, refundedAt: at, updatedAt: at });
    return true;
  }

  async refundsDue(limit: number): Promise<string[]> {
    return this.rows
      .where((c) => c.refundStatus === 'PENDING')
      .sort((a, b) => time(a.refundRequestedAt) - time(b.refundRequestedAt))
      .slice(0, limit)
      .map((c) => c.id);
  }

  async markPaid(id: string, paidEventId: string, sessionId: string, at: Date): Promise<void> {
    this.change(id, { status: 'PAID', paidAt: at, paidEventId, sessionId, updatedAt: at });
  }

  async staleOpen(cutoff: Date, limit: number): Promise<Checkout[]> {
    return this.rows
      .where((c) => c.status === 'OPEN' && c.expiresAt !== null && c.expiresAt.getTime() < cutoff.getTime())
      .sort((a, b) => time(a.expiresAt) - time(b.expiresAt))
      .slice(0, limit);
  }

  async unpaidOfOrders(orderIds: readonly string[]): Promise<UnpaidOrderCheckout[]> {
    const rank = new Map(orderIds.map((id, i) => [id, i]));
    return this.rows
      .where(
        (c) =>
          c.orderId !== null &&
          rank.has(c.orderId) &&
          c.purpose === 'ORDER' &&
          (c.status === 'CREATING' || c.status === 'OPEN'),
      )
      .sort((a, b) => rank.get(a.orderId!)! - rank.get(b.orderId!)!)
      .map((c) => ({ id: c.id, sessionId: c.sessionId, provider: c.provider, orderId: c.orderId }));
  }
}
