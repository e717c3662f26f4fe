import { GprNetworkError, GprTimeoutError, retryAfterSeconds } from './errors.js';

export interface RetryPolicy {
  /** Retries after the first attempt (default 3). 0 fails fast. */
  retries?: number;
  /** Per-attempt timeout (default 30 s). */
  timeoutMs?: number;
  /** A 429 whose `Retry-After` is longer than this is returned to the caller instead of waited out (default 10 s). */
  maxRetryAfterMs?: number;
  /** First back-off delay after a 5xx or network failure, doubled each time (default 500 ms). */
  baseDelayMs?: number;
  fetch?: typeof fetch;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A fetch that retries what is safe to retry:
 * - GETs, and POSTs carrying an `Idempotency-Key` (sent again with the same key and body), after a
 *   timeout, a network failure or a 5xx, with exponential back-off (a concurrent request with the
 *   same key needs no retry: the service makes it wait for the first and answers it as a replay);
 * - any request answered 429, after the server's `Retry-After` (a rate-limited request was not processed).
 */
export function retryingFetch(
  policy: RetryPolicy = {},
): (input: Request | string | URL, init?: RequestInit) => Promise<Response> {
  const retries = policy.retries ?? 3;
  const timeoutMs = policy.timeoutMs ?? 30_000;
  const maxRetryAfterMs = policy.maxRetryAfterMs ?? 10_000;
  const baseDelayMs = policy.baseDelayMs ?? 500;
  const doFetch = policy.fetch ?? globalThis.fetch;

  return async (input, init) => {
    const req = new Request(input, init);
    const body = req.body ? await req.arrayBuffer() : undefined;
    const replayable = req.method === 'GET' || req.method === 'HEAD' || req.headers.has('idempotency-key');
    const backoff = (n: number) => Math.min(8000, baseDelayMs * 2 ** n) * (0.75 + Math.random() / 2);

    for (let attempt = 0; ; attempt++) {
      const last = attempt >= retries;
      let res: Response;
      try {
        res = await doFetch(req.url, {
          method: req.method,
          headers: req.headers,
          body,
          signal: AbortSignal.timeout(timeoutMs),
          redirect: 'manual',
        });
      } catch (err) {
        const timedOut = (err as Error)?.name === 'TimeoutError';
        if (!last && replayable) {
          await sleep(backoff(attempt));
          continue;
        }
        if (timedOut)
          throw new GprTimeoutError(`${req.method} ${new URL(req.url).pathname} got no answer within ${timeoutMs} ms`);
        const reason = (err as { cause?: { code?: string; message?: string } })?.cause;
        throw new GprNetworkError(
          `Cannot reach ${new URL(req.url).origin}: ${reason?.code ?? reason?.message ?? (err as Error).message}`,
          req.url,
          err,
        );
      }
      if (last) return res;
      if (res.status === 429) {
        const wait = (retryAfterSeconds(res.headers.get('retry-after')) ?? 1) * 1000;
        if (wait > maxRetryAfterMs) return res;
        await res.body?.cancel();
        await sleep(wait);
        continue;
      }
      if (replayable && res.status >= 500) {
        await res.body?.cancel().catch(() => undefined);
        await sleep(backoff(attempt));
        continue;
      }
      return res;
    }
  };
}
