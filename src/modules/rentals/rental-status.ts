/**
 * The rental state machine's vocabulary: statuses, the status sets, billing models, failure and
 * termination reasons. Every status set is declared here and imported where needed; the entities
 * import their column types from here, and the transitions (rental-state.ts) import both, so the
 * vocabulary depends on nothing.
 */

export const RENTAL_STATUSES = [
  'AWAITING_PAYMENT',
  'PENDING',
  'PROVISIONING',
  'ACTIVE',
  'TERMINATING',
  'TERMINATED',
  'FAILED',
] as const;
export type RentalStatus = (typeof RENTAL_STATUSES)[number];

/** Finished for good: nothing runs, nothing is billed, nothing counts against a key. */
export const TERMINAL_STATUSES = ['TERMINATED', 'FAILED'] as const satisfies readonly RentalStatus[];
/** May own a provider instance: the reconciler keeps instances whose label belongs to one of these. */
export const LIVE_STATUSES = [
  'PENDING',
  'PROVISIONING',
  'ACTIVE',
  'TERMINATING',
] as const satisfies readonly RentalStatus[];
/** A metered rental in these may still accrue or settle usage, so it holds a credit reservation (credit-reservation.ts). */
export const RESERVING_STATUSES = LIVE_STATUSES;
/** A terminate request moves these to TERMINATING (AWAITING_PAYMENT only records the request). */
export const TERMINABLE_STATUSES = ['PENDING', 'PROVISIONING', 'ACTIVE'] as const satisfies readonly RentalStatus[];
/** The provision job works on these. */
export const PROVISIONING_STATUSES = ['PENDING', 'PROVISIONING'] as const satisfies readonly RentalStatus[];
/** A job owns these; left unchanged past the bound, the reconciler re-drives them. */
export const DRIVEN_STATUSES = ['PENDING', 'PROVISIONING', 'TERMINATING'] as const satisfies readonly RentalStatus[];
/** Metered usage accrues in these (up to the termination request). */
export const METERED_STATUSES = ['ACTIVE', 'TERMINATING'] as const satisfies readonly RentalStatus[];
/** Owners are told when a deployment reaches one of these. */
export const NOTIFIED_STATUSES = ['ACTIVE', 'FAILED', 'TERMINATED'] as const satisfies readonly RentalStatus[];

export type DeploymentBillingModel = 'LEGACY_PREPAID' | 'ACCOUNT_BALANCE' | 'MAX_SPEND_METERED';
/** Billing models whose usage the metering sweep posts; their rentals hold a credit reservation while they run. */
export const METERED_BILLING_MODELS = [
  'ACCOUNT_BALANCE',
  'MAX_SPEND_METERED',
] as const satisfies readonly DeploymentBillingModel[];

export function isOneOf<T extends string>(set: readonly T[], status: string | null | undefined): status is T {
  return status != null && (set as readonly string[]).includes(status);
}

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
