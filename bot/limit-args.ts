import type { KeyLimits } from '../src/modules/keys/key-limits.js';
import { describeRentalLength, parseRentalLength } from '../src/modules/keys/rental-length.js';
import { formatUsd, notDollarsMessage } from '../src/vocabulary/money.js';
import {
  AMOUNT_STEPS,
  checkIdleMinutes,
  checkLimit,
  checkRentalLength,
  describeIdleMinutes,
  FIELD,
  parseIdleMinutes,
  parseStep,
  QUESTIONS,
} from './limits-dialogue.js';

// The limits of a key typed on one line (`/newagent 5 50 1 8h idle 30m name`) and read back, by
// the same checks and wording as the dialogue's answers.

/** A key's limits as the owner reads them back, in one line. */
export function describeLimits(l: KeyLimits): string {
  const rentals =
    l.maxConcurrentDeployments === 1 ? '1 rental at a time' : `${l.maxConcurrentDeployments} rentals at a time`;
  const length =
    l.maxRentalSeconds === null
      ? 'no time limit per rental'
      : `each for up to ${describeRentalLength(l.maxRentalSeconds)}`;
  const idle =
    l.idleTerminateMinutes === null
      ? 'idle rentals not stopped'
      : `stops after ${describeIdleMinutes(l.idleTerminateMinutes)} idle`;
  return `${formatUsd(l.maxPerRentalMinor)} per rental, ${formatUsd(l.budgetLimitMinor)} in total, ${rentals}, ${length}, ${idle}`;
}

/**
 * Parses `/newagent 5 50 1 [8h] [idle 30m] [name]`-style arguments: after the three amounts, a
 * word that is a length (with its unit) is the longest rental and "idle" followed by minutes or a
 * length is the idle time, in either order; the first other word starts the name. Null when no
 * arguments were given (start the dialogue), otherwise the limits or every problem found, in one reply.
 */
export function parseLimitArgs(args: string): { limits: KeyLimits; name?: string } | { errors: string[] } | null {
  const parts = args.trim().split(/\s+/).filter(Boolean);
  if (parts.length === 0) return null;
  if (parts.length < 3) {
    return {
      errors: [
        'Send all three limits in one line: per-rental USD, total USD and concurrent rentals, for example /newagent 5 50 1 ' +
          '(optionally followed by the longest rental such as 8h and the idle time such as idle 30m)',
      ],
    };
  }
  const errors: string[] = [];
  const values: Partial<KeyLimits> = { maxRentalSeconds: null, idleTerminateMinutes: null };
  AMOUNT_STEPS.forEach((step, i) => {
    const parsed = parseStep(step, parts[i]);
    const checked = checkLimit(step, parsed);
    if (checked.ok) values[FIELD[step]] = checked.value;
    else if (parsed === null) {
      errors.push(
        `${QUESTIONS[step].label}: ${QUESTIONS[step].isCount ? `"${parts[i].slice(0, 20)}" is not a whole number` : notDollarsMessage(parts[i].slice(0, 20))}.`,
      );
    } else errors.push(checked.error);
  });
  let rest = parts.slice(3);
  let sawLength = false;
  let sawIdle = false;
  for (;;) {
    const idle =
      !sawIdle && rest.length > 1 && rest[0].toLowerCase() === 'idle' ? parseIdleMinutes(rest[1]) : undefined;
    if (idle !== undefined) {
      const checked = checkIdleMinutes(idle);
      if (checked.ok) values.idleTerminateMinutes = checked.value;
      else errors.push(checked.error);
      sawIdle = true;
      rest = rest.slice(2);
      continue;
    }
    const length = !sawLength && rest.length ? parseRentalLength(rest[0]) : undefined;
    if (typeof length !== 'number') break;
    const checked = checkRentalLength(length);
    if (checked.ok) values.maxRentalSeconds = checked.value;
    else errors.push(checked.error);
    sawLength = true;
    rest = rest.slice(1);
  }
  if (errors.length) return { errors };
  const name = rest.join(' ').slice(0, 100) || undefined;
  return { limits: values as KeyLimits, name };
}
