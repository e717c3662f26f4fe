import type { CreateResult, ProviderErrorClass } from '../../src/providers/provider.js';
import { ProviderApiError, type HttpResponse } from '../../src/providers/provider-http.js';

/** What a failed create means for the host (`CreateResult` kinds other than `created`). */
export type VastCreateFailure = Exclude<CreateResult['kind'], 'created'>;

/** What a failed read or destroy means: `gone` (the instance no longer exists) or an error class. */
export type VastReadOutcome = ProviderErrorClass | 'gone';

/** One row of the error table: matched in order, first hit wins. */
export interface VastErrorRule {
  /** An exact status, or a class of statuses. */
  status: number | '4xx' | '5xx' | 'other';
  /** Vast's `error` code (also found inside `msg`, where Vast sometimes puts it); absent = any. */
  code?: string;
  create: VastCreateFailure;
  read: VastReadOutcome;
  why: string;
}

/**
 * Every failure the Vast API documents (and the ones observed), in one place. `create` is the
 * answer to `PUT /api/v0/asks/{id}/`; `read` is what the offer search, instance reads, lists,
 * key attachment and destroy make of the same answer.
 */
export const VAST_ERROR_TABLE: readonly VastErrorRule[] = [
  { status: 400, code: 'invalid_args', create: 'rejected', read: 'request', why: 'the request is malformed (image, disk, label, ask id)' },
  { status: 400, code: 'invalid_price', create: 'rejected', read: 'request', why: 'a price was sent that Vast refuses' },
  { status: 400, code: 'no_ssh_key_for_vm', create: 'rejected', read: 'request', why: 'a VM image needs an account SSH key' },
  { status: 400, code: 'team_ssh_keys_not_supported', create: 'rejected', read: 'request', why: 'a team-scoped API key cannot manage SSH keys' },
  { status: 400, code: 'invalid_token', create: 'rejected', read: 'request', why: 'a list page token Vast does not accept' },
  { status: 400, create: 'rejected', read: 'request', why: 'any other bad request' },
  { status: 401, create: 'rejected', read: 'auth', why: 'missing or invalid API key' },
  { status: 403, create: 'rejected', read: 'auth', why: 'the key may not do this (e.g. an ask of our own machine)' },
  { status: 404, code: 'auth_error', create: 'rejected', read: 'auth', why: 'observed answer to a wrong or revoked API key' },
  { status: 404, code: 'no_such_ask', create: 'unavailable', read: 'request', why: 'the offer is gone' },
  { status: 404, code: 'not_found', create: 'unavailable', read: 'gone', why: 'the instance no longer exists' },
  { status: 404, create: 'unavailable', read: 'bad_response', why: 'an unknown 404: nothing was rented' },
  { status: 410, code: 'no_such_ask', create: 'unavailable', read: 'request', why: 'the offer cannot start now (cancel_unavail)' },
  { status: 410, code: 'deprecated_endpoint', create: 'rejected', read: 'request', why: 'a retired endpoint: never read as "nothing there"' },
  { status: 410, create: 'unavailable', read: 'request', why: 'any other 410' },
  { status: 429, create: 'throttled', read: 'rate_limited', why: 'rate limit (plain text, no Retry-After): back off' },
  { status: '5xx', create: 'ambiguous', read: 'unavailable', why: 'server error: the instance may exist' },
  { status: '4xx', create: 'rejected', read: 'request', why: 'any other refusal (e.g. 402 credit): nothing was created' },
  { status: 'other', create: 'ambiguous', read: 'bad_response', why: 'an answer Vast does not document' },
];

/** Vast's error code: the `error` field, else a known code quoted in `msg` or `detail`. */
export function vastErrorCode(res: Pick<HttpResponse, 'json' | 'text'>): string | undefined {
  const body = res.json as { error?: unknown; msg?: unknown; detail?: unknown } | null;
  const text = [body?.msg, body?.detail].filter((v) => typeof v === 'string').join(' ') || res.text;
  // The documented 404 for a gone ask carries `"error":"invalid_args"` and names no_such_ask in msg.
  for (const c of ['no_such_ask', 'auth_error', 'deprecated_endpoint']) if (text.includes(c)) return c;
  if (typeof body?.error === 'string') return body.error;
  if (/invalid user key/i.test(text)) return 'auth_error';
  return undefined;
}

function statusMatches(rule: VastErrorRule['status'], status: number): boolean {
  if (typeof rule === 'number') return rule === status;
  if (rule === '5xx') return status >= 500 && status <= 599;
  if (rule === '4xx') return status >= 400 && status <= 499;
  return true;
}

/** The table row for a non-success answer. */
export function classifyVastError(res: Pick<HttpResponse, 'status' | 'json' | 'text'>): VastErrorRule {
  const code = vastErrorCode(res);
  const hit = VAST_ERROR_TABLE.find((r) => statusMatches(r.status, res.status) && (r.code === undefined || r.code === code));
  return hit!;
}

/** A short, secret-free description of an answer for logs and reasons. */
export function describeAnswer(what: string, res: Pick<HttpResponse, 'status' | 'json' | 'text'>): string {
  const body = res.json as { msg?: unknown; detail?: unknown } | null;
  const msg = typeof body?.msg === 'string' ? body.msg : typeof body?.detail === 'string' ? body.detail : res.text.slice(0, 200);
  const code = vastErrorCode(res);
  return `${what}: HTTP ${res.status}${code ? ` ${code}` : ''}${msg ? `: ${msg.replace(/\s+/g, ' ').trim()}` : ''}`;
}

/** The create outcome for an answer that is not a documented success. */
export function createFailure(what: string, res: HttpResponse): Exclude<CreateResult, { kind: 'created' }> {
  const rule = classifyVastError(res);
  const reason = describeAnswer(what, res);
  if (rule.create === 'throttled') return { kind: 'throttled', reason, retryAfterMs: res.retryAfterMs ?? 0 };
  return { kind: rule.create, reason };
}

/** The create outcome when no answer arrived: Vast may have made the instance. */
export function createTransportFailure(err: unknown): Exclude<CreateResult, { kind: 'created' }> {
  return { kind: 'ambiguous', reason: (err as Error).message };
}

/** The error a read throws for a non-success answer (callers handle `gone` before asking). */
export function readError(what: string, res: HttpResponse): ProviderApiError {
  const rule = classifyVastError(res);
  const cls: ProviderErrorClass = rule.read === 'gone' ? 'bad_response' : rule.read;
  return new ProviderApiError(cls, describeAnswer(what, res), res.status, res.retryAfterMs);
}

/** How a read failure before a create (the label look-up) turns into a create outcome. */
export function createOutcomeOfReadError(err: unknown): Exclude<CreateResult, { kind: 'created' }> {
  const reason = (err as Error).message;
  if (!(err instanceof ProviderApiError)) return { kind: 'ambiguous', reason };
  if (err.errorClass === 'rate_limited') return { kind: 'throttled', reason, retryAfterMs: err.retryAfterMs ?? 0 };
  if (err.errorClass === 'auth' || err.errorClass === 'request') return { kind: 'rejected', reason };
  return { kind: 'ambiguous', reason };
}
