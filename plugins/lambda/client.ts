import type { Logger } from '../../src/logger.js';
import { createProviderClient, type ErrorReading } from '../../src/providers/kit/client.js';
import type { DriftRecorder } from '../../src/providers/kit/drift.js';
import { readErrorOf, type ErrorRule } from '../../src/providers/kit/error-table.js';
import { ProviderDrift } from '../../src/providers/kit/provider-drift.js';
import type { HttpResponse, ProviderApiError, ProviderHttpClient } from '../../src/providers/provider-http.js';
import { classifyLambdaError, EDGE_PAGE, LAMBDA_ERROR_TABLE, settingToFix } from './errors.js';
import type { LambdaTuning } from './options.js';

/** Lambda's documented limits: about one request a second per account, launches one per 12 s. */
export const LAMBDA_LIMITS = { apiIntervalMs: 1000, launchIntervalMs: 12_000 };

/** Buckets of the shared limiter: launches have their own, slower one. */
export type LambdaBucket = 'api' | 'launch';

/** A failed answer: status, Lambda's code and message, and what the error table makes of it. */
export interface LambdaFailure {
  ok: false;
  status: number;
  code?: string;
  message: string;
  /** Lambda's advice for the operator, when it gave one. */
  suggestion?: string;
  /** The error table's row for this answer. */
  rule: ErrorRule;
  retryAfterMs?: number;
}

export type LambdaResult<T> = { ok: true; data: T } | LambdaFailure;

interface ErrorBody {
  error?: { code?: unknown; message?: unknown; suggestion?: unknown };
}

/** Lambda's success: a 2xx whose body carries `data`. Anything else is a failure the error table reads. */
function isSuccess(res: HttpResponse): boolean {
  const json = res.json as { data?: unknown } | null;
  return res.status >= 200 && res.status < 300 && !!json && typeof json === 'object' && 'data' in json;
}

/** `error` of Lambda's failure body, when the body is one. */
const errorOf = (res: HttpResponse) =>
  res.json && typeof res.json === 'object' ? (res.json as ErrorBody).error : undefined;

/** What the table matches: Lambda's code, and its message (the raw body when it sent none, e.g. an edge page). */
function errorAnswer(res: HttpResponse): { status: number; code?: string; text: string } {
  const err = errorOf(res);
  return {
    status: res.status,
    code: typeof err?.code === 'string' ? err.code : undefined,
    text: typeof err?.message === 'string' ? err.message : res.text,
  };
}

/** The table for the kit's client, which reports to the drift report every failure only a catch-all row takes. */
export const LAMBDA_ERROR_READING: ErrorReading = {
  table: LAMBDA_ERROR_TABLE,
  answerOf: (res) => (isSuccess(res) ? null : errorAnswer(res)),
};

/**
 * Lambda Cloud's `{data}` / `{error:{code,message,suggestion}}` envelope over the shared provider
 * HTTP client. Answers are returned, not thrown; only a call that got no answer throws (a
 * `ProviderApiError` of class `timeout` or `unavailable`).
 */
export class LambdaClient {
  private readonly http: ProviderHttpClient;
  /** Where answers this plugin cannot fully read are reported (failures only a catch-all row takes: by `http` itself). */
  readonly drift: ProviderDrift;

  constructor(opts: { apiUrl: string; apiKey: string; logger: Logger; drift: DriftRecorder; tuning: LambdaTuning }) {
    const t = opts.tuning;
    this.drift = new ProviderDrift(opts.drift, 'lambda');
    this.http = createProviderClient({
      providerId: 'lambda',
      apiUrl: opts.apiUrl,
      apiKey: opts.apiKey,
      logger: opts.logger,
      intervalsMs: { api: LAMBDA_LIMITS.apiIntervalMs, launch: LAMBDA_LIMITS.launchIntervalMs },
      drift: opts.drift,
      errors: LAMBDA_ERROR_READING,
      tuning: {
        timeoutMs: t.timeoutMs,
        backoffMs: t.backoffMs,
        now: t.now,
        sleep: t.sleep,
        intervalsMs: { api: t.apiIntervalMs, launch: t.launchIntervalMs },
      },
    });
  }

  async call<T>(bucket: LambdaBucket, method: string, path: string, body?: unknown): Promise<LambdaResult<T>> {
    const res = await this.http.request(bucket, method, `/api/v1${path}`, { body });
    return LambdaClient.read<T>(res);
  }

  /** Milliseconds until `bucket` may be called again. */
  waitMs(bucket: LambdaBucket): number {
    return this.http.waitMs(bucket);
  }

  private static read<T>(res: HttpResponse): LambdaResult<T> {
    if (isSuccess(res)) return { ok: true, data: (res.json as { data: T }).data };
    const err = errorOf(res);
    const { code, text } = errorAnswer(res);
    const suggestion = typeof err?.suggestion === 'string' ? err.suggestion : undefined;
    return {
      ok: false,
      status: res.status,
      code,
      // Not Lambda's envelope: the raw body decided (an edge's HTML page); only a short, readable
      // form of it reaches the logs.
      message: typeof err?.message === 'string' ? err.message : bodySummary(res),
      suggestion,
      rule: classifyLambdaError(res.status, code, text),
      retryAfterMs: res.retryAfterMs,
    };
  }
}

/** A non-JSON body for a log line: an HTML page by its title and content type, other text cut short. */
function bodySummary(res: HttpResponse): string {
  if (EDGE_PAGE.test(res.text)) {
    const title = /<title[^>]*>([^<]{0,120})<\/title>/i.exec(res.text)?.[1]?.trim();
    return `an HTML page${title ? ` titled "${title}"` : ''} (${res.headers.get('content-type') ?? 'no content type'}), not Lambda's JSON`;
  }
  return res.text.slice(0, 200) || `HTTP ${res.status}`;
}

/** One line for logs and create reasons: status, code and Lambda's message (which never holds our key). */
export function describeFailure(f: LambdaFailure): string {
  return `${f.status}${f.code ? ` ${f.code}` : ''}: ${f.message}${f.suggestion ? ` (${f.suggestion})` : ''}`;
}

/**
 * One line for a refused call: the setting to fix first (when one can), then what Lambda's answer
 * means and the answer itself. Never holds the key: Lambda's messages do not, and an edge page is
 * reduced to its title.
 */
export function refusalReason(what: string, f: LambdaFailure): string {
  const setting = settingToFix(f.rule);
  return `${setting ? `${setting}: ` : ''}lambda ${what}: ${f.rule.note} (${describeFailure(f)})`;
}

/** The error a read throws when Lambda answered with a failure. */
export function failureError(what: string, f: LambdaFailure): ProviderApiError {
  return readErrorOf(f.rule, refusalReason(what, f), f.status, f.retryAfterMs);
}
