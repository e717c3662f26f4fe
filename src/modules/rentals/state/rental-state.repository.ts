import { In, type EntityManager } from 'typeorm';
import { insertEntity } from '../../../db/entity-rows.js';
import type { Sql } from '../../../db/sql.js';
import { Offer } from '../../inventory/offer.entity.js';
import { adjustActiveDeployments as adjustKeyActiveDeployments } from '../../keys/keys.repository.js';
import { Deployment } from '../store/deployment.entity.js';
import { Order } from '../store/order.entity.js';
import type { RentalStatus, TerminationReason } from './rental-status.js';
import { machineOfferId, NO_MACHINE, RentalReads, type MachineFacts } from '../store/rental-reads.repository.js';

// The statements of the rental state machine (rental-state.ts holds its rules): the only code
// that writes a deployment's or an order's status, and the only caller of the key's
// live-deployment counter's write (the accounts aggregate's statement).

/** Every offer that may name a rental's machine; {@link machineOfferId} chooses among them. */
const OFFERS_OF_RENTAL = "f.id IN (d.offer_id, o.offer_id, JSON_UNQUOTE(JSON_EXTRACT(o.candidate_offer_ids, '$[0]')))";

/**
 * A rental as a transition reads it, in one statement: its deployment, its order, and the machine
 * the one rule names (rental-reads.repository.ts machineOfferId), all a rental event's snapshot needs.
 */
export interface RentalRead {
  deployment: Deployment;
  order: Order;
  machine: MachineFacts;
}

/**
 * The rental of `ref` (its deployment's id, or its card order's id), read in the caller's
 * transaction; with `lock`, its deployment and order rows are locked for the caller's decision
 * (and the offers are then read on their own, since a locking read would lock them too).
 */
export async function readRentalRows(
  m: EntityManager,
  ref: string | { orderId: string },
  lock: boolean,
): Promise<RentalRead | null> {
  const q = m
    .getRepository(Deployment)
    .createQueryBuilder('d')
    .innerJoinAndMapOne('d.order', Order, 'o', 'o.id = d.order_id');
  if (lock) q.setLock('pessimistic_write');
  else
    q.leftJoinAndMapMany('d.offers', Offer, 'f', OFFERS_OF_RENTAL).select([
      'd',
      'o',
      'f.id',
      'f.name',
      'f.gpuCount',
      'f.provider',
    ]);
  const row = (await (
    typeof ref === 'string'
      ? q.where('d.id = :id', { id: ref })
      : q.where('d.order_id = :orderId', { orderId: ref.orderId })
  ).getOne()) as (Deployment & { order: Order; offers?: Offer[] }) | null;
  if (!row) return null;
  const { order, offers, ...deployment } = row;
  const rental = { order, deployment: deployment as Deployment };
  if (!offers) return { ...rental, machine: (await new RentalReads(m).machines([rental]))[0] };
  const offer = offers.find((f) => f.id === machineOfferId(order, rental.deployment));
  return {
    ...rental,
    machine: offer ? { gpuName: offer.name, gpuCount: offer.gpuCount, provider: offer.provider } : NO_MACHINE,
  };
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

/**
 * Moves the key's `active_deployments` counter in the caller's transaction. The counter is a column
 * of the accounts aggregate's key row: its statement is theirs (keys.repository.ts), issued at the
 * call as before, so it still travels with the transition's other statements.
 */
export function adjustActiveDeployments(m: Sql, keyId: string, delta: number): Promise<void> {
  return adjustKeyActiveDeployments(m, keyId, delta);
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
