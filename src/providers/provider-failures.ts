import type { Logger } from '../logger.js';
import { errorClassOf } from './provider-http.js';

/** The prefix of a provider's settings: `VAST_PROVIDER` for `vast`. */
const settingsPrefix = (providerId: string) => `${providerId.toUpperCase().replace(/-/g, '_')}_PROVIDER`;

/** Whether a failure is the HTTP client refusing the configured port (fetch's "bad ports", such as 9, 25 or 6000) before any connection. */
const blockedPort = (message: string) => /\bbad port\b/i.test(message);

/**
 * What an operator should look at for a provider failing with `errorClass` (null: no refresh has
 * succeeded yet), naming the setting: a refused key and an unreachable cloud look alike from afar.
 */
export function providerFailureCause(providerId: string, errorClass: string | null, message = ''): string {
  const prefix = settingsPrefix(providerId);
  if (blockedPort(message))
    return `${prefix}_API_URL names a port the HTTP client refuses to call (fetch's blocked ports, e.g. 9, 25, 6000): give the API another port`;
  switch (errorClass) {
    case 'auth':
      return `${prefix}_API_KEY refused (auth)`;
    case 'unavailable':
    case 'timeout':
      return `${prefix}_API_URL unreachable (${errorClass})`;
    case 'rate_limited':
      return 'throttled by the cloud (rate_limited): it recovers by itself';
    case 'bad_response':
    case 'request':
      return `the cloud's answer was not understood (${errorClass}): see the worker's log`;
    case null:
      return 'no successful refresh yet: is a worker running?';
    default:
      return `last error ${errorClass}: see the worker's log`;
  }
}

/**
 * Logs what fails against a provider as one line naming its class and the setting to check, with
 * the error's stack only the first time a failure of that kind (provider, action, class) is seen;
 * repeats, which a periodic job makes every minute, are one line each. The kind is forgotten once
 * the action succeeds again, so the next outage shows its stack once more.
 */
export class ProviderFailureLog {
  private readonly seen = new Set<string>();

  constructor(private readonly logger: Logger) {}

  failed(providerId: string, action: string, err: unknown): void {
    const errorClass = errorClassOf(err);
    const message = err instanceof Error ? err.message : String(err);
    const line = `${action} failed for ${providerId}: ${providerFailureCause(providerId, errorClass, message)}`;
    const kind = `${providerId}\u001f${action}\u001f${errorClass}\u001f${blockedPort(message)}`;
    if (this.seen.has(kind)) {
      this.logger.warn({ provider: providerId, errorClass, error: message.split('\n')[0].slice(0, 300) }, line);
      return;
    }
    this.seen.add(kind);
    this.logger.warn({ provider: providerId, errorClass, err }, line);
  }

  succeeded(providerId: string, action: string): void {
    const prefix = `${providerId}\u001f${action}\u001f`;
    for (const kind of this.seen) if (kind.startsWith(prefix)) this.seen.delete(kind);
  }
}
