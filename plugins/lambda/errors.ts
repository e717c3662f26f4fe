import { matchErrorRule, type ErrorRule } from '../../src/providers/kit/error-table.js';

/**
 * A page from the edge in front of the API rather than Lambda's own `{error}` JSON: the request was
 * refused before the API (and the key) saw it.
 */
export const EDGE_PAGE = /^\s*<(!doctype\s+html|html)\b/i;

/**
 * The one table of Lambda failures, matched by the kit: rows of meaning (Lambda's `error.code`,
 * with the message only where one code covers two meanings, or an answer that is not Lambda's at
 * all) first, whatever the status; then the status rows for answers without a known code (a 429
 * or a proxy's 5xx carries no Lambda body). `create` is what a launch that got the answer returns;
 * `read: 'gone'` marks "the object named in the call does not exist" (an instance: gone).
 * The code rows cover every code the Lambda Cloud API documents list (1.8.3, and 1.9.3's
 * `global/conflict`, `global/forbidden`, `global/not-found`) plus `global/unknown`, which the
 * live API answers although no document lists it.
 */
export const LAMBDA_ERROR_TABLE: readonly ErrorRule[] = [
  {
    match: { codes: ['instance-operations/launch/insufficient-capacity'] },
    create: 'unavailable',
    read: 'unavailable',
    note: 'no capacity for this instance type in this region',
  },
  {
    match: { codes: ['global/quota-exceeded'] },
    create: 'unavailable',
    read: 'unavailable',
    note: 'the account quota is used up',
  },
  // Seen live: the account's instance limit is told as invalid parameters. It is a quota (another
  // offer elsewhere may still launch), not a malformed request, so it must not fail the rental as one.
  {
    match: { codes: ['global/invalid-parameters'], text: /too many instances/i },
    create: 'unavailable',
    read: 'unavailable',
    note: "the account's limit on running instances is reached",
  },
  // On a launch it names the instance type, region or key: this offer is gone. Elsewhere the instance or key.
  {
    match: { codes: ['global/object-does-not-exist', 'global/not-found'] },
    create: 'unavailable',
    read: 'gone',
    note: 'the object named in the call does not exist',
  },
  {
    match: { codes: ['global/invalid-api-key'] },
    create: 'rejected',
    read: 'auth',
    note: 'the API key is wrong or revoked',
    log: 'error',
  },
  {
    match: { codes: ['global/account-inactive'] },
    create: 'rejected',
    read: 'auth',
    note: 'the account is inactive',
    log: 'error',
  },
  {
    match: { codes: ['global/forbidden'] },
    create: 'rejected',
    read: 'auth',
    note: 'the API key may not make this call',
    log: 'error',
  },
  // The account's billing address: only the operator can fix it in the dashboard.
  {
    match: { codes: ['global/invalid-address'] },
    create: 'rejected',
    read: 'auth',
    note: 'the account billing address is invalid',
    log: 'error',
  },
  {
    match: { codes: ['global/invalid-parameters'] },
    create: 'rejected',
    read: 'request',
    note: 'the request parameters are invalid',
    log: 'error',
  },
  // We never mount file systems, attach firewall rulesets or create named objects twice on purpose.
  {
    match: { codes: ['instance-operations/launch/file-system-in-wrong-region'] },
    create: 'rejected',
    read: 'request',
    note: 'a file system in another region',
  },
  {
    match: { codes: ['global/duplicate'] },
    create: 'rejected',
    read: 'request',
    note: 'an object of that name exists',
  },
  {
    match: { codes: ['filesystems/filesystem-in-use'] },
    create: 'rejected',
    read: 'request',
    note: 'the file system is in use',
  },
  {
    match: { codes: ['firewall-rulesets/firewall-ruleset-in-use'] },
    create: 'rejected',
    read: 'request',
    note: 'the firewall ruleset is in use',
  },
  // "Conflicts with the current state of the resource": a terminate of an instance already on its
  // way out is the case that matters, and destroy re-reads the instance for every refusal.
  {
    match: { codes: ['global/conflict'] },
    create: 'rejected',
    read: 'request',
    note: "the call conflicts with the object's current state",
  },
  {
    match: { codes: ['global/internal-error'] },
    create: 'ambiguous',
    read: 'unavailable',
    note: 'Lambda failed internally; a launch may have happened',
  },
  // Not in any document. Seen live on a terminate of an instance that was already terminating;
  // Lambda itself cannot say what happened, so a launch may have gone through and a terminate may
  // have been redundant: destroy re-reads the instance instead of trusting either reading.
  {
    match: { codes: ['global/unknown'] },
    create: 'ambiguous',
    read: 'unavailable',
    note: 'Lambda answered an unknown error',
  },
  // Lambda's upstream-provider failures are transient by its own description.
  {
    match: { codes: ['provider/*'] },
    create: 'ambiguous',
    read: 'unavailable',
    note: 'an upstream provider of Lambda failed',
  },
  // An HTML 403 is the edge's block page, not the API refusing our key: the key was never checked,
  // so blaming it would send the operator the wrong way. Nothing was launched.
  {
    match: { status: 403, text: EDGE_PAGE },
    create: 'rejected',
    read: 'request',
    note: "the edge in front of Lambda's API refused the request with an HTML page before the API saw it (a gate on the client, such as its User-Agent, not the API key)",
    log: 'error',
  },
  { match: { status: 429 }, create: 'throttled', read: 'rate_limited', note: 'rate limited' },
  { match: { status: '5xx' }, create: 'ambiguous', read: 'unavailable', note: 'server error without a known code' },
  {
    match: { status: [401, 403] },
    create: 'rejected',
    read: 'auth',
    note: 'credentials refused without a known code',
    log: 'error',
    catchAll: true,
  },
  {
    match: { status: '2xx' },
    create: 'ambiguous',
    read: 'bad_response',
    note: 'a success without the documented data',
    catchAll: true,
  },
  { match: {}, create: 'rejected', read: 'request', note: 'any other refusal', log: 'error' },
];

/**
 * The rule for a failed answer: by Lambda's code when it named a known one (and its message where
 * a row needs it), by the raw body for answers that are not Lambda's, else by status.
 */
export function classifyLambdaError(status: number, code: string | undefined, text?: string): ErrorRule {
  return matchErrorRule(LAMBDA_ERROR_TABLE, { status, code, text });
}

/**
 * The setting an operator must look at for a refused create, quoted first in the reason so the one
 * log line says where to act; `undefined` when no setting can fix it (a bug in our request).
 */
export function settingToFix(rule: ErrorRule): string | undefined {
  if (rule.read === 'auth') return 'LAMBDA_PROVIDER_API_KEY';
  if (rule.match.text === EDGE_PAGE) return 'LAMBDA_PROVIDER_API_URL';
  return undefined;
}
