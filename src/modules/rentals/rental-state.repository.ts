import { In, type EntityManager } from 'typeorm';
import { insertEntity } from '../../db/entity-rows.js';
import type { Sql } from '../../db/sql.js';
import { Deployment } from './deployment.entity.js';
import { Order } from './order.entity.js';
import type { RentalStatus, TerminationReason } from './rental-status.js';

// The statements of the rental state machine (rental-state.ts holds its rules): the only code
// that writes a deployment's or an order's status, and the key's live-deployment counter.

/** What a transition needs of the deployment it moves. */
export type TransitionRow = Pick<Deployment, 'id' | 'orderId' | 'keyId' | 'status'>;

/** The deployment of `ref` (its id, or its card order's id); locked for the caller's decision with `lock`. */
export async function readForTransition(
  m: EntityManager,
  ref: string | { orderId: string },
  lock: boolean,
): Promise<TransitionRow | null> {
  const q = m.getRepository(Deployment).createQueryBuilder('d').select(['d.id', 'd.orderId', 'd.keyId', 'd.status']);
  if (lock) q.setLock('pessimistic_write');
  return (
    typeof ref === 'string'
      ? q.where('d.id = :id', { id: ref })
      : q.where('d.order_id = :orderId', { orderId: ref.orderId })
  ).getOne();
}

/** Moves the deployment to `patch.status` only while it is in one of `from`; whether it moved. */
export async function moveDeployment(
  m: EntityManager,
  id: string,
  from: readonly RentalStatus[],
  patch: Partial<Deployment> & { status: RentalStatus },
): Promise<boolean> {
  const res = await m.update(Deployment, { id, status: In([...from]) }, patch);
  return Boolean(res.affected);
}

/** Mirrors the deployment's new status onto its order. */
export async function mirrorOntoOrder(
  m: EntityManager,
  orderId: string,
  patch: Partial<Order> & { status: RentalStatus },
): Promise<void> {
  await m.update(Order, { id: orderId }, patch);
}

/** Moves the key's `active_deployments` counter (migrations/1763800009000-KeyCounters.ts) in the caller's transaction. */
export async function adjustActiveDeployments(m: Sql, keyId: string, delta: number): Promise<void> {
  if (delta === 0) return;
  await m.query(`UPDATE api_keys SET active_deployments = active_deployments + ? WHERE id = ?`, [delta, keyId]);
}

/** Writes a new deployment row. */
export async function insertDeploymentRow(m: Sql, d: Partial<Deployment>): Promise<void> {
  await insertEntity(m, Deployment, d);
}

/** Records the first termination request's time and reason; a later request never overwrites them. */
export async function stampTerminationRequest(
  m: EntityManager,
  deploymentId: string,
  reason: TerminationReason,
  at: Date,
): Promise<void> {
  await m
    .createQueryBuilder()
    .update(Deployment)
    .set({
      terminateRequestedAt: () => 'COALESCE(terminate_requested_at, :at)',
      terminationReason: () => 'COALESCE(termination_reason, :reason)',
      updatedAt: at,
    })
    .setParameters({ at, reason })
    .where('id = :id', { id: deploymentId })
    .execute();
}
