import type { EventType } from '../../events/event-types.js';
import type { Repositories } from '../../../repositories.js';
import { toRentalDto } from '../wire/rental-dto.js';
import type { RentalRead } from './rental-state.repository.js';

/** What a rental's event is written with: the rentals aggregate and the event log, of one transaction. */
export type RentalEventRepos = Pick<Repositories, 'rentals' | 'events'>;

/**
 * Writes a rental's event in the caller's transaction, carrying the rental as a read of it returns
 * it at this moment, built from `rental` as the transaction has it (a transition's read, with the
 * changes it wrote): no statement but the event's own.
 */
export async function recordRentalSnapshot(
  r: Pick<Repositories, 'events'>,
  rental: RentalRead,
  type: EventType,
  at: Date,
): Promise<void> {
  const { order, deployment, machine } = rental;
  await r.events.append({
    type,
    accountId: order.accountId,
    keyId: order.keyId,
    rentalId: order.id,
    data: toRentalDto(order, deployment, machine),
    at,
  });
}

/**
 * Writes a rental's event for a writer that holds only the deployment's id (the expiring notice,
 * the idle warning): the rental is read in one statement, on the transaction's own connection (a
 * second pooled connection, taken while this one holds locks, could wait for ever on a pool every
 * transaction is holding the same way).
 */
export async function recordRentalEvent(
  r: RentalEventRepos,
  deploymentId: string,
  type: EventType,
  at: Date,
): Promise<void> {
  const rental = await r.rentals.state.read(deploymentId, false);
  if (!rental) throw new Error(`deployment ${deploymentId} not found for its ${type} event`);
  await recordRentalSnapshot(r, rental, type, at);
}
