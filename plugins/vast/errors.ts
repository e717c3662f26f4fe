import type { ErrorReading } from '../../src/providers/kit/client.js';
import { createVerdictOf, matchErrorRule, readErrorOf, type ErrorRule } from '../../src/providers/kit/error-table.js';
import { optionVariable } from '../../src/providers/kit/options.js';
import type { ProviderApiError, HttpResponse } from '../../src/providers/provider-http.js';
import type { CreateResult } from '../../src/providers/provider.js';
import type { VastSentSettings } from './machine.js';

/**
 * Every failure the Vast API documents (and the ones observed), in one table matched by the kit
 * (`matchErrorRule`: rows with codes first, then status rows). `create` is the answer to
 * `PUT /api/v0/asks/{id}/`; `read` is what the offer search, instance reads, lists, key
 * attachment and destroy make of the same answer. Live answers that differ from the documents
 * are added here as rows of meaning.
 */
export const VAST_ERROR_TABLE: readonly ErrorRule[] = [
  {
    match: { status: 400, codes: ['invalid_args'] },
    create: 'rejected',
    read: 'request',
    note: 'the request is malformed (image, disk, label, ask id)',
  },
  {
    match: { status: 400, codes: ['invalid_price'] },
    create: 'rejected',
    read: 'request',
    note: 'a price was sent that Vast refuses',
  },
  {
    match: { status: 400, codes: ['no_ssh_key_for_vm'] },
    create: 'rejected',
    read: 'request',
    note: 'a VM image needs an account SSH key',
  },
  {
    match: { status: 400, codes: ['team_ssh_keys_not_supported'] },
    create: 'rejected',
    read: 'request',
    note: 'a team-scoped API key cannot manage SSH keys',
  },
  {
    match: { status: 400, codes: ['invalid_token'] },
    create: 'rejected',
    read: 'request',
    note: 'a list page token Vast does not accept',
  },
  {
    match: { status: 404, codes: ['auth_error'] },
    create: 'rejected',
    read: 'auth',
    note: 'observed answer to a wrong or revoked API key',
  },
  // By meaning, whatever the status: live Vast has answered a taken ask with 400, 404 and 410, the
  // code in `msg` (with `error: "invalid_args"`) or in `error` itself.
  {
    match: { codes: ['no_such_ask'] },
    create: 'unavailable',
    read: 'request',
    note: 'the offer is gone (someone else took it) or cannot start now (cancel_unavail)',
  },
  // Production clients treat `no_such_instance` as "already destroyed" under 404 and under 200 with success:false.
  {
    match: { codes: ['no_such_instance', 'not_found'] },
    create: 'unavailable',
    read: 'gone',
    note: 'the instance no longer exists',
  },
  {
    match: { status: 410, codes: ['deprecated_endpoint'] },
    create: 'rejected',
    read: 'request',
    note: 'a retired endpoint: never read as "nothing there"',
  },
  { match: { status: 400 }, create: 'rejected', read: 'request', note: 'any other bad request', catchAll: true },
  { match: { status: 401 }, create: 'rejected', read: 'auth', note: 'missing or invalid API key' },
  {
    match: { status: 403 },
    create: 'rejected',
    read: 'auth',
    note: 'the key may not do this (e.g. an ask of our own machine)',
  },
  {
    match: { status: 404 },
    create: 'unavailable',
    read: 'bad_response',
    note: 'an unknown 404: nothing was rented',
    catchAll: true,
  },
  { match: { status: 410 }, create: 'unavailable', read: 'request', note: 'any other 410', catchAll: true },
  {
    match: { status: 429 },
    create: 'throttled',
    read: 'rate_limited',
    note: 'rate limit (plain text, no Retry-After): back off',
  },
  { match: { status: '5xx' }, create: 'ambiguous', read: 'unavailable', note: 'server error: the instance may exist' },
  {
    match: { status: '4xx' },
    create: 'rejected',
    read: 'request',
    note: 'any other refusal (e.g. 402 credit): nothing was created',
    catchAll: true,
  },
  { match: {}, create: 'ambiguous', read: 'bad_response', note: 'an answer Vast does not document' },
];

/** Vast's error code: a known code quoted in `msg` or `detail` (or the body), else the `error` field. */
export function vastErrorCode(res: Pick<HttpResponse, 'json' | 'text'>): string | undefined {
  const body = res.json as { error?: unknown; msg?: unknown; detail?: unknown } | null;
  // `error` too: one recorded taken-ask answer carries its whole text there, with no `msg`.
  const text = [body?.msg, body?.detail, body?.error].filter((v) => typeof v === 'string').join(' ') || res.text;
  // The documented 404 for a gone ask carries `"error":"invalid_args"` and names no_such_ask in msg.
  for (const c of ['no_such_ask', 'no_such_instance', 'auth_error', 'deprecated_endpoint'])
    if (text.includes(c)) return c;
  if (typeof body?.error === 'string') return body.error;
  if (/invalid user key/i.test(text)) return 'auth_error';
  return undefined;
}

/** An answer as the table reads it: its status, Vast's code and its text. */
const answerOf = (res: Pick<HttpResponse, 'status' | 'json' | 'text'>) => ({
  status: res.status,
  code: vastErrorCode(res),
  text: res.text,
});

/** The table row for a non-success answer. */
export function classifyVastError(res: Pick<HttpResponse, 'status' | 'json' | 'text'>): ErrorRule {
  return matchErrorRule(VAST_ERROR_TABLE, answerOf(res));
}

/**
 * The table for the kit's client, which reports to the drift report every failure only a catch-all
 * row takes: a failure is any answer but a 200 (Vast answers every success with 200), and a 200
 * whose body says `success: false`.
 */
export const VAST_ERROR_READING: ErrorReading = {
  table: VAST_ERROR_TABLE,
  answerOf(res) {
    const refused = (res.json as { success?: unknown } | null)?.success === false;
    return res.status === 200 && !refused ? null : answerOf(res);
  },
};

/** A short, secret-free description of an answer for logs and reasons. */
export function describeAnswer(what: string, res: Pick<HttpResponse, 'status' | 'json' | 'text'>): string {
  const body = res.json as { msg?: unknown; detail?: unknown } | null;
  const msg =
    typeof body?.msg === 'string' ? body.msg : typeof body?.detail === 'string' ? body.detail : res.text.slice(0, 200);
  const code = vastErrorCode(res);
  return `${what}: HTTP ${res.status}${code ? ` ${code}` : ''}${msg ? `: ${msg.replace(/\s+/g, ' ').trim()}` : ''}`;
}

/**
 * The `VAST_PROVIDER_*` variable (or the rental's own setting) to look at when Vast refuses a
 * create: the key for an authentication refusal or a team key; the image when the refusal names
 * an image (or a VM image that needs an account key), the disk when it names the disk, each the
 * rental's own when the rental chose it; the rental's variables or ports when it names the env;
 * otherwise the account behind the key (no credit) or, failing all else, what the request was
 * made of.
 */
export function variableToFix(
  rule: ErrorRule,
  res: Pick<HttpResponse, 'status' | 'json' | 'text'>,
  sent?: VastSentSettings,
): string {
  const code = vastErrorCode(res);
  const said = describeAnswer('', res).toLowerCase();
  const image = sent?.image ? "the rental's image" : optionVariable('vast', 'IMAGE');
  const disk = sent?.disk ? "the rental's disk" : optionVariable('vast', 'DISK_GB');
  if (rule.read === 'auth' || code === 'team_ssh_keys_not_supported') return optionVariable('vast', 'API_KEY');
  if (code === 'no_ssh_key_for_vm' || /\b(image|manifest|docker)\b/.test(said)) return image;
  if (/\bdisk\b/.test(said)) return disk;
  if ((sent?.secrets || sent?.ports) && /\b(env|onstart|environment|ports?)\b/.test(said))
    return "the rental's variables, startup script or ports";
  if (res.status === 402 || /credit|balance|payment/.test(said))
    return `the account of ${optionVariable('vast', 'API_KEY')}`;
  const rental = sent && (sent.image || sent.disk || sent.ports || sent.secrets);
  return rental
    ? `the rental's machine settings, ${optionVariable('vast', 'IMAGE')} or ${optionVariable('vast', 'DISK_GB')}`
    : `${optionVariable('vast', 'IMAGE')} or ${optionVariable('vast', 'DISK_GB')}`;
}

/** Names of create fields Vast's words mention, so a reason can say which without quoting them. */
const FIELDS = ['image', 'disk', 'env', 'onstart', 'label', 'runtype', 'price'];

/**
 * {@link describeAnswer} for a create that carried the rental's variables or script: Vast's own
 * words may quote what it was sent, so they are left out and only the fields they name are kept.
 */
function describeWithheld(what: string, res: Pick<HttpResponse, 'status' | 'json' | 'text'>): string {
  const said = describeAnswer('', res).toLowerCase();
  const named = FIELDS.filter((f) => new RegExp(`\\b${f}\\b`).test(said));
  const code = vastErrorCode(res);
  return `${what}: HTTP ${res.status}${code ? ` ${code}` : ''} (Vast's message withheld: the request carried the rental's secrets${named.length ? `; it names ${named.join(', ')}` : ''})`;
}

/**
 * The create outcome for an answer that is not a documented success. A `rejected` reason starts
 * with the variable (or the rental's setting) to fix, so the host's one log line of it tells the
 * operator where to look, and carries the error class the host records (`auth` for a refused key,
 * else `request`). When the create carried the rental's variables or script, no reason quotes
 * Vast's words.
 */
export function createFailure(
  what: string,
  res: HttpResponse,
  sent?: VastSentSettings,
): Exclude<CreateResult, { kind: 'created' }> {
  const rule = classifyVastError(res);
  const described = sent?.secrets ? describeWithheld(what, res) : describeAnswer(what, res);
  if (rule.create !== 'rejected') return createVerdictOf(rule, described, res.retryAfterMs);
  const reason = `${variableToFix(rule, res, sent)}: Vast refused the create (${rule.note}): ${described}`;
  // The host shows this on /api/v1/providers: a refused key must not read as a bad request.
  return { kind: 'rejected', reason, errorClass: rule.read === 'auth' ? 'auth' : 'request' };
}

/** The error a read throws for a non-success answer (callers handle `gone` before asking). */
export function readError(what: string, res: HttpResponse): ProviderApiError {
  return readErrorOf(classifyVastError(res), describeAnswer(what, res), res.status, res.retryAfterMs);
}
