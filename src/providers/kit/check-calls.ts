import { performance } from 'node:perf_hooks';
import { ProviderApiError, type HttpResponse } from '../provider-http.js';
import type {
  ProviderCheckCall,
  ProviderCheckCredentials,
  ProviderCheckErrorClass,
  ProviderCheckUserAgent,
} from '../provider-check.js';
import { PRODUCT_USER_AGENT } from './user-agent.js';

/** How a plugin reads one answer of a check's call: a value, or why the call failed. */
export type CheckReading<T> =
  | { ok: true; value: T; detail: string }
  | { ok: false; errorClass: ProviderCheckErrorClass; detail: string; fix?: string };

/** What a check's call came to: its reading, with the HTTP status when an answer came. */
export type CheckOutcome<T> = CheckReading<T> & { status?: number };

/**
 * An edge's refusal rather than the API's own answer: a 403 whose body is not JSON but a CDN's page
 * (Cloudflare's plain-text `error code: 1010`, its block on a client's signature, or an HTML page).
 * For clouds whose error table has no row of its own for it.
 */
export function isEdgeRefusal(res: Pick<HttpResponse, 'status' | 'json' | 'text'>): boolean {
  return res.status === 403 && res.json === null && /error code:\s*1\d{3}\b|<!doctype html|<html\b/i.test(res.text);
}

/**
 * The calls of one provider check, each timed and recorded as it went: a check answers with
 * {@link CheckCalls.calls}. A call that got no answer (a timeout, a refused connection) is recorded
 * with the class its `ProviderApiError` carries; anything else thrown is `internal`.
 */
export class CheckCalls {
  readonly calls: ProviderCheckCall[] = [];

  /**
   * One call, timed: `fn` makes it and reads its answer; a throw is a call that got no usable
   * answer. `queuedMs` is how long the client's own spacing of calls (the cloud's rate limit)
   * holds the call back before sending it (`ProviderHttpClient.waitMs`): not the cloud's time, so
   * not counted.
   */
  async timed<T>(name: string, fn: () => Promise<CheckOutcome<T>>, queuedMs = 0): Promise<CheckOutcome<T>> {
    const start = performance.now() + queuedMs;
    let outcome: CheckOutcome<T>;
    try {
      outcome = await fn();
    } catch (err) {
      return this.failed(name, start, err);
    }
    this.record(name, start, outcome, outcome.status);
    return outcome;
  }

  /** One call whose raw answer the plugin reads itself (`read` classifies it, with the plugin's error table). */
  answer<T>(
    name: string,
    send: () => Promise<HttpResponse>,
    read: (res: HttpResponse) => CheckReading<T>,
    queuedMs = 0,
  ): Promise<CheckOutcome<T>> {
    return this.timed(
      name,
      async () => {
        const res = await send();
        return { ...read(res), status: res.status };
      },
      queuedMs,
    );
  }

  /**
   * One call through a plugin method that throws a `ProviderApiError` when the cloud refused (its
   * status and class are recorded) and returns the value otherwise.
   */
  run<T>(name: string, fn: () => Promise<T>, describe: (value: T) => string, queuedMs = 0): Promise<CheckOutcome<T>> {
    return this.timed(
      name,
      async () => {
        const value = await fn();
        return { ok: true, value, detail: describe(value) };
      },
      queuedMs,
    );
  }

  private failed(name: string, start: number, err: unknown): CheckOutcome<never> {
    const api = err instanceof ProviderApiError ? err : undefined;
    const reading = {
      ok: false as const,
      errorClass: api?.errorClass ?? ('internal' as const),
      detail: err instanceof Error ? err.message : String(err),
    };
    this.record(name, start, reading, api?.status);
    return { ...reading, status: api?.status };
  }

  private record(name: string, start: number, reading: CheckReading<unknown>, status?: number): void {
    const call: ProviderCheckCall = {
      name,
      ok: reading.ok,
      ms: Math.max(0, Math.round(performance.now() - start)),
      ...(status === undefined ? {} : { status }),
      detail: reading.detail,
    };
    if (!reading.ok) {
      call.errorClass = reading.errorClass;
      if (reading.fix) call.fix = reading.fix;
    }
    this.calls.push(call);
  }
}

/** The refusal of an outcome that stops a check before its next calls: the key refused, or the edge. */
export const refusedAccess = (o: CheckOutcome<unknown>): boolean =>
  !o.ok && (o.errorClass === 'auth' || o.errorClass === 'user_agent');

/**
 * Whether the credentials were accepted, from the first call that reads them: accepted when it
 * answered, else its refusal. An edge refusal means the key was never read; a call that got no
 * answer says nothing either way, so both are "not accepted" with their own class.
 */
export function credentialsOf(o: CheckOutcome<unknown>, authFix: string): ProviderCheckCredentials {
  if (o.ok) return { accepted: true, detail: o.detail };
  if (o.errorClass === 'user_agent')
    return {
      accepted: false,
      errorClass: 'user_agent',
      detail: 'not checked: the edge refused the request before the API read the key',
    };
  return {
    accepted: false,
    errorClass: o.errorClass,
    detail: o.detail,
    ...(o.errorClass === 'auth' ? { fix: o.fix ?? authFix } : o.fix ? { fix: o.fix } : {}),
  };
}

/**
 * The User-Agent the plugin's client sends (`PRODUCT_USER_AGENT`) and whether the edge let it
 * through, from every call of the check: refused when any answer was an edge refusal, accepted
 * when any answer came from the API itself.
 */
export function userAgentOf(calls: readonly ProviderCheckCall[]): ProviderCheckUserAgent {
  const sent = PRODUCT_USER_AGENT;
  const refused = calls.find((c) => c.errorClass === 'user_agent');
  if (refused)
    return {
      sent,
      accepted: false,
      detail: `${refused.name} was answered by the edge, not the API (HTTP ${refused.status ?? '?'})`,
      fix: `the edge in front of the API refuses the User-Agent "${sent}" by its signature; ask the cloud to let it through, or report it: the plugin's client sends no other`,
    };
  if (calls.some((c) => c.ok || c.status !== undefined))
    return { sent, accepted: true, detail: 'the API itself answered' };
  return { sent, accepted: false, detail: 'no answer came, so the edge could not be seen' };
}
