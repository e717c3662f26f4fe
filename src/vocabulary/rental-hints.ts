/**
 * What a rental's status means for what a caller may do next: reveal its credentials, wait for it,
 * terminate it, know what became of a revoked key's rentals or of a failed rental.
 */
import { isOneOf, STARTING_STATUSES } from './statuses.js';

/**
 * The one way to wait on a rental, whichever of its ids the caller holds: its waiting read,
 * answered the moment its status is one of `statuses` (or after `waitSeconds`, as it is then).
 */
export function waitingRead(rentalId: string, statuses: readonly string[]): string {
  return `GET /api/v1/rentals/${rentalId}?waitFor=${statuses.join(',')}`;
}

/**
 * Seconds a reveal refused while the machine starts asks the caller to wait (`Retry-After`), by
 * the phase it is in: a machine being checked is seconds from ACTIVE, one booting or pulling its
 * image a minute or more, one waiting for capacity longer still.
 */
export function revealRetryAfterSeconds(phase: string | null): number {
  switch (phase) {
    case 'waiting_for_ssh':
    case 'checking_gpus':
    case 'starting':
      return 2;
    case 'waiting_for_capacity':
      return 30;
    case 'creating':
    case 'booting':
    case 'pulling_image':
      return 10;
    default:
      return 5;
  }
}

/**
 * The refusal of a credentials reveal on deployment `deploymentId` (of rental `rentalId`) while it
 * is `status`, not ACTIVE: whether it will become ACTIVE, and how to wait for it or what to do instead.
 */
export function revealNotActiveMessage(
  status: string,
  deploymentId: string,
  rentalId: string,
  retryAfterSeconds?: number,
): string {
  const head = `Credentials exist only while a deployment is ACTIVE; ${deploymentId} is ${status}.`;
  const wait = `wait with ${waitingRead(rentalId, ['ACTIVE', 'FAILED'])} (answered the moment its status changes), then reveal again`;
  if (isOneOf(STARTING_STATUSES, status)) {
    return `${head} The machine is starting: ${wait}${retryAfterSeconds === undefined ? '' : `, or retry in ${retryAfterSeconds} s (Retry-After)`}.`;
  }
  if (status === 'AWAITING_PAYMENT')
    return `${head} It starts once its card payment arrives: have the checkout link paid, then ${wait}.`;
  return `${head} It will never be ACTIVE again, so do not retry: GET /api/v1/rentals/${rentalId} says how it ended; rent a new machine with POST /api/v1/rentals.`;
}

/**
 * What to do after a reveal refused as DEPLOYMENT_NOT_ACTIVE, for a client that knows only the
 * answer's `Retry-After`: present while the machine starts, absent once waiting cannot help.
 * `how` names the client's own ways to retry, to watch the rental and to rent anew.
 */
export function notActiveNext(
  retryAfterSeconds: number | undefined,
  how: { retry: string; watch: string; rent: string },
): string {
  return retryAfterSeconds !== undefined
    ? `The machine is still starting: wait ${retryAfterSeconds} s, then ${how.retry} (or ${how.watch} until its status is ACTIVE).`
    : `Waiting does not help: a rental AWAITING_PAYMENT starts only once paid, and one TERMINATING, TERMINATED or FAILED is never ACTIVE again (do not retry; ${how.rent}).`;
}

/** What to do after NOT_FOUND on a rental or deployment id; `list` is the client's way to list its rentals. */
export function notFoundNext(list: string): string {
  return `Nothing with this id is visible to this key (a rental id and its deployment id both work; other keys' rentals are not visible): ${list} and use an id from there.`;
}

/** The answer to a terminate request, by the status the deployment has after it. */
export function terminateMessage(status: string, rentalId: string): string {
  switch (status) {
    case 'TERMINATED':
      return `Already TERMINATED: the machine is destroyed and charges have stopped (endedAt on GET /api/v1/rentals/${rentalId}). Nothing more to do.`;
    case 'FAILED':
      return `Already FAILED: it never became ACTIVE, and any debit for it is returned (reversalStatus on the rental). Nothing more to do.`;
    case 'AWAITING_PAYMENT':
      return `Termination recorded: the rental awaits card payment, and will be terminated instead of started if the payment arrives.`;
    default:
      return `Termination requested: the deployment is ${status}. Wait with ${waitingRead(rentalId, ['TERMINATED'])} (answered the moment its machine is verified gone); charges stop at the request.`;
  }
}

/**
 * What became of a revoked key's unfinished rentals: `count` of them, terminated with the key
 * when `terminated`, else left running (revoking a key stops the key, not its machines).
 */
export function revokedKeyRentalsNote(count: number, terminated: boolean): string {
  if (count === 0) return 'The key had no unfinished rentals.';
  const n = count === 1 ? '1 rental' : `${count} rentals`;
  return terminated
    ? `${n} of the key terminated with it: wait for each with ${waitingRead('{rentalId}', ['TERMINATED'])} (liveRentals lists their ids).`
    : `${n} of the key keep running and are charged until terminated: terminate each with POST /api/v1/deployments/{deploymentId}/terminate, or repeat this call with ?terminateRentals=true.`;
}

/**
 * The next step after a rental FAILED with `code`, when its failureReason alone does not say it;
 * `how` names the client's ways to rent, to list offers and to wait for capacity.
 */
export function failureNext(
  code: string,
  how: { rent: string; offers: string; waitForCapacity: string },
): string | undefined {
  if (code === 'GPU_MISMATCH') {
    return (
      'The machine came up with fewer GPUs than its offer promised and was destroyed (so did every other candidate); the rental never started, so nothing is charged for it (see reversalStatus). ' +
      `To go on, ${how.rent} again, preferably another offer or provider (${how.offers}).`
    );
  }
  if (code === 'NO_CAPACITY') {
    return `No eligible offer had capacity, and nothing is charged. To go on, ${how.rent} again with a higher price ceiling or another model, or let it wait for capacity with ${how.waitForCapacity}.`;
  }
  return undefined;
}
