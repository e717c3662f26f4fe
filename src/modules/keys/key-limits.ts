/**
 * Every bound on an API key's rental limits (docs/api.md, Limits). The request schemas (JSDoc
 * `@minimum`/`@maximum` in accounts.dto.ts and agents.dto.ts) repeat these numbers for the
 * OpenAPI document, and test/api/openapi-limits.test.ts holds them equal; the Telegram bot, the
 * approval page and the owner CLI import them from here.
 */

export interface KeyLimits {
  maxPerRentalMinor: number;
  budgetLimitMinor: number;
  maxConcurrentDeployments: number;
}

/** The largest limits a key may carry when the caller sets them through the API (signup, owner-issued agent keys). */
export const KEY_LIMIT_MAXIMUMS = {
  maxPerRentalMinor: 100_000_000,
  budgetLimitMinor: 1_000_000_000,
  maxConcurrentDeployments: 1000,
} as const satisfies KeyLimits;

/** Headless signup: the limits an omitted field gets, and the bounds of a given one. */
export const SIGNUP_LIMITS = {
  defaults: { maxPerRentalMinor: 500, budgetLimitMinor: 50_000, maxConcurrentDeployments: 1 },
  minimums: { maxPerRentalMinor: 500, budgetLimitMinor: 500, maxConcurrentDeployments: 1 },
  maximums: KEY_LIMIT_MAXIMUMS,
} as const satisfies Record<string, KeyLimits>;

/**
 * Limits an owner sets when approving an agent or minting a setup code: the same bounds through
 * the API's approve call and the Telegram bot. The maximums ($100,000 per rental and in total,
 * 100 rentals at once) catch a typo of extra zeros before it becomes a limit.
 */
export const APPROVAL_LIMITS = {
  minimums: { maxPerRentalMinor: 500, budgetLimitMinor: 500, maxConcurrentDeployments: 1 },
  maximums: { maxPerRentalMinor: 10_000_000, budgetLimitMinor: 10_000_000, maxConcurrentDeployments: 100 },
} as const satisfies Record<string, KeyLimits>;

/** Keys an owner issues directly through the agent-keys endpoint. */
export const AGENT_KEY_LIMITS = {
  minimums: { maxPerRentalMinor: 1, budgetLimitMinor: 1, maxConcurrentDeployments: 1 },
  maximums: KEY_LIMIT_MAXIMUMS,
} as const satisfies Record<string, KeyLimits>;

/** Rental limits of owner keys: the owner spends its own credits, so only runaway loops are capped. */
export const OWNER_KEY_LIMITS = {
  maxPerRentalMinor: 1_000_000,
  budgetLimitMinor: 100_000_000,
  maxConcurrentDeployments: 50,
} as const satisfies KeyLimits;

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
 * Whether a longest rental asked for an agent key (null or absent: none) is longer than the
 * issuing key's own: a key with a longest rental hands out none longer, and none without one.
 */
export function exceedsOwnRentalLength(asked: number | null | undefined, own: number | null): boolean {
  return own !== null && (asked === null || asked === undefined || asked > own);
}
