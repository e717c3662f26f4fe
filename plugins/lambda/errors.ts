import type { ProviderErrorClass } from '../../src/providers/provider.js';

/**
 * What a failed Lambda call means for us:
 * - `unavailable`: this candidate cannot be had now (capacity, quota, the instance type is gone);
 * - `rejected`: our request or account is wrong; repeating it will not help;
 * - `ambiguous`: Lambda could not tell us the outcome; a launch may have happened;
 * - `throttled`: Lambda's rate limit; nothing happened;
 * - `not-found`: the object named in the call does not exist (an instance: gone).
 */
export type LambdaOutcome = 'unavailable' | 'rejected' | 'ambiguous' | 'throttled' | 'not-found';

export interface LambdaErrorMeaning {
  outcome: LambdaOutcome;
  /** What the host shows on `/api/v1/providers` when a read fails this way. */
  errorClass: ProviderErrorClass;
}

const m = (outcome: LambdaOutcome, errorClass: ProviderErrorClass): LambdaErrorMeaning => ({ outcome, errorClass });

/**
 * The one table of Lambda failures, keyed on `error.code` (never on the message): every code the
 * Lambda Cloud API 1.8.3 document lists. Codes the table does not know fall back on the HTTP
 * status in {@link classifyLambdaError}.
 */
export const LAMBDA_ERROR_TABLE: Readonly<Record<string, LambdaErrorMeaning>> = {
  'instance-operations/launch/insufficient-capacity': m('unavailable', 'unavailable'),
  'global/quota-exceeded': m('unavailable', 'unavailable'),
  // On a launch it names the instance type, region or key; elsewhere the instance or key.
  'global/object-does-not-exist': m('not-found', 'request'),
  'global/invalid-api-key': m('rejected', 'auth'),
  'global/account-inactive': m('rejected', 'auth'),
  // The account's billing address: only the operator can fix it in the dashboard.
  'global/invalid-address': m('rejected', 'auth'),
  'global/invalid-parameters': m('rejected', 'request'),
  // We never mount file systems, attach firewall rulesets or create named objects twice on purpose.
  'instance-operations/launch/file-system-in-wrong-region': m('rejected', 'request'),
  'global/duplicate': m('rejected', 'request'),
  'filesystems/filesystem-in-use': m('rejected', 'request'),
  'firewall-rulesets/firewall-ruleset-in-use': m('rejected', 'request'),
  'global/internal-error': m('ambiguous', 'unavailable'),
};

/** Lambda's upstream-provider failures (`provider/...`) are transient by its own description. */
const TRANSIENT_PREFIX = 'provider/';

/**
 * The meaning of a failed answer: the code's row when Lambda named a known code, else the
 * `provider/*` family, else the HTTP status (a 429 or a proxy's 5xx carries no Lambda body).
 */
export function classifyLambdaError(status: number, code: string | undefined): LambdaErrorMeaning {
  if (code && Object.hasOwn(LAMBDA_ERROR_TABLE, code)) return LAMBDA_ERROR_TABLE[code];
  if (code?.startsWith(TRANSIENT_PREFIX)) return m('ambiguous', 'unavailable');
  if (status === 429) return m('throttled', 'rate_limited');
  if (status >= 500) return m('ambiguous', 'unavailable');
  if (status === 401 || status === 403) return m('rejected', 'auth');
  if (status >= 200 && status < 300) return m('ambiguous', 'bad_response');
  return m('rejected', 'request');
}
