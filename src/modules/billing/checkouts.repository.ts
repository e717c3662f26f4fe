import { DataSource, EntityManager, In } from 'typeorm';
import type { Executor } from '../../db/mysql-store.js';
import { visibleRows, type Viewer } from '../keys/visibility.js';
import { Checkout, type CheckoutStatus } from './checkout.entity.js';
import { MysqlPaymentEventsRepository, type PaymentEventsRepository } from './payment-events.repository.js';

// The only code that reads or writes `checkouts` rows (top-ups and card checkouts). The rules
// (when a checkout may close, when a refund is due) are the services'; the conditions here keep a
// write from undoing another's (a session is stored only on a CREATING row, a refund settled
// only once).

/** Where a read runs: on its own, or in the caller's transaction. */
type Reader = DataSource | EntityManager;

/** The provider session a CREATING checkout was given. */
export type CheckoutSession = Pick<Checkout, 'status' | 'sessionId' | 'checkoutUrl' | 'expiresAt' | 'updatedAt'>;

/** Writes a new checkout row, in the caller's transaction. */
export async function insertCheckout(manager: EntityManager, checkout: Checkout): Promise<void> {
  await manager.insert(Checkout, checkout);
}

/** Checkout `id`, or null. */
export function findCheckout(sql: Reader, id: string): Promise<Checkout | null> {
  return sql.getRepository(Checkout).findOneBy({ id });
}

/** Checkout `id`; throws when there is none (an id the caller has just read or written). */
export function getCheckout(sql: Reader, id: string): Promise<Checkout> {
  return sql.getRepository(Checkout).findOneByOrFail({ id });
}

/** Top-up `id`, if `viewer` may see it (keys/visibility.ts). */
export function visibleTopup(ds: Reader, viewer: Viewer, id: string): Promise<Checkout | null> {
  return ds.getRepository(Checkout).findOneBy({ ...visibleRows(viewer), id, purpose: 'TOPUP' });
}

/** Stores the session of a checkout still CREATING; a checkout that has moved on keeps its own. */
export async function storeSession(ds: Reader, id: string, session: CheckoutSession): Promise<void> {
  await ds.getRepository(Checkout).update({ id, status: 'CREATING' }, session);
}

/** Locks checkout `id` FOR UPDATE in the caller's transaction; null when there is none. */
export function lockCheckout(manager: EntityManager, id: string): Promise<Checkout | null> {
  return manager
    .getRepository(Checkout)
    .createQueryBuilder('c')
    .setLock('pessimistic_write')
    .where('c.id = :id', { id })
    .getOne();
}

/** Sets a checkout's status (and the session it learnt of, if any). */
export async function setCheckoutStatus(
  manager: EntityManager,
  id: string,
  status: CheckoutStatus,
  sessionId: string | null,
  at: Date,
): Promise<void> {
  await manager.update(Checkout, { id }, { status, sessionId, updatedAt: at });
}

/** The checkout of card order `orderId`; it must exist. */
export function checkoutOfOrder(sql: Reader, orderId: string): Promise<Checkout> {
  return sql.getRepository(Checkout).findOneByOrFail({ orderId });
}

/** The paid checkout of card order `orderId`, or null. */
export function paidCheckoutOfOrder(sql: Reader, orderId: string): Promise<Checkout | null> {
  return sql.getRepository(Checkout).findOneBy({ orderId, purpose: 'ORDER', status: 'PAID' });
}

/** Marks a checkout's refund PENDING, unless a refund was already asked for. */
export async function markRefundPending(manager: EntityManager, id: string, at: Date): Promise<void> {
  await manager
    .createQueryBuilder()
    .update(Checkout)
    .set({ refundStatus: 'PENDING', refundRequestedAt: at, updatedAt: at })
    .where('id = :id AND refund_status IS NULL', { id })
    .execute();
}

/** Counts a failed attempt at a PENDING refund. */
export async function countRefundAttempt(ds: Reader, id: string, at: Date): Promise<void> {
  await ds
    .createQueryBuilder()
    .update(Checkout)
    .set({ refundAttempts: () => 'refund_attempts + 1', updatedAt: at })
    .where(`id = :id AND refund_status = 'PENDING'`, { id })
    .execute();
}

/** Records a PENDING refund as made; false when it was not PENDING (another caller recorded it). */
export async function markRefunded(manager: EntityManager, id: string, refundId: string, at: Date): Promise<boolean> {
  const res = await manager
    .createQueryBuilder()
    .update(Checkout)
    .set({ refundStatus: 'SUCCEEDED', refundId, refundedAt: at, updatedAt: at })
    .where(`id = :id AND refund_status = 'PENDING'`, { id })
    .execute();
  return Boolean(res.affected);
}

/** Ids of checkouts whose refund is still owed, the longest owed first. */
export async function refundsDue(ds: Reader, limit: number): Promise<string[]> {
  const due = await ds
    .getRepository(Checkout)
    .createQueryBuilder('c')
    .select('c.id')
    .where(`c.refund_status = 'PENDING'`)
    .orderBy('c.refund_requested_at', 'ASC')
    .limit(limit)
    .getMany();
  return due.map((c) => c.id);
}

/** Records that a checkout was paid, by which proof, and the session it was paid through. */
export async function markPaid(
  manager: EntityManager,
  id: string,
  paidEventId: string,
  sessionId: string,
  at: Date,
): Promise<void> {
  await manager.update(Checkout, { id }, { status: 'PAID', paidAt: at, paidEventId, sessionId, updatedAt: at });
}

/** OPEN checkouts whose session expired before `cutoff`, the longest expired first. */
export function staleOpenCheckouts(ds: Reader, cutoff: Date, limit: number): Promise<Checkout[]> {
  return ds
    .getRepository(Checkout)
    .createQueryBuilder('c')
    .where('c.status = :open AND c.expires_at < :cutoff', { open: 'OPEN', cutoff })
    .orderBy('c.expires_at', 'ASC')
    .take(limit)
    .getMany();
}

/** The unpaid (CREATING or OPEN) checkouts of these card orders, in the orders' order. */
export async function unpaidCheckoutsOfOrders(
  ds: Reader,
  orderIds: readonly string[],
): Promise<Pick<Checkout, 'id' | 'sessionId' | 'provider' | 'orderId'>[]> {
  if (orderIds.length === 0) return [];
  const rows = await ds.getRepository(Checkout).find({
    select: { id: true, sessionId: true, provider: true, orderId: true },
    where: { orderId: In([...orderIds]), purpose: 'ORDER', status: In(['CREATING', 'OPEN']) },
  });
  const rank = new Map(orderIds.map((id, i) => [id, i]));
  return rows.sort((a, b) => (rank.get(a.orderId!) ?? 0) - (rank.get(b.orderId!) ?? 0));
}

/** A card order's unpaid checkout, as {@link CheckoutsRepository.unpaidOfOrders} answers it. */
export type UnpaidOrderCheckout = Pick<Checkout, 'id' | 'sessionId' | 'provider' | 'orderId'>;

/**
 * The checkouts aggregate: `checkouts` rows (top-ups and card checkouts) and the audit trail of the
 * provider events that settled them (`payment_events`). The conditional writes keep one caller's
 * write from undoing another's: a session is stored only on a CREATING row, a refund asked for and
 * recorded once. Decisions about a checkout take its row lock ({@link lock}) first.
 */
export interface CheckoutsRepository {
  /** The provider events recorded against checkouts. */
  readonly paymentEvents: PaymentEventsRepository;
  /**
   * Writes a new checkout row. A second checkout of the same card order, or a taken id, is refused
   * with an error whose `code` is ER_DUP_ENTRY, and nothing is written.
   */
  insert(checkout: Checkout): Promise<void>;
  /** Checkout `id`, or null: a plain read (as the caller's transaction sees it). */
  find(id: string): Promise<Checkout | null>;
  /** Checkout `id` as {@link find} reads it; rejects when there is none (an id just read or written). */
  get(id: string): Promise<Checkout>;
  /** Top-up `id` (a checkout of purpose TOPUP) if `viewer` may see it (keys/visibility.ts), or null. */
  visibleTopup(viewer: Viewer, id: string): Promise<Checkout | null>;
  /** Stores the provider session of a checkout still CREATING; a checkout that has moved on keeps its own. */
  storeSession(id: string, session: CheckoutSession): Promise<void>;
  /** Locks checkout `id` FOR UPDATE and reads it; null when there is none. In a transaction only. */
  lock(id: string): Promise<Checkout | null>;
  /** Sets a checkout's status and session (null keeps none), whatever it was: the caller holds its lock. */
  setStatus(id: string, status: CheckoutStatus, sessionId: string | null, at: Date): Promise<void>;
  /** The checkout of card order `orderId`; rejects when there is none. */
  ofOrder(orderId: string): Promise<Checkout>;
  /** The PAID checkout of card order `orderId`, or null. */
  paidOfOrder(orderId: string): Promise<Checkout | null>;
  /** Marks the checkout's refund PENDING (owed since `at`), unless a refund was already asked for. */
  markRefundPending(id: string, at: Date): Promise<void>;
  /** Counts a failed attempt at a PENDING refund; nothing when the refund is not PENDING. Stands alone. */
  countRefundAttempt(id: string, at: Date): Promise<void>;
  /** Records a PENDING refund as made; false when it was not PENDING (another caller recorded it). */
  markRefunded(id: string, refundId: string, at: Date): Promise<boolean>;
  /** Ids of the checkouts whose refund is PENDING, the longest owed first, at most `limit`. */
  refundsDue(limit: number): Promise<string[]>;
  /** Records that the checkout was paid, by which proof, through which session: the caller holds its lock. */
  markPaid(id: string, paidEventId: string, sessionId: string, at: Date): Promise<void>;
  /** OPEN checkouts whose session expired before `cutoff`, the longest expired first, at most `limit`. */
  staleOpen(cutoff: Date, limit: number): Promise<Checkout[]>;
  /** The unpaid (CREATING or OPEN) checkouts of these card orders, in the orders' order. */
  unpaidOfOrders(orderIds: readonly string[]): Promise<UnpaidOrderCheckout[]>;
}

/** TypeORM's entity calls run on the DataSource or a transaction's manager, not in a pipelined transaction. */
function managerOf(sql: Executor): EntityManager {
  if (sql instanceof DataSource) return sql.manager;
  if (sql instanceof EntityManager) return sql;
  throw new Error('checkouts are read and written only through TypeORM, not in a pipelined transaction');
}

/** The checkouts aggregate on MySQL: the statements above, on one executor. */
export class MysqlCheckoutsRepository implements CheckoutsRepository {
  private events?: PaymentEventsRepository;

  constructor(private readonly sql: Executor) {}

  get paymentEvents(): PaymentEventsRepository {
    return (this.events ??= new MysqlPaymentEventsRepository(this.sql));
  }

  insert(checkout: Checkout): Promise<void> {
    return insertCheckout(managerOf(this.sql), checkout);
  }

  find(id: string): Promise<Checkout | null> {
    return findCheckout(managerOf(this.sql), id);
  }

  get(id: string): Promise<Checkout> {
    return getCheckout(managerOf(this.sql), id);
  }

  visibleTopup(viewer: Viewer, id: string): Promise<Checkout | null> {
    return visibleTopup(managerOf(this.sql), viewer, id);
  }

  storeSession(id: string, session: CheckoutSession): Promise<void> {
    return storeSession(managerOf(this.sql), id, session);
  }

  lock(id: string): Promise<Checkout | null> {
    return lockCheckout(managerOf(this.sql), id);
  }

  setStatus(id: string, status: CheckoutStatus, sessionId: string | null, at: Date): Promise<void> {
    return setCheckoutStatus(managerOf(this.sql), id, status, sessionId, at);
  }

  ofOrder(orderId: string): Promise<Checkout> {
    return checkoutOfOrder(managerOf(this.sql), orderId);
  }

  paidOfOrder(orderId: string): Promise<Checkout | null> {
    return paidCheckoutOfOrder(managerOf(this.sql), orderId);
  }

  markRefundPending(id: string, at: Date): Promise<void> {
    return markRefundPending(managerOf(this.sql), id, at);
  }

  countRefundAttempt(id: string, at: Date): Promise<void> {
    return countRefundAttempt(managerOf(this.sql), id, at);
  }

  markRefunded(id: string, refundId: string, at: Date): Promise<boolean> {
    return markRefunded(managerOf(this.sql), id, refundId, at);
  }

  refundsDue(limit: number): Promise<string[]> {
    return refundsDue(managerOf(this.sql), limit);
  }

  markPaid(id: string, paidEventId: string, sessionId: string, at: Date): Promise<void> {
    return markPaid(managerOf(this.sql), id, paidEventId, sessionId, at);
  }

  staleOpen(cutoff: Date, limit: number): Promise<Checkout[]> {
    return staleOpenCheckouts(managerOf(this.sql), cutoff, limit);
  }

  unpaidOfOrders(orderIds: readonly string[]): Promise<UnpaidOrderCheckout[]> {
    return unpaidCheckoutsOfOrders(managerOf(this.sql), orderIds);
  }
}
