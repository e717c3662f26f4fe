import type { Logger } from '../../logger.js';
import {
  ProviderHttpClient,
  type EndpointLimit,
  type HttpResponse,
  type ProviderHttpOptions,
  type RequestOptions,
} from '../provider-http.js';
import type { DriftRecorder } from './drift.js';
import { isCatchAll, matchErrorRule, type ErrorAnswer, type ErrorRule } from './error-table.js';
import { ProviderDrift } from './provider-drift.js';

/** What tests may turn on a plugin's client; production runs on the cloud's documented limits. */
export interface ClientTuning {
  /** Minimum spacing per endpoint bucket, overriding the plugin's defaults bucket by bucket. */
  intervalsMs?: Record<string, number | undefined>;
  timeoutMs?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** How the client reads a failed answer against the plugin's error table, to report those only a catch-all row takes. */
export interface ErrorReading {
  table: readonly ErrorRule[];
  /** The answer as the table sees it (status, the cloud's code, its text), or null when it is no failure. */
  answerOf(res: HttpResponse): ErrorAnswer | null;
}

/** The HTTP client with every failed answer read against the error table, once, for the drift report. */
class DriftWatchedHttpClient extends ProviderHttpClient {
  constructor(
    opts: ProviderHttpOptions,
    private readonly drift: ProviderDrift,
    private readonly errors: ErrorReading,
  ) {
    super(opts);
  }

  override async request(
    bucket: string,
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<HttpResponse> {
    const res = await super.request(bucket, method, path, options);
    try {
      const answer = this.errors.answerOf(res);
      if (answer && isCatchAll(matchErrorRule(this.errors.table, answer)))
        this.drift.unmatchedError(`${method} ${path}`, {
          status: res.status,
          code: answer.code,
          json: res.json,
          text: res.text,
        });
    } catch {
      // The plugin reads the answer itself; the report must never change what it gets.
    }
    return res;
  }
}

/**
 * The one way a plugin builds its HTTP client: its id, origin and key, its documented spacing per
 * bucket (milliseconds) and any tuning. The client carries the product User-Agent, redacts the
 * key from every answer and backs off on 429. Each failed answer that only a catch-all row of
 * `errors.table` takes is reported to `drift` (`unmatched_error`, where the call's path with its
 * ids replaced), so a plugin does not report those itself.
 */
export function createProviderClient(spec: {
  providerId: string;
  apiUrl: string;
  apiKey: string;
  logger: Logger;
  intervalsMs: Readonly<Record<string, number>>;
  drift: DriftRecorder;
  errors: ErrorReading;
  tuning?: ClientTuning;
}): ProviderHttpClient {
  const t = spec.tuning ?? {};
  const limits: Record<string, EndpointLimit> = {};
  for (const [bucket, ms] of Object.entries(spec.intervalsMs))
    limits[bucket] = { minIntervalMs: t.intervalsMs?.[bucket] ?? ms };
  return new DriftWatchedHttpClient(
    {
      providerId: spec.providerId,
      baseUrl: spec.apiUrl,
      apiKey: spec.apiKey,
      logger: spec.logger,
      limits,
      timeoutMs: t.timeoutMs,
      backoffMs: t.backoffMs,
      maxBackoffMs: t.maxBackoffMs,
      now: t.now,
      sleep: t.sleep,
    },
    new ProviderDrift(spec.drift, spec.providerId),
    spec.errors,
  );
}
