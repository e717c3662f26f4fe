import { In, type DataSource, type EntityManager } from 'typeorm';
import { visibleRows, type Viewer } from '../keys/visibility.js';
import { Checkout, type CheckoutStatus } from './checkout.entity.js';

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
export function visibleTopup(ds: DataSource, viewer: Viewer, id: string): Promise<Checkout | null> {
  return ds.getRepository(Checkout).findOneBy({ ...visibleRows(viewer), id, purpose: 'TOPUP' });
}

/** Stores the session of a checkout still CREATING; a checkout that has moved on keeps its own. */
export async function storeSession(ds: DataSource, id: string, session: CheckoutSession): Promise<void> {
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
export async function countRefundAttempt(ds: DataSource, id: string, at: Date): Promise<void> {
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
export async function refundsDue(ds: DataSource, limit: number): Promise<string[]> {
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
export function staleOpenCheckouts(ds: DataSource, cutoff: Date, limit: number): Promise<Checkout[]> {
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
  ds: DataSource,
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
