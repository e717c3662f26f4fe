/**
 * The rental state machine's vocabulary: statuses and their sets (declared once in
 * src/vocabulary/statuses.ts, which the clients share, and passed on from here for the rentals
 * module), billing models, failure and termination reasons. The entities import their column
 * types from here, and the transitions (rental-state.ts) import both, so the vocabulary depends on
 * nothing of the module.
 */

export {
  DRIVEN_STATUSES,
  isOneOf,
  LIVE_STATUSES,
  METERED_STATUSES,
  NOTIFIED_STATUSES,
  PROVISIONING_STATUSES,
  RENTAL_STATUSES,
  type RentalStatus,
  RESERVING_STATUSES,
  TERMINABLE_STATUSES,
  TERMINAL_STATUSES,
} from '../../../vocabulary/statuses.js';

export type DeploymentBillingModel = 'LEGACY_PREPAID' | 'ACCOUNT_BALANCE' | 'MAX_SPEND_METERED';
/** Billing models whose usage the metering sweep posts; their rentals hold a credit reservation while they run. */
export const METERED_BILLING_MODELS = [
  'ACCOUNT_BALANCE',
  'MAX_SPEND_METERED',
] as const satisfies readonly DeploymentBillingModel[];

/** Why a rental FAILED; shown to the customer with a customer-safe `failureReason`. */
export const FAILURE_CODES = [
  'OFFER_NOT_FOUND',
  'NO_CAPACITY',
  'PROVISIONING_FAILED',
  'PROVISIONING_TIMEOUT',
  'PROVIDER_REJECTED',
  'PAYMENT_EXPIRED',
  'PAYMENT_FAILED',
  'GPU_MISMATCH',
] as const;
export type FailureCode = (typeof FAILURE_CODES)[number];

/**
 * Where provisioning stands, shown as the rental's `phase` with `phaseSince` while it is PENDING
 * or PROVISIONING: `waiting_for_capacity` (a GPU intent waiting for an eligible offer), `creating`
 * (asking the provider), `booting` and `pulling_image` (as the provider reports), `waiting_for_ssh`
 * (the rental's own key does not get in yet), `checking_gpus` (`nvidia-smi -L` against the offer),
 * `starting` (the startup script has not recorded its start yet). Null once ACTIVE or finished.
 */
export const MACHINE_PHASES = [
  'waiting_for_capacity',
  'creating',
  'booting',
  'pulling_image',
  'waiting_for_ssh',
  'checking_gpus',
  'starting',
] as const;
export type MachinePhase = (typeof MACHINE_PHASES)[number];

/**
 * Why termination began: `REQUESTED` by the customer (API or bot), `EXPIRED` at the end of a
 * legacy rental's purchase or of a lease (any billing model), or a metered limit (`SPEND_CAP`,
 * `KEY_BUDGET`, `CREDITS`), or `IDLE`: its GPUs stayed idle for its key's `idleTerminateMinutes`
 * and through the grace after the warning.
 */
export const TERMINATION_REASONS = ['REQUESTED', 'EXPIRED', 'SPEND_CAP', 'KEY_BUDGET', 'CREDITS', 'IDLE'] as const;
export type TerminationReason = (typeof TERMINATION_REASONS)[number];

/** The same reasons as the API names them: a customer's own request, stored as REQUESTED, is USER. */
export const API_TERMINATION_REASONS = ['USER', 'EXPIRED', 'SPEND_CAP', 'KEY_BUDGET', 'CREDITS', 'IDLE'] as const;
export type ApiTerminationReason = (typeof API_TERMINATION_REASONS)[number];

/** Null when nobody ended the rental (still running, or it failed before it ran). */
export function apiTerminationReason(stored: TerminationReason | null): ApiTerminationReason | null {
  if (stored === null) return null;
  return stored === 'REQUESTED' ? 'USER' : stored;
}

export type ReversalStatus = 'PENDING' | 'SUCCEEDED';
