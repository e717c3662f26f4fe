import type { Logger } from '../logger.js';
import { PRODUCT_USER_AGENT } from './kit/user-agent.js';
import type { ProviderErrorClass } from './provider.js';

/**
 * A cloud API call that did not produce a usable answer. `errorClass` is what the host shows on
 * `/api/v1/providers` and uses in logs; messages name the method and path, never the API key.
 */
export class ProviderApiError extends Error {
  constructor(
    readonly errorClass: ProviderErrorClass,
    message: string,
    readonly status?: number,
    /** When the cloud said (or we decided) how long to wait before asking again. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'ProviderApiError';
  }
}

/** The class of any error a plugin threw: ours when it is a `ProviderApiError`, else `internal`. */
export function errorClassOf(err: unknown): ProviderErrorClass {
  return err instanceof ProviderApiError ? err.errorClass : 'internal';
}

/** A cloud's documented minimum spacing of calls to one endpoint, per API key. */
export interface EndpointLimit {
  minIntervalMs: number;
}

export interface ProviderHttpOptions {
  providerId: string;
  /** The API's origin (`https://console.vast.ai`); request paths are appended to it. */
  baseUrl: string;
  apiKey: string;
  logger: Logger;
  /** Per-call timeout; a call that takes longer is `timeout` (an ambiguous create). Default 30 s. */
  timeoutMs?: number;
  /** Limits by endpoint bucket name; a bucket not listed has no spacing. */
  limits: Record<string, EndpointLimit>;
  /** Wait after a 429 that carries no `Retry-After` (Vast never sends one); doubles per repeat. Default 2 s. */
  backoffMs?: number;
  /** Ceiling of that doubling. Default 60 s. */
  maxBackoffMs?: number;
  /** Injected in tests; wall time otherwise (rate limits are wall-clock facts). */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export interface HttpResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON when the body was JSON, otherwise null (see `text`). */
  json: unknown;
  text: string;
  /** Set on a 429: how long this bucket now waits before its next call. */
  retryAfterMs?: number;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  timeoutMs?: number;
}

interface Bucket {
  nextAt: number;
  /** Serialises callers so the spacing holds across concurrent polls. */
  chain: Promise<void>;
  consecutive429: number;
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.());

/** `Retry-After` as delay-seconds or an HTTP-date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The HTTP client every cloud plugin uses: bearer auth, JSON, the product User-Agent
 * (`PRODUCT_USER_AGENT`), a timeout, a client-side limiter
 * per endpoint bucket, and a back-off that a 429 pushes out for later calls to the same bucket.
 * It returns every HTTP answer (the plugin's error table decides what a status means) and
 * throws `ProviderApiError` only when no answer arrived (`timeout`, `unavailable`).
 */
export class ProviderHttpClient {
  private readonly buckets = new Map<string, Bucket>();
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly origin: string;

  private readonly secrets: string[];

  constructor(private readonly opts: ProviderHttpOptions) {
    this.now = opts.now ?? Date.now;
    this.sleep = opts.sleep ?? defaultSleep;
    this.origin = opts.baseUrl.replace(/\/+$/, '');
    const key = opts.apiKey;
    this.secrets =
      key.length < 4 ? [] : [...new Set([key, encodeURIComponent(key), Buffer.from(key).toString('base64')])];
  }

  /**
   * A cloud or a proxy in front of it may echo the request, Authorization header included, in
   * an error body; plugins quote error bodies in messages and logs. The key is taken out of
   * every answer before anyone reads it, so no plugin can leak it by quoting.
   */
  private redact(text: string): string {
    let out = text;
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join('[redacted]');
    return out;
  }

  private bucket(name: string): Bucket {
    let b = this.buckets.get(name);
    if (!b) {
      b = { nextAt: 0, chain: Promise.resolve(), consecutive429: 0 };
      this.buckets.set(name, b);
    }
    return b;
  }

  /** Waits for this bucket's next slot, then claims it. */
  private async slot(name: string): Promise<void> {
    const b = this.bucket(name);
    const interval = this.opts.limits[name]?.minIntervalMs ?? 0;
    const turn = b.chain.then(async () => {
      const wait = b.nextAt - this.now();
      if (wait > 0) await this.sleep(wait);
      b.nextAt = this.now() + interval;
    });
    b.chain = turn.catch(() => undefined);
    await turn;
  }

  /** Milliseconds until `bucket` may be called again (0 when free now). */
  waitMs(bucket: string): number {
    return Math.max(0, (this.buckets.get(bucket)?.nextAt ?? 0) - this.now());
  }

  async request(bucket: string, method: string, path: string, options: RequestOptions = {}): Promise<HttpResponse> {
    await this.slot(bucket);
    const url = new URL(this.origin + path);
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const what = `${this.opts.providerId} ${method} ${url.pathname}`;
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.opts.apiKey}`,
      Accept: 'application/json',
      'User-Agent': PRODUCT_USER_AGENT,
    };
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    const timeoutMs = options.timeoutMs ?? this.opts.timeoutMs ?? 30_000;
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: AbortSignal.timeout(timeoutMs),
        redirect: 'error',
      });
      text = this.redact(await res.text());
    } catch (err) {
      const e = err as Error;
      if (e.name === 'TimeoutError' || e.name === 'AbortError')
        throw new ProviderApiError('timeout', `${what}: no answer within ${timeoutMs} ms`);
      const cause = (e.cause as Error | undefined)?.message;
      throw new ProviderApiError('unavailable', this.redact(`${what}: ${e.message}${cause ? ` (${cause})` : ''}`));
    }
    let json: unknown = null;
    if (text && /json/i.test(res.headers.get('content-type') ?? '')) {
      try {
        json = JSON.parse(text);
      } catch {
        json = null;
      }
    }
    const b = this.bucket(bucket);
    const out: HttpResponse = { status: res.status, headers: res.headers, json, text };
    if (res.status === 429) {
      b.consecutive429 += 1;
      const base = this.opts.backoffMs ?? 2000;
      const told = parseRetryAfter(res.headers.get('retry-after'), this.now());
      const wait = told ?? Math.min(this.opts.maxBackoffMs ?? 60_000, base * 2 ** Math.min(b.consecutive429 - 1, 16));
      b.nextAt = Math.max(b.nextAt, this.now() + wait);
      out.retryAfterMs = wait;
      this.opts.logger.warn(
        { provider: this.opts.providerId, bucket, retryAfterMs: wait },
        'provider rate limit hit; backing off',
      );
    } else {
      b.consecutive429 = 0;
    }
    return out;
  }
}

/**
 * One read shared by every caller for `ttlMs`: polling fifty rentals makes one list call, not
 * fifty. Concurrent callers share the call in flight; a failure is not cached.
 */
export class SharedRead<T> {
  private value?: { at: number; data: T };
  private inflight?: Promise<T>;

  constructor(
    private readonly load: () => Promise<T>,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get(): Promise<T> {
    if (this.value && this.now() - this.value.at < this.ttlMs) return Promise.resolve(this.value.data);
    if (!this.inflight) {
      this.inflight = this.load()
        .then((data) => {
          this.value = { at: this.now(), data };
          return data;
        })
        .finally(() => {
          this.inflight = undefined;
        });
    }
    return this.inflight;
  }

  /** Forgets the cached value, after a write that changed what it lists (create, destroy). */
  invalidate(): void {
    this.value = undefined;
  }
}
