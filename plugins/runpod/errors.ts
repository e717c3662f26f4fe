import { createVerdictOf, matchErrorRule, readErrorOf, type ErrorRule } from '../../src/providers/kit/error-table.js';
import type { ProviderApiError } from '../../src/providers/provider-http.js';
import type { CreateResult } from '../../src/providers/provider.js';

/** An RFC 9457 problem document as RunPod sends it. */
export interface Problem {
  title?: string;
  status?: number;
  detail?: string;
  errors?: string[];
}

/**
 * RunPod gives capacity exhaustion no machine-readable code, only this `detail` on a 400
 * ("There are no longer any instances available with the requested specifications...").
 */
export const CAPACITY_DETAIL = /no longer any instances available|no instances available|not enough free gpus|no gpus? available/i;

/**
 * The one error table, matched by the kit (rows of meaning first, then status rows). Per RunPod's
 * create guidance: 422 is a contract violation (never retry), 400 is a rule violation or no
 * capacity for this GPU (try the next candidate), 402 stops everything, 403 skips the candidate,
 * 429 backs off, 5xx is transient. `read` is what any other call throws; `log` how loudly a create
 * with this answer is logged.
 */
export const ERROR_TABLE: readonly ErrorRule[] = [
  { match: { status: 400, text: CAPACITY_DETAIL }, create: 'unavailable', read: 'unavailable', log: 'info', note: 'no capacity for this GPU and count' },
  // Not the capacity text: a placement rule this GPU/count breaks (count above this cloud's
  // maximum, an unknown GPU type). RunPod says to try the next candidate; the provider logs the
  // detail so a rule every candidate breaks is seen.
  { match: { status: 400 }, create: 'unavailable', read: 'request', log: 'warn', note: 'request refused for this GPU' },
  { match: { status: 401 }, create: 'rejected', read: 'auth', log: 'error', note: 'API key missing, wrong or revoked' },
  // The account cannot pay: no RunPod offer will succeed until the operator tops it up, so this is
  // a configuration error to log loudly, not lack of capacity to hide behind other offers.
  { match: { status: 402 }, create: 'rejected', read: 'auth', log: 'error', note: 'RunPod account balance too low' },
  { match: { status: 403 }, create: 'unavailable', read: 'auth', log: 'warn', note: 'this account has no access to the pool' },
  { match: { status: 404 }, create: 'unavailable', read: 'request', log: 'warn', note: 'GPU type or resource not found' },
  { match: { status: 422 }, create: 'rejected', read: 'request', log: 'error', note: 'request body does not match the API contract' },
  { match: { status: 429 }, create: 'throttled', read: 'rate_limited', log: 'info', note: 'rate limited' },
  { match: { status: '5xx' }, create: 'ambiguous', read: 'unavailable', log: 'warn', note: 'RunPod server error' },
  { match: { status: '4xx' }, create: 'rejected', read: 'request', log: 'error', note: 'unexpected client error' },
  // Anything outside 4xx/5xx (a 3xx, an unexpected 2xx shape) is an answer we cannot read.
  { match: {}, create: 'ambiguous', read: 'bad_response', log: 'warn', note: 'unexpected answer' },
];

/** The rule for an HTTP error answer. RunPod sends no error codes, only text. */
export function errorRule(status: number, detail: string | undefined): ErrorRule {
  return matchErrorRule(ERROR_TABLE, { status, text: detail });
}

/** Reads a problem document's `detail` (or the raw text) for messages; never contains our key. */
export function problemDetail(json: unknown, text: string): string {
  const p = json as Problem | null;
  if (p && typeof p === 'object') {
    const parts = [p.detail ?? p.title, ...(Array.isArray(p.errors) ? p.errors : [])].filter((s): s is string => typeof s === 'string' && s.length > 0);
    if (parts.length) return parts.join('; ').slice(0, 500);
  }
  return text.slice(0, 200);
}

/** A create's answer other than 201, per the table, and how loudly to log it; 429 carries the client's wait. */
export function createResultFor(status: number, detail: string, retryAfterMs: number | undefined): { result: Exclude<CreateResult, { kind: 'created' }>; log: NonNullable<ErrorRule['log']> } {
  const rule = errorRule(status, detail);
  const reason = `RunPod ${status}: ${rule.note}${detail ? ` (${detail})` : ''}`;
  return { result: createVerdictOf(rule, reason, retryAfterMs), log: rule.log ?? 'warn' };
}

/** The error any non-create call throws for an HTTP error answer, per the table. */
export function apiErrorFor(what: string, status: number, detail: string, retryAfterMs?: number): ProviderApiError {
  const rule = errorRule(status, detail);
  return readErrorOf(rule, `${what}: ${status} ${rule.note}${detail ? ` (${detail})` : ''}`, status, retryAfterMs);
}
