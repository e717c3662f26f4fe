import type { RentalStatus } from '../rentals/state/rental-status.js';

/**
 * Every event an agent or owner may be told of. Rental events carry the rental as
 * `GET /api/v1/rentals/{id}` returns it at that moment; account events carry the account's
 * balance and billing as `GET /api/v1/me` shows them.
 */
export const EVENT_TYPES = [
  'rental.provisioning',
  'rental.active',
  'rental.failed',
  'rental.terminating',
  'rental.terminated',
  'rental.expiring',
  'rental.idle_warning',
  'credits.low',
  'topup.paid',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Account events an agent key sees besides its own rentals' (owner keys see every event of their account). */
export const AGENT_ACCOUNT_EVENTS: readonly EventType[] = ['credits.low'];

/** The event a status change writes; statuses without one (a card order released to PENDING) write none. */
export const EVENT_OF_STATUS: Partial<Record<RentalStatus, EventType>> = {
  PROVISIONING: 'rental.provisioning',
  ACTIVE: 'rental.active',
  FAILED: 'rental.failed',
  TERMINATING: 'rental.terminating',
  TERMINATED: 'rental.terminated',
};
