import type { ErrorReading } from '../../src/providers/kit/client.js';
import { createVerdictOf, matchErrorRule, readErrorOf, type ErrorRule } from '../../src/providers/kit/error-table.js';
import type { HttpResponse, ProviderApiError } from '../../src/providers/provider-http.js';
import type { CreateResult, ProviderErrorClass } from '../../src/providers/provider.js';

/** An RFC 9457 problem document as RunPod sends it. */
export interface Problem {
  title?: string;
  status?: number;
  detail?: string;
  errors?: string[];
}

/**
 * RunPod gives capacity exhaustion no machine-readable code, only this `detail` on a 400
 * ("There are no longer any instances available with the requested specifications...", worded
 * differently over time; only "no longer any instances available" has stayed).
 */
export const CAPACITY_DETAIL =
  /no longer any instances available|no instances available|not enough free gpus|no gpus? available/i;

/**
 * A page from the edge in front of the API rather than a problem document from the API itself:
 * Cloudflare's plain-text `error code: 1010` (its block on a client's User-Agent signature) or an
 * HTML page. The API never saw the request, so the key was not checked.
 */
export const EDGE_PAGE = /error code:\s*1\d{3}\b|cloudflare|<!doctype html|<html/i;

/** A create refused for its image: the reference is malformed or the registry has no such image or tag. */
export const IMAGE_REFUSED =
  /invalid image|could not be pulled|manifest unknown|manifest for \S+ not found|pull access denied|repository does not exist|invalid reference format/i;

/**
 * A 400 about a container setting a rental chose (`ports`, `env`, `args`), named by its field as
 * the API names fields in its messages. Every candidate would refuse it the same way.
 */
export const SETTINGS_REFUSED = /\b(ports|env|args)(\[\d+\]|\.\w+)?:/i;

/**
 * The one error table, matched by the kit (rows of meaning first, in this order, then status
 * rows). Per RunPod's create guidance: 422 is a contract violation (never retry), 400 is a rule
 * violation or no capacity for this GPU (try the next candidate), 402 stops everything, 403 skips
 * the candidate, 429 backs off, 5xx is transient. Refusals that every candidate would meet (the
 * image, the CUDA setting, the edge, the key) are `rejected`, with a note naming what the operator
 * must fix; they must not hide behind "no capacity". `read` is what any other call throws; `log`
 * how loudly a create with this answer is logged.
 */
export const ERROR_TABLE: readonly ErrorRule[] = [
  {
    match: { status: 400, text: CAPACITY_DETAIL },
    create: 'unavailable',
    read: 'unavailable',
    log: 'info',
    note: 'no capacity for this GPU and count',
  },
  {
    match: { status: 403, text: EDGE_PAGE },
    create: 'rejected',
    read: 'request',
    log: 'error',
    note: "RunPod's edge (Cloudflare) refused the request before the API saw it, which it does to a client's User-Agent (error code 1010); the API key was not checked, so it is not the cause",
  },
  {
    match: { status: 400, text: IMAGE_REFUSED },
    create: 'rejected',
    read: 'request',
    log: 'error',
    note: 'RUNPOD_PROVIDER_IMAGE: RunPod refused the image (malformed, or no such image or tag in its registry)',
  },
  {
    match: { status: 400, text: /cuda/i },
    create: 'rejected',
    read: 'request',
    log: 'error',
    note: 'RUNPOD_PROVIDER_CUDA_VERSIONS: RunPod refused the CUDA constraint',
  },
  {
    match: { status: 400, text: /not valid JSON|exactly one of gpu or cpu/i },
    create: 'rejected',
    read: 'request',
    log: 'error',
    note: 'RunPod refused the shape of our request',
  },
  {
    match: { status: 400, text: SETTINGS_REFUSED },
    create: 'rejected',
    read: 'request',
    log: 'warn',
    note: "RunPod refused the rental's machine settings",
  },
  // Not one of the texts above: a placement rule this GPU/count breaks (count above this cloud's
  // maximum, an unknown GPU type). RunPod says to try the next candidate; the provider logs the
  // detail so a rule every candidate breaks is seen.
  {
    match: { status: 400 },
    create: 'unavailable',
    read: 'request',
    log: 'warn',
    note: 'request refused for this GPU',
    catchAll: true,
  },
  {
    match: { status: 401 },
    create: 'rejected',
    read: 'auth',
    log: 'error',
    note: 'RUNPOD_PROVIDER_API_KEY: API key missing, wrong or revoked',
  },
  // The account cannot pay: no RunPod offer will succeed until the operator tops it up, so this is
  // a configuration error to log loudly, not lack of capacity to hide behind other offers.
  {
    match: { status: 402 },
    create: 'rejected',
    read: 'auth',
    log: 'error',
    note: 'RunPod account balance too low: top the account up',
  },
  {
    match: { status: 403 },
    create: 'unavailable',
    read: 'auth',
    log: 'warn',
    note: 'this account has no access to the pool (or RUNPOD_PROVIDER_API_KEY is read-only)',
  },
  {
    match: { status: 404 },
    create: 'unavailable',
    read: 'request',
    log: 'warn',
    note: 'GPU type or resource not found',
  },
  // RunPod's answer on a path it has retired (REST v1, GraphQL next): our request is what is
  // wrong, never "nothing there".
  {
    match: { status: 410 },
    create: 'rejected',
    read: 'request',
    log: 'error',
    note: 'RunPod has retired this API path (410 Gone, what REST v1 answers since its retirement): the plugin calls a path RunPod no longer serves',
  },
  {
    match: { status: 422 },
    create: 'rejected',
    read: 'request',
    log: 'error',
    note: 'request body does not match the API contract',
  },
  { match: { status: 429 }, create: 'throttled', read: 'rate_limited', log: 'info', note: 'rate limited' },
  { match: { status: '5xx' }, create: 'ambiguous', read: 'unavailable', log: 'warn', note: 'RunPod server error' },
  {
    match: { status: '4xx' },
    create: 'rejected',
    read: 'request',
    log: 'error',
    note: 'unexpected client error',
    catchAll: true,
  },
  // Anything outside 4xx/5xx (a 3xx, an unexpected 2xx shape) is an answer we cannot read.
  { match: {}, create: 'ambiguous', read: 'bad_response', log: 'warn', note: 'unexpected answer' },
];

/**
 * What the table matches an answer's text against: a problem document's title, detail and
 * `errors` (the title is where RunPod names some refusals, "Invalid Image"), or the raw body of
 * anything else, which may be an edge's page. Capped: such a page can run to hundreds of KB.
 */
export function answerText(json: unknown, text: string): string {
  const p = json as Problem | null;
  if (p && typeof p === 'object') {
    const parts = [p.title, p.detail, ...(Array.isArray(p.errors) ? p.errors : [])].filter(
      (s): s is string => typeof s === 'string' && s.length > 0,
    );
    if (parts.length) return parts.join(' | ').slice(0, 4000);
  }
  return text.slice(0, 4000);
}

/**
 * The image refusal when the image was the rental's own: nothing for the operator to fix, and the
 * same refusal on every candidate, so the rental fails with this reason instead of trying on.
 */
export const RENTAL_IMAGE_RULE: ErrorRule = {
  match: { status: 400, text: IMAGE_REFUSED },
  create: 'rejected',
  read: 'request',
  log: 'warn',
  note: "the rental's image: RunPod refused it (malformed, or no such image or tag in its registry)",
};

/** `text` with every secret replaced. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) out = out.split(s).join('[redacted]');
  return out;
}

/**
 * An answer with `secrets` taken out of everything the table and the reason read (a problem
 * document's strings, the raw text), before anything is cut short: a secret cut in half by a
 * length cap would no longer be found.
 */
function withoutSecrets<T extends Pick<HttpResponse, 'json' | 'text'>>(res: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return res;
  const clean = (v: unknown): unknown =>
    typeof v === 'string' ? redact(v, secrets) : Array.isArray(v) ? v.map(clean) : v;
  const json =
    res.json && typeof res.json === 'object' && !Array.isArray(res.json)
      ? Object.fromEntries(Object.entries(res.json).map(([k, v]) => [k, clean(v)]))
      : clean(res.json);
  return { ...res, json, text: redact(res.text, secrets) };
}

/** The rule for an HTTP error answer. RunPod sends no error codes, only text. */
export function errorRule(status: number, text: string | undefined): ErrorRule {
  return matchErrorRule(ERROR_TABLE, { status, text });
}

/**
 * The table for the kit's client, which reports to the drift report every failure only a catch-all
 * row takes: a failure is any answer outside 2xx, read by its text as {@link errorRule} reads it.
 */
export const RUNPOD_ERROR_READING: ErrorReading = {
  table: ERROR_TABLE,
  answerOf: (res) =>
    res.status < 300 && res.status >= 200 ? null : { status: res.status, text: answerText(res.json, res.text) },
};

/** Reads a problem document's `detail` (or the raw text, an HTML page's title) for messages; never contains our key. */
export function problemDetail(json: unknown, text: string): string {
  const p = json as Problem | null;
  if (p && typeof p === 'object') {
    const parts = [p.detail ?? p.title, ...(Array.isArray(p.errors) ? p.errors : [])].filter(
      (s): s is string => typeof s === 'string' && s.length > 0,
    );
    if (parts.length) return parts.join('; ').slice(0, 500);
  }
  const title = /<title[^>]*>([^<]*)<\/title>/i.exec(text)?.[1];
  return (title ?? text).replace(/\s+/g, ' ').trim().slice(0, 200);
}

/** What the host records for a `rejected` create of this rule: the class its reads would throw. */
function rejectedClass(rule: ErrorRule): ProviderErrorClass {
  return rule.read === 'gone' ? 'request' : rule.read;
}

/**
 * A create's answer other than 201, per the table, and how loudly to log it; 429 carries the
 * client's wait. A `rejected` outcome carries its error class and a reason that starts with what to
 * fix (the variable, where one is to blame; the rental's image when `sent.rentalImage`). RunPod's
 * words go into the reason and the log; should they ever quote what was sent, `sent.secrets` (the
 * rental's variable values and script) are taken out first.
 */
export function createResultFor(
  answer: Pick<HttpResponse, 'status' | 'json' | 'text' | 'retryAfterMs'>,
  sent: { rentalImage?: boolean; secrets?: readonly string[] } = {},
): { result: Exclude<CreateResult, { kind: 'created' }>; log: NonNullable<ErrorRule['log']> } {
  const res = withoutSecrets(answer, sent.secrets ?? []);
  const matched = errorRule(res.status, answerText(res.json, res.text));
  const rule = sent.rentalImage && matched.match.text === IMAGE_REFUSED ? RENTAL_IMAGE_RULE : matched;
  const detail = problemDetail(res.json, res.text);
  const reason = `${rule.note} (RunPod ${res.status}${detail ? `: ${detail}` : ''})`;
  const verdict = createVerdictOf(rule, reason, res.retryAfterMs);
  const result = verdict.kind === 'rejected' ? { ...verdict, errorClass: rejectedClass(rule) } : verdict;
  return { result, log: rule.log ?? 'warn' };
}

/** The error any non-create call throws for an HTTP error answer, per the table. */
export function apiErrorFor(
  what: string,
  res: Pick<HttpResponse, 'status' | 'json' | 'text' | 'retryAfterMs'>,
): ProviderApiError {
  const rule = errorRule(res.status, answerText(res.json, res.text));
  const detail = problemDetail(res.json, res.text);
  return readErrorOf(
    rule,
    `${what}: ${res.status} ${rule.note}${detail ? ` (${detail})` : ''}`,
    res.status,
    res.retryAfterMs,
  );
}
