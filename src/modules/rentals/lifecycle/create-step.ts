import type { AttemptOutcome } from '../store/deployment-attempt.entity.js';
import type { FailureCode } from '../state/rental-status.js';

/** What the create loop knows when it decides its next step. */
export interface CreateStepInput {
  /** OFFER rentals fail as OFFER_NOT_FOUND when nothing is left, INTENT rentals as NO_CAPACITY. */
  requestKind: 'OFFER' | 'INTENT';
  /** Outcome recorded for the newest attempt; null before the first. */
  last: AttemptOutcome | null;
  /** An instance carries the newest attempt's label (looked up only when one may exist). */
  foundByLabel: boolean;
  /** Milliseconds since the newest attempt was recorded. */
  sinceAttemptMs: number;
  /** THROTTLED: milliseconds until the provider may be asked again (0 or less: now). */
  retryInMs: number;
  /** Candidates not yet tried after the newest attempt. */
  candidatesLeft: number;
  timing: { pollMs: number; adoptBoundMs: number; activeBoundMs: number };
}

export type CreateStep =
  | { kind: 'adopt' }
  | { kind: 'retry-same-label'; delayMs: number }
  | { kind: 'wait'; delayMs: number }
  | { kind: 'next-candidate' }
  | { kind: 'fail'; code: FailureCode; reason: string; attemptOutcome?: AttemptOutcome };

/** Outcomes after which no instance of the label may be adopted: none was made, or it was given up on (GPU_MISMATCH). */
export const NOTHING_CREATED: readonly AttemptOutcome[] = ['UNAVAILABLE', 'THROTTLED', 'REJECTED', 'GPU_MISMATCH'];

/**
 * The create loop's next step, from what is on record (a pure function; every case has a row in
 * test/unit/create-step.test.ts):
 * - an instance carries the label: adopt it, never create another;
 * - the last call crashed with no answer and nothing carries the label: ask again, same label;
 * - ambiguous and not found: look again until the adoption bound, then fail;
 * - throttled: ask again with the same label once the provider's wait is over, within the
 *   provisioning bound (past it, as unavailable);
 * - unavailable: next candidate, or fail when none is left;
 * - rejected (our request or configuration): fail at once, no further candidates;
 * - fewer GPUs than promised (the machine was destroyed): next candidate, or fail as GPU_MISMATCH;
 * - created or adopted but gone before it was recorded, failed, not found: fail.
 */
export function decideCreateStep(x: CreateStepInput): CreateStep {
  if (x.last !== null && x.foundByLabel && !NOTHING_CREATED.includes(x.last)) return { kind: 'adopt' };
  const nextOrExhausted = (): CreateStep =>
    x.candidatesLeft > 0 ? { kind: 'next-candidate' } : exhausted(x.requestKind);
  switch (x.last) {
    case null:
    case 'UNAVAILABLE':
      return nextOrExhausted();
    case 'STARTED':
      return { kind: 'retry-same-label', delayMs: 0 };
    case 'AMBIGUOUS':
      if (x.sinceAttemptMs >= x.timing.adoptBoundMs) {
        return {
          kind: 'fail',
          code: 'PROVISIONING_FAILED',
          reason: 'The provider did not confirm the machine; your rental was not started.',
          attemptOutcome: 'NOT_FOUND',
        };
      }
      return { kind: 'wait', delayMs: x.timing.pollMs };
    case 'THROTTLED':
      if (x.sinceAttemptMs >= x.timing.activeBoundMs) return nextOrExhausted();
      return { kind: 'retry-same-label', delayMs: Math.max(0, x.retryInMs) };
    case 'GPU_MISMATCH':
      return x.candidatesLeft > 0
        ? { kind: 'next-candidate' }
        : {
            kind: 'fail',
            code: 'GPU_MISMATCH',
            reason:
              'The machine came up with fewer GPUs than its offer promised, so it was destroyed; your rental was not started.',
          };
    case 'REJECTED':
      return {
        kind: 'fail',
        code: 'PROVIDER_REJECTED',
        reason: 'The provider refused the request for this machine; your rental was not started.',
      };
    case 'CREATED':
    case 'ADOPTED':
    case 'NOT_FOUND':
    case 'FAILED':
      return {
        kind: 'fail',
        code: 'PROVISIONING_FAILED',
        reason: 'The machine could not be started; your rental was not started.',
      };
  }
}

function exhausted(requestKind: 'OFFER' | 'INTENT'): CreateStep {
  return requestKind === 'OFFER'
    ? { kind: 'fail', code: 'OFFER_NOT_FOUND', reason: 'The requested offer is no longer available from the provider.' }
    : {
        kind: 'fail',
        code: 'NO_CAPACITY',
        reason: 'None of the matching offers had capacity; your rental was not started.',
      };
}
