import type { DataSource, EntityManager } from 'typeorm';
import { Order } from './order.entity.js';
import type { RentalStatus } from './rental-status.js';

// The card order's rows as its payment sees them. Status changes go through rental-state.ts.

/** A card order's deployment status and whether its owner asked to terminate it (which, unpaid, cancels it). */
export interface CardOrderRow {
  status: RentalStatus;
  cancelled: boolean;
}

/**
 * Reads a card order's deployment, locked for the caller's decision with `lock` (needs a
 * transaction). The rentals module records a terminate request on an unpaid order without
 * changing its status, so the request is read here too.
 */
export async function readCardOrder(m: EntityManager, orderId: string, lock: boolean): Promise<CardOrderRow | null> {
  const rows: { status: RentalStatus; terminate_requested_at: Date | null }[] = await m.query(
    lock
      ? `SELECT status, terminate_requested_at FROM deployments WHERE order_id = ? FOR UPDATE`
      : `SELECT status, terminate_requested_at FROM deployments WHERE order_id = ?`,
    [orderId],
  );
  return rows[0] ? { status: rows[0].status, cancelled: rows[0].terminate_requested_at !== null } : null;
}

/** Marks the order's reversal as pending (and, given, says why in its failure reason). */
export async function markReversalPending(m: EntityManager, orderId: string, at: Date, failureReason?: string): Promise<void> {
  await m.update(Order, { id: orderId }, failureReason === undefined ? { reversalStatus: 'PENDING', updatedAt: at } : { reversalStatus: 'PENDING', failureReason, updatedAt: at });
}

/** Completes a pending reversal; a reversal already complete stays as it is. */
export async function markReversalSucceeded(m: EntityManager, orderId: string, at: Date): Promise<void> {
  await m.update(Order, { id: orderId, reversalStatus: 'PENDING' }, { reversalStatus: 'SUCCEEDED', updatedAt: at });
}

/** The order; it must exist. */
export function getOrder(ds: DataSource, id: string): Promise<Order> {
  return ds.getRepository(Order).findOneByOrFail({ id });
}

/** The order's status and purchased seconds, or null when there is no such order. */
export function orderTerms(ds: DataSource, orderId: string): Promise<Pick<Order, 'status' | 'durationSeconds'> | null> {
  return ds.getRepository(Order).findOne({ select: { status: true, durationSeconds: true }, where: { id: orderId } });
}

/** Unpaid card orders whose owners asked to terminate them, oldest request first. */
export async function cancelledUnpaidOrders(ds: DataSource, limit: number, orderId: string | null): Promise<string[]> {
  const rows: { order_id: string }[] = await ds.query(
    `SELECT order_id FROM deployments
      WHERE status = 'AWAITING_PAYMENT' AND terminate_requested_at IS NOT NULL AND (? IS NULL OR order_id = ?)
      ORDER BY terminate_requested_at LIMIT ?`,
    [orderId, orderId, limit],
  );
  return rows.map((r) => r.order_id);
}
