import type { Logger } from '../../logger.js';
import { ProviderHttpClient, type EndpointLimit } from '../provider-http.js';

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

/**
 * The one way a plugin builds its HTTP client: its id, origin and key, its documented spacing per
 * bucket (milliseconds) and any tuning. The client carries the product User-Agent, redacts the
 * key from every answer and backs off on 429.
 */
export function createProviderClient(spec: {
  providerId: string;
  apiUrl: string;
  apiKey: string;
  logger: Logger;
  intervalsMs: Readonly<Record<string, number>>;
  tuning?: ClientTuning;
}): ProviderHttpClient {
  const t = spec.tuning ?? {};
  const limits: Record<string, EndpointLimit> = {};
  for (const [bucket, ms] of Object.entries(spec.intervalsMs))
    limits[bucket] = { minIntervalMs: t.intervalsMs?.[bucket] ?? ms };
  return new ProviderHttpClient({
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
  });
}
