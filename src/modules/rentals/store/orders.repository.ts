import type { DataSource, EntityManager } from 'typeorm';
import { insertEntity } from '../../../db/entity-rows.js';
import type { Executor } from '../../../db/mysql-store.js';
import type { Sql } from '../../../db/sql.js';
import { Order } from './order.entity.js';

// The reads and writes of `orders` (statuses aside: rental-state.ts mirrors them): admission's
// new order, the order behind a deployment, the price a metered rental runs at, and its reversal.

/** Writes a new order row (admission; issued at once, so it can travel with the rest of the transaction). */
export async function insertOrder(m: Sql, order: Partial<Order>): Promise<void> {
  await insertEntity(m, Order, order);
}

/** Order `id`; throws when there is none (every deployment has its order). */
export function getOrder(ds: DataSource | EntityManager, id: string): Promise<Order> {
  return ds.getRepository(Order).findOneByOrFail({ id });
}

/** The hourly price the rental is billed at, in the caller's transaction. */
export async function setOrderHourlyPrice(m: EntityManager, orderId: string, hourlyPriceMinor: number): Promise<void> {
  await m.update(Order, { id: orderId }, { hourlyPriceMinor });
}

/** Marks the order's PENDING reversal settled; one already settled is left as it is. */
export async function markReversalSettled(m: EntityManager, orderId: string, at: Date): Promise<void> {
  await m.update(Order, { id: orderId, reversalStatus: 'PENDING' }, { reversalStatus: 'SUCCEEDED', updatedAt: at });
}

/** Marks the order's reversal PENDING (and, given, says why in its failure reason). */
export async function markReversalPending(
  m: EntityManager,
  orderId: string,
  at: Date,
  failureReason?: string,
): Promise<void> {
  await m.update(
    Order,
    { id: orderId },
    failureReason === undefined
      ? { reversalStatus: 'PENDING', updatedAt: at }
      : { reversalStatus: 'PENDING', failureReason, updatedAt: at },
  );
}

/** The order's status and purchased seconds, or null when there is no such order. */
export function orderTerms(
  ds: DataSource | EntityManager,
  orderId: string,
): Promise<Pick<Order, 'status' | 'durationSeconds'> | null> {
  return ds.getRepository(Order).findOne({ select: { status: true, durationSeconds: true }, where: { id: orderId } });
}

/** The offers provisioning tries for a rental that waited for capacity, and the price of the first. */
export async function assignCandidates(
  m: EntityManager,
  orderId: string,
  candidateIds: string[],
  hourlyPriceMinor: number,
  at: Date,
): Promise<void> {
  await m.update(Order, { id: orderId }, { candidateOfferIds: candidateIds, hourlyPriceMinor, updatedAt: at });
}

/** The order as it stands in the caller's transaction; it must exist. */
export function orderIn(m: EntityManager, id: string): Promise<Order> {
  return m.getRepository(Order).findOneByOrFail({ id });
}

/** What an owner's notification of a rental reads of its order: the GPU model asked for, the charge's reversal, the key that started it. */
export interface OrderNotificationFacts {
  gpuModel: string | null;
  reversalStatus: string | null;
  keyId: string | null;
}

/** The {@link OrderNotificationFacts} of each of `orderIds` that exists, read as they stand now. */
export async function orderNotificationFacts(
  ds: Executor,
  orderIds: readonly string[],
): Promise<Map<string, OrderNotificationFacts>> {
  if (orderIds.length === 0) return new Map();
  const rows: { id: string; gpu_model: string | null; reversal_status: string | null; key_id: string | null }[] =
    await ds.query(`SELECT o.id, o.gpu_model, o.reversal_status, o.key_id FROM orders o WHERE o.id IN (?)`, [
      [...new Set(orderIds)],
    ]);
  return new Map(
    rows.map((r) => [r.id, { gpuModel: r.gpu_model, reversalStatus: r.reversal_status, keyId: r.key_id }]),
  );
}
