/**
 * A rental's statuses and every named set of them, declared once for the service (its state
 * machine, jobs and reads) and the clients (the SDK re-exports this file), so a set means the
 * same on both sides of the API.
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
/** A metered rental in these may still accrue or settle usage, so it holds a credit reservation. */
export const RESERVING_STATUSES = LIVE_STATUSES;
/** A terminate request moves these to TERMINATING (AWAITING_PAYMENT only records the request). */
export const TERMINABLE_STATUSES = ['PENDING', 'PROVISIONING', 'ACTIVE'] as const satisfies readonly RentalStatus[];
/**
 * Reach ACTIVE by themselves, so a reveal refused in one of them succeeds later: the statuses the
 * provision job works on.
 */
export const STARTING_STATUSES = ['PENDING', 'PROVISIONING'] as const satisfies readonly RentalStatus[];
/** The provision job works on these: the starting ones. */
export const PROVISIONING_STATUSES = STARTING_STATUSES;
/** Never left for ACTIVE: a reveal refused in one of them never succeeds. */
export const ENDING_STATUSES = ['TERMINATING', ...TERMINAL_STATUSES] as const satisfies readonly RentalStatus[];
/** A job owns these; left unchanged past the bound, the reconciler re-drives them. */
export const DRIVEN_STATUSES = ['PENDING', 'PROVISIONING', 'TERMINATING'] as const satisfies readonly RentalStatus[];
/** Metered usage accrues in these (up to the termination request). */
export const METERED_STATUSES = ['ACTIVE', 'TERMINATING'] as const satisfies readonly RentalStatus[];
/** Owners are told when a deployment reaches one of these. */
export const NOTIFIED_STATUSES = ['ACTIVE', 'FAILED', 'TERMINATED'] as const satisfies readonly RentalStatus[];

/** True when `status` is in `set`, narrowing it to the set's members (a plain `includes` takes only members). */
export function isOneOf<T extends string>(set: readonly T[], status: string | null | undefined): status is T {
  return status != null && (set as readonly string[]).includes(status);
}
