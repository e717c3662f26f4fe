import type { Repositories } from '../../../repositories.js';
import type { Deployment } from '../store/deployment.entity.js';
import type { Order } from '../store/order.entity.js';
import { EVENT_OF_STATUS } from '../../events/event-types.js';
import { recordRentalSnapshot, type RentalEventRepos } from './rental-events.js';
import {
  isOneOf,
  TERMINABLE_STATUSES,
  TERMINAL_STATUSES,
  type RentalStatus,
  type TerminationReason,
} from './rental-status.js';

/**
 * The rental state machine's one writer: every status change of a deployment and its order goes
 * through {@link transition}, so `status_changed_at` (which the reconciler reads) is never
 * forgotten and every change an agent is told of writes its event in the same transaction. The
 * statuses and their sets are in rental-status.ts.
 */

/**
 * What a transition runs on: the rentals aggregate and the event log of the caller's transaction
 * (`store.transaction` or `store.pipelined`).
 */
export type RentalStateRepos = RentalEventRepos;

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
export async function transition(
  r: RentalStateRepos,
  ref: RentalRef,
  from: readonly RentalStatus[],
  to: RentalStatus,
  extra: TransitionExtra,
): Promise<boolean> {
  const { at } = extra;
  const activeFrom = from.filter(holdsSlot);
  // A set mixing slot-holding and finished statuses needs the row's own status, read under lock.
  const mixed = activeFrom.length > 0 && activeFrom.length < from.length;
  const read = await r.rentals.state.read(ref, mixed);
  if (!read) return false;
  const d = read.deployment;
  const deployment = { ...extra.deployment, status: to, statusChangedAt: at, updatedAt: at };
  if (!(await r.rentals.state.move(d.id, from, deployment))) return false;
  const order = { ...extra.order, status: to, updatedAt: at };
  await r.rentals.state.mirrorOntoOrder(d.orderId, order);
  const wasActive = mixed ? holdsSlot(d.status) : activeFrom.length > 0;
  await r.rentals.state.adjustActiveDeployments(d.keyId, Number(holdsSlot(to)) - Number(wasActive));
  // The event is written with the change it reports: it exists exactly when the change committed.
  // Its snapshot is the rows read above with what was just written to them, so nothing is read
  // again while the updates hold the rental's rows.
  const event = EVENT_OF_STATUS[to];
  if (event) {
    const after = { deployment: { ...d, ...deployment }, order: { ...read.order, ...order }, machine: read.machine };
    await recordRentalSnapshot(r, after, event, at);
  }
  return true;
}

/** Whether a deployment in `status` holds one of its key's concurrency slots (it is not finished). */
export function holdsSlot(status: RentalStatus): boolean {
  return !isOneOf(TERMINAL_STATUSES, status);
}

/** Writes a new deployment row and counts it against its key's slots, in the caller's transaction. */
export async function insertDeployment(
  r: Pick<Repositories, 'rentals'>,
  d: Pick<Deployment, 'keyId' | 'status'> & Partial<Deployment>,
): Promise<void> {
  // Issued together: one request to the server in a pipelined transaction, in order on any connection.
  await Promise.all([
    r.rentals.state.insertDeployment(d),
    r.rentals.state.adjustActiveDeployments(d.keyId, Number(holdsSlot(d.status))),
  ]);
}

/**
 * Starts termination for `reason`: a terminable deployment moves to TERMINATING, and the first
 * request's time and reason are kept (a later request never overwrites them). Returns whether
 * the status moved.
 */
export async function requestTermination(
  r: RentalStateRepos,
  deploymentId: string,
  reason: TerminationReason,
  at: Date,
): Promise<boolean> {
  const moved = await transition(r, deploymentId, TERMINABLE_STATUSES, 'TERMINATING', { at });
  await r.rentals.state.stampTerminationRequest(deploymentId, reason, at);
  return moved;
}
