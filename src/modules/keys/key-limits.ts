import { AppError } from '../../errors/app-error.js';

/**
 * An API key's rental limits as one value ({@link KeyLimits}), and every bound on them
 * (docs/api.md, Limits). Limits are checked once, where they come in: the API by its request
 * schemas (JSDoc `@minimum`/`@maximum` in accounts.dto.ts and agents.dto.ts repeat these numbers
 * for the OpenAPI document, and test/api/openapi-limits.test.ts holds them equal); the approval
 * form, the Telegram bot and the owner CLI against the same bounds, in their own words; what the
 * bot hands AgentsService by {@link parseKeyLimits}. Past that, code receives a KeyLimits and
 * checks nothing again.
 */

/** The three amounts of a key's limits; the bounds of each door are given in them. */
export interface KeyAmounts {
  maxPerRentalMinor: number;
  budgetLimitMinor: number;
  maxConcurrentDeployments: number;
}

/** The amounts, in the order every message lists them. */
export const KEY_AMOUNT_FIELDS = ['maxPerRentalMinor', 'budgetLimitMinor', 'maxConcurrentDeployments'] as const;

/** The five limits an API key carries. */
export interface KeyLimits extends KeyAmounts {
  /** The longest any rental of the key may run, in seconds; null: no such limit. */
  maxRentalSeconds: number | null;
  /** Minutes of idle GPUs after which the key's rentals are warned, then ended; null: never. */
  idleTerminateMinutes: number | null;
}

/** Limits as a request gives them: the longest rental and the idle minutes may be left out (none). */
export type KeyLimitsInput = KeyAmounts & Partial<Pick<KeyLimits, 'maxRentalSeconds' | 'idleTerminateMinutes'>>;

/** The smallest and the largest amounts a door takes. */
export interface KeyLimitBounds {
  minimums: KeyAmounts;
  maximums: KeyAmounts;
}

/** The largest limits a key may carry when the caller sets them through the API (signup, owner-issued agent keys). */
export const KEY_LIMIT_MAXIMUMS = {
  maxPerRentalMinor: 100_000_000,
  budgetLimitMinor: 1_000_000_000,
  maxConcurrentDeployments: 1000,
} as const satisfies KeyAmounts;

/** Headless signup: the limits an omitted field gets, and the bounds of a given one. */
export const SIGNUP_LIMITS = {
  defaults: { maxPerRentalMinor: 500, budgetLimitMinor: 50_000, maxConcurrentDeployments: 1 },
  minimums: { maxPerRentalMinor: 500, budgetLimitMinor: 500, maxConcurrentDeployments: 1 },
  maximums: KEY_LIMIT_MAXIMUMS,
} as const satisfies KeyLimitBounds & { defaults: KeyAmounts };

/**
 * Limits an owner sets when approving an agent or minting a setup code: the same bounds through
 * the API's approve call and the Telegram bot. The maximums ($100,000 per rental and in total,
 * 100 rentals at once) catch a typo of extra zeros before it becomes a limit.
 */
export const APPROVAL_LIMITS = {
  minimums: { maxPerRentalMinor: 500, budgetLimitMinor: 500, maxConcurrentDeployments: 1 },
  maximums: { maxPerRentalMinor: 10_000_000, budgetLimitMinor: 10_000_000, maxConcurrentDeployments: 100 },
} as const satisfies KeyLimitBounds;

/** Keys an owner issues directly through the agent-keys endpoint. */
export const AGENT_KEY_LIMITS = {
  minimums: { maxPerRentalMinor: 1, budgetLimitMinor: 1, maxConcurrentDeployments: 1 },
  maximums: KEY_LIMIT_MAXIMUMS,
} as const satisfies KeyLimitBounds;

/** Rental limits of owner keys: the owner spends its own credits, so only runaway loops are capped. */
export const OWNER_KEY_LIMITS = {
  maxPerRentalMinor: 1_000_000,
  budgetLimitMinor: 100_000_000,
  maxConcurrentDeployments: 50,
  maxRentalSeconds: null,
  idleTerminateMinutes: null,
} as const satisfies KeyLimits;

/**
 * The amounts an operator may give an owner key (`owner create`): from the approval minimums, as
 * an owner key below them could not approve any agent, to the API's maximums.
 */
export const OWNER_KEY_BOUNDS = {
  minimums: APPROVAL_LIMITS.minimums,
  maximums: KEY_LIMIT_MAXIMUMS,
} as const satisfies KeyLimitBounds;

/** Whether `value` is an amount `field` may take within `bounds`: a whole number from its minimum to its maximum. */
export function amountWithin(field: keyof KeyAmounts, value: number, bounds: KeyLimitBounds): boolean {
  return Number.isSafeInteger(value) && value >= bounds.minimums[field] && value <= bounds.maximums[field];
}

/**
 * The longest any rental of a key may run, when the key has such a limit (null or absent: none).
 * The same bounds through every door a key's limits come in by. The minimum of a minute refuses
 * a number meant as minutes or hours rather than seconds; 30 days catches a typo of extra digits.
 */
export const MAX_RENTAL_SECONDS = { minimum: 60, maximum: 30 * 24 * 3600 } as const;

/** What is wrong with a given `maxRentalSeconds`, as a sentence naming the field; null when it is fine. */
export function maxRentalSecondsProblem(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const { minimum, maximum } = MAX_RENTAL_SECONDS;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= minimum && value <= maximum) return null;
  return `maxRentalSeconds must be an integer from ${minimum} to ${maximum} (seconds), or null for no limit`;
}

/**
 * Minutes of idle GPUs after which a rental of the key is warned (`rental.idle_warning`) and then
 * ended, when the key has such a setting (null or absent: never). A minute is the shortest window
 * the sampling can judge; a day catches a number meant as seconds.
 */
export const IDLE_TERMINATE_MINUTES = { minimum: 1, maximum: 1440 } as const;

/** What is wrong with a given `idleTerminateMinutes`, as a sentence naming the field; null when it is fine. */
export function idleTerminateMinutesProblem(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const { minimum, maximum } = IDLE_TERMINATE_MINUTES;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= minimum && value <= maximum) return null;
  return `idleTerminateMinutes must be an integer from ${minimum} to ${maximum} (minutes), or null to never end idle rentals`;
}

/**
 * The five limits of whatever carries them (a checked request, a key, an approved session), a
 * longest rental or idle minutes left out as none. It converts; it does not check.
 */
export function keyLimitsOf(source: KeyLimitsInput): KeyLimits {
  return {
    maxPerRentalMinor: source.maxPerRentalMinor,
    budgetLimitMinor: source.budgetLimitMinor,
    maxConcurrentDeployments: source.maxConcurrentDeployments,
    maxRentalSeconds: source.maxRentalSeconds ?? null,
    idleTerminateMinutes: source.idleTerminateMinutes ?? null,
  };
}

/**
 * Limits that came in without the API's schema (the Telegram bot), as a KeyLimits once every one
 * is within `bounds` and the longest rental's and idle minutes' own; otherwise 422
 * VALIDATION_FAILED naming every field out of bounds, in the API's units.
 */
export function parseKeyLimits(given: KeyLimitsInput, bounds: KeyLimitBounds): KeyLimits {
  const bad: string[] = KEY_AMOUNT_FIELDS.filter((f) => !amountWithin(f, given[f], bounds)).map(
    (f) => `${f} must be an integer from ${bounds.minimums[f]} to ${bounds.maximums[f]}`,
  );
  const rentalLength = maxRentalSecondsProblem(given.maxRentalSeconds);
  if (rentalLength) bad.push(rentalLength);
  const idle = idleTerminateMinutesProblem(given.idleTerminateMinutes);
  if (idle) bad.push(idle);
  if (bad.length) throw new AppError('VALIDATION_FAILED', `Invalid limits: ${bad.join('; ')}.`);
  return keyLimitsOf(given);
}

/** A limit an agent key may not have above its issuer's. */
export type IssuedLimit = keyof KeyAmounts | 'maxRentalSeconds';

/**
 * The limits asked for an agent key that exceed the issuing key's own: each amount may be at most
 * the issuer's, and an issuer with a longest rental hands out none longer (none at all would be).
 * Idle minutes are the agent key's own affair.
 */
export function limitsBeyond(asked: KeyLimits, own: KeyLimits): IssuedLimit[] {
  const over: IssuedLimit[] = KEY_AMOUNT_FIELDS.filter((f) => asked[f] > own[f]);
  const ownLength = own.maxRentalSeconds;
  if (ownLength !== null && (asked.maxRentalSeconds === null || asked.maxRentalSeconds > ownLength))
    over.push('maxRentalSeconds');
  return over;
}
