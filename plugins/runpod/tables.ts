import { ProviderApiError } from '../../src/providers/provider-http.js';
import type { CreateResult, InstanceState, ProviderErrorClass } from '../../src/providers/provider.js';

/** RunPod's pod statuses (`PodStatus` in the v2 API). */
export type PodStatus = 'PROVISIONING' | 'STARTING' | 'RUNNING' | 'EXITED' | 'ERROR' | 'TERMINATED';

/**
 * The one state table. `RUNNING` is reported before `ssh.direct` exists, so the provider reports
 * an SSH endpoint only once `ssh.direct` appears; "running" alone does not make a pod ready.
 */
export const POD_STATES: Record<PodStatus, InstanceState> = {
  PROVISIONING: 'pending',
  STARTING: 'pending',
  RUNNING: 'running',
  // The container stopped; RunPod keeps the pod (and bills its volume) until it is terminated.
  EXITED: 'stopped',
  ERROR: 'failed',
  TERMINATED: 'gone',
};

/** Our state for a RunPod status; a status this table does not know yet is still pending. */
export function podState(status: string): InstanceState {
  return (POD_STATES as Record<string, InstanceState | undefined>)[status] ?? 'pending';
}

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

type CreateKind = Exclude<CreateResult['kind'], 'created'>;

interface ErrorRule {
  /** An HTTP status, or a range for the 5xx rule. */
  status: number | 'any 5xx' | 'other 4xx';
  /** When set, the rule applies only when `detail` matches. */
  detail?: RegExp;
  /** What a create that got this answer means. */
  create: CreateKind;
  /** What any other call that got this answer throws, for `/api/v1/providers` and logs. */
  errorClass: ProviderErrorClass;
  /** How loudly a create that got this answer is logged: an operator must act on `error`. */
  log: 'error' | 'warn' | 'info';
  why: string;
}

/**
 * The one error table, first matching rule wins. Per RunPod's create guidance: 422 is a contract
 * violation (never retry), 400 is a rule violation or no capacity for this GPU (try the next
 * candidate), 402 stops everything, 403 skips the candidate, 429 backs off, 5xx is transient.
 */
export const ERROR_TABLE: readonly ErrorRule[] = [
  { status: 400, detail: CAPACITY_DETAIL, create: 'unavailable', errorClass: 'unavailable', log: 'info', why: 'no capacity for this GPU and count' },
  // Not the capacity text: a placement rule this GPU/count breaks (count above this cloud's
  // maximum, an unknown GPU type). RunPod says to try the next candidate; the provider logs the
  // detail so a rule every candidate breaks is seen.
  { status: 400, create: 'unavailable', errorClass: 'request', log: 'warn', why: 'request refused for this GPU' },
  { status: 401, create: 'rejected', errorClass: 'auth', log: 'error', why: 'API key missing, wrong or revoked' },
  // The account cannot pay: no RunPod offer will succeed until the operator tops it up, so this is
  // a configuration error to log loudly, not lack of capacity to hide behind other offers.
  { status: 402, create: 'rejected', errorClass: 'auth', log: 'error', why: 'RunPod account balance too low' },
  { status: 403, create: 'unavailable', errorClass: 'auth', log: 'warn', why: 'this account has no access to the pool' },
  { status: 404, create: 'unavailable', errorClass: 'request', log: 'warn', why: 'GPU type or resource not found' },
  { status: 422, create: 'rejected', errorClass: 'request', log: 'error', why: 'request body does not match the API contract' },
  { status: 429, create: 'throttled', errorClass: 'rate_limited', log: 'info', why: 'rate limited' },
  { status: 'any 5xx', create: 'ambiguous', errorClass: 'unavailable', log: 'warn', why: 'RunPod server error' },
  { status: 'other 4xx', create: 'rejected', errorClass: 'request', log: 'error', why: 'unexpected client error' },
];

/** The rule for an HTTP error answer. */
export function errorRule(status: number, detail: string | undefined): ErrorRule {
  const rule = ERROR_TABLE.find((r) => {
    if (r.status === 'any 5xx') return status >= 500;
    if (r.status === 'other 4xx') return status >= 400 && status < 500;
    return r.status === status && (!r.detail || r.detail.test(detail ?? ''));
  });
  // Anything outside 4xx/5xx (a 3xx, an unexpected 2xx shape) is an answer we cannot read.
  return rule ?? { status, create: 'ambiguous', errorClass: 'bad_response', log: 'warn', why: 'unexpected answer' };
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
export function createResultFor(status: number, detail: string, retryAfterMs: number | undefined): { result: Exclude<CreateResult, { kind: 'created' }>; log: ErrorRule['log'] } {
  const rule = errorRule(status, detail);
  const reason = `RunPod ${status}: ${rule.why}${detail ? ` (${detail})` : ''}`;
  if (rule.create === 'throttled') return { result: { kind: 'throttled', reason, retryAfterMs: retryAfterMs ?? 1000 }, log: rule.log };
  return { result: { kind: rule.create, reason }, log: rule.log };
}

/** The error any non-create call throws for an HTTP error answer, per the table. */
export function apiErrorFor(what: string, status: number, detail: string, retryAfterMs?: number): ProviderApiError {
  const rule = errorRule(status, detail);
  return new ProviderApiError(rule.errorClass, `${what}: ${status} ${rule.why}${detail ? ` (${detail})` : ''}`, status, retryAfterMs);
}
