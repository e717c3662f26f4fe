import { matchErrorRule, type ErrorRule } from '../../src/providers/kit/error-table.js';

/**
 * The one table of Lambda failures, matched by the kit: rows keyed on `error.code` (never on the
 * message) first, whatever the status, then the status rows for answers without a known code (a
 * 429 or a proxy's 5xx carries no Lambda body). `create` is what a launch that got the answer
 * returns; `read: 'gone'` marks "the object named in the call does not exist" (an instance: gone).
 * The code rows are every code the Lambda Cloud API 1.8.3 document lists.
 */
export const LAMBDA_ERROR_TABLE: readonly ErrorRule[] = [
  { match: { codes: ['instance-operations/launch/insufficient-capacity'] }, create: 'unavailable', read: 'unavailable', note: 'no capacity for this instance type in this region' },
  { match: { codes: ['global/quota-exceeded'] }, create: 'unavailable', read: 'unavailable', note: 'the account quota is used up' },
  // On a launch it names the instance type, region or key: this offer is gone. Elsewhere the instance or key.
  { match: { codes: ['global/object-does-not-exist'] }, create: 'unavailable', read: 'gone', note: 'the object named in the call does not exist' },
  { match: { codes: ['global/invalid-api-key'] }, create: 'rejected', read: 'auth', note: 'the API key is wrong or revoked' },
  { match: { codes: ['global/account-inactive'] }, create: 'rejected', read: 'auth', note: 'the account is inactive' },
  // The account's billing address: only the operator can fix it in the dashboard.
  { match: { codes: ['global/invalid-address'] }, create: 'rejected', read: 'auth', note: 'the account billing address is invalid' },
  { match: { codes: ['global/invalid-parameters'] }, create: 'rejected', read: 'request', note: 'the request parameters are invalid' },
  // We never mount file systems, attach firewall rulesets or create named objects twice on purpose.
  { match: { codes: ['instance-operations/launch/file-system-in-wrong-region'] }, create: 'rejected', read: 'request', note: 'a file system in another region' },
  { match: { codes: ['global/duplicate'] }, create: 'rejected', read: 'request', note: 'an object of that name exists' },
  { match: { codes: ['filesystems/filesystem-in-use'] }, create: 'rejected', read: 'request', note: 'the file system is in use' },
  { match: { codes: ['firewall-rulesets/firewall-ruleset-in-use'] }, create: 'rejected', read: 'request', note: 'the firewall ruleset is in use' },
  { match: { codes: ['global/internal-error'] }, create: 'ambiguous', read: 'unavailable', note: 'Lambda failed internally; a launch may have happened' },
  // Lambda's upstream-provider failures are transient by its own description.
  { match: { codes: ['provider/*'] }, create: 'ambiguous', read: 'unavailable', note: 'an upstream provider of Lambda failed' },
  { match: { status: 429 }, create: 'throttled', read: 'rate_limited', note: 'rate limited' },
  { match: { status: '5xx' }, create: 'ambiguous', read: 'unavailable', note: 'server error without a known code' },
  { match: { status: [401, 403] }, create: 'rejected', read: 'auth', note: 'credentials refused without a known code' },
  { match: { status: '2xx' }, create: 'ambiguous', read: 'bad_response', note: 'a success without the documented data' },
  { match: {}, create: 'rejected', read: 'request', note: 'any other refusal' },
];

/** The rule for a failed answer: by Lambda's code when it named a known one, else by status. */
export function classifyLambdaError(status: number, code: string | undefined): ErrorRule {
  return matchErrorRule(LAMBDA_ERROR_TABLE, { status, code });
}
