import type { DataSource, EntityManager } from 'typeorm';
import { Order } from '../order.entity.js';

// The rental lifecycle's reads and writes of `orders` (statuses aside: rental-state.ts mirrors
// them): the order behind a deployment, the price a metered rental runs at, and its reversal.

/** Order `id`; throws when there is none (every deployment has its order). */
export function getOrder(ds: DataSource, id: string): Promise<Order> {
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
