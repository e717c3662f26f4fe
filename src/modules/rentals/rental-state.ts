import { In, type EntityManager } from 'typeorm';
import { insertEntity } from '../../db/entity-rows.js';
import type { Sql } from '../../db/sql.js';
import { Deployment } from './deployment.entity.js';
import { Order } from './order.entity.js';
import { isOneOf, TERMINABLE_STATUSES, TERMINAL_STATUSES, type RentalStatus, type TerminationReason } from './rental-status.js';

/**
 * The rental state machine's one writer: every status change of a deployment and its order goes
 * through {@link transition}, so `status_changed_at` (which the reconciler reads) is never
 * forgotten. The statuses and their sets are in rental-status.ts.
 */

/** Identifies the rental to move: its deployment, or (card payments) its order. */
export type RentalRef = string | { orderId: string };

export interface TransitionExtra {
  /** The moment of the change (the caller's clock). */
  at: Date;
  /** Further deployment columns written with the status. */
  deployment?: Partial<Deployment>;
  /** Further order columns written with the mirrored status. */
  order?: Partial<Order>;
}

/**
 * Moves a deployment to `to` only while it is still in one of `from` (a conditional update, so
 * two runs racing cannot both win), stamps `status_changed_at` and `updated_at`, and mirrors the
 * status onto its order in the same transaction. Returns whether this call made the move.
 */
export async function transition(m: EntityManager, ref: RentalRef, from: readonly RentalStatus[], to: RentalStatus, extra: TransitionExtra): Promise<boolean> {
  const { at } = extra;
  const activeFrom = from.filter(holdsSlot);
  // A set mixing slot-holding and finished statuses needs the row's own status, read under lock.
  const mixed = activeFrom.length > 0 && activeFrom.length < from.length;
  const q = m.getRepository(Deployment).createQueryBuilder('d').select(['d.id', 'd.orderId', 'd.keyId', 'd.status']);
  if (mixed) q.setLock('pessimistic_write');
  const d = await (typeof ref === 'string' ? q.where('d.id = :id', { id: ref }) : q.where('d.order_id = :orderId', { orderId: ref.orderId })).getOne();
  if (!d) return false;
  const res = await m.update(Deployment, { id: d.id, status: In([...from]) }, { ...extra.deployment, status: to, statusChangedAt: at, updatedAt: at });
  if (!res.affected) return false;
  await m.update(Order, { id: d.orderId }, { ...extra.order, status: to, updatedAt: at });
  const wasActive = mixed ? holdsSlot(d.status) : activeFrom.length > 0;
  await adjustActiveDeployments(m, d.keyId, Number(holdsSlot(to)) - Number(wasActive));
  return true;
}

/** Whether a deployment in `status` holds one of its key's concurrency slots (it is not finished). */
export function holdsSlot(status: RentalStatus): boolean {
  return !isOneOf(TERMINAL_STATUSES, status);
}

/**
 * Moves the key's `active_deployments` counter (migrations/1763800009000-KeyCounters.ts) in the
 * caller's transaction. Only this module calls it: on {@link transition} and {@link insertDeployment}.
 */
async function adjustActiveDeployments(m: Sql, keyId: string, delta: number): Promise<void> {
  if (delta === 0) return;
  await m.query(`UPDATE api_keys SET active_deployments = active_deployments + ? WHERE id = ?`, [delta, keyId]);
}

/** Writes a new deployment row and counts it against its key's slots, in the caller's transaction. */
export async function insertDeployment(m: Sql, d: Pick<Deployment, 'keyId' | 'status'> & Partial<Deployment>): Promise<void> {
  // Issued together: one request to the server in a SqlTransaction, in order on any connection.
  await Promise.all([insertEntity(m, Deployment, d), adjustActiveDeployments(m, d.keyId, Number(holdsSlot(d.status)))]);
}

/**
 * Starts termination for `reason`: a terminable deployment moves to TERMINATING, and the first
 * request's time and reason are kept (a later request never overwrites them). Returns whether
 * the status moved.
 */
export async function requestTermination(m: EntityManager, deploymentId: string, reason: TerminationReason, at: Date): Promise<boolean> {
  const moved = await transition(m, deploymentId, TERMINABLE_STATUSES, 'TERMINATING', { at });
  await m
    .createQueryBuilder()
    .update(Deployment)
    .set({ terminateRequestedAt: () => 'COALESCE(terminate_requested_at, :at)', terminationReason: () => 'COALESCE(termination_reason, :reason)', updatedAt: at })
    .setParameters({ at, reason })
    .where('id = :id', { id: deploymentId })
    .execute();
  return moved;
}
