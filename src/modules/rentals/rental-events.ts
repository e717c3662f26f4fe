import type { EntityManager } from 'typeorm';
import type { EventType } from '../events/event-types.js';
import { recordEvent } from '../events/events.repository.js';
import { deploymentIn } from './deployments.repository.js';
import { orderIn } from './orders.repository.js';
import { toRentalDto } from './rental-views.js';
import { RentalsRepository } from './rentals.repository.js';

/**
 * Writes a rental's event in the caller's transaction, carrying the rental as a read of it returns
 * it at this moment (the rows as the transaction has just written them).
 */
export async function recordRentalEvent(
  m: EntityManager,
  deploymentId: string,
  type: EventType,
  at: Date,
): Promise<void> {
  const deployment = await deploymentIn(m, deploymentId);
  const order = await orderIn(m, deployment.orderId);
  // Read on the transaction's own connection: a second pooled connection, taken while this one holds
  // locks, could wait for ever on a pool every transaction is holding the same way.
  const [machine] = await new RentalsRepository(m).machines([{ order, deployment }]);
  await recordEvent(m, {
    type,
    accountId: order.accountId,
    keyId: order.keyId,
    rentalId: order.id,
    data: toRentalDto(order, deployment, machine),
    at,
  });
}
