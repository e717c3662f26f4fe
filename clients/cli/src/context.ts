import {
  DEFAULT_BASE_URL,
  effectiveSettings,
  GprClient,
  PACKAGED_SERVICE_FILE,
  packagedBaseUrl,
} from '@gpu-rental/sdk';
import { Command } from 'commander';
import { durationFlag } from './machine-flags.js';
import { NoTokenError, Progress, redactSecrets } from './output.js';

declare const __CLIENT_VERSION__: string;
export const VERSION = typeof __CLIENT_VERSION__ === 'string' ? __CLIENT_VERSION__ : '0.0.0-dev';

/** The service this copy was installed from, when a service served it (beside dist/ in the package). */
export const PACKAGED_BASE_URL = packagedBaseUrl(new URL(`../${PACKAGED_SERVICE_FILE}`, import.meta.url));

/** Where gpr goes without --base-url, GPR_BASE_URL or a stored address, as --help says it. */
export const FALLBACK_BASE_URL_TEXT = PACKAGED_BASE_URL
  ? `${PACKAGED_BASE_URL}, the service this copy came from`
  : DEFAULT_BASE_URL;

/** What every command needs: the global flags, clients and output in the chosen mode. */
export class Ctx {
  constructor(private readonly program: Command) {}

  get opts(): { json?: boolean; baseUrl?: string } {
    return this.program.opts();
  }

  get json(): boolean {
    return Boolean(this.opts.json);
  }

  get settings() {
    return effectiveSettings({ baseUrl: this.opts.baseUrl }, PACKAGED_BASE_URL);
  }

  /** A client for public calls (no token needed). */
  publicClient(): GprClient {
    const s = this.settings;
    return new GprClient({ baseUrl: s.baseUrl, retries: s.retries, userAgent: `gpr/${VERSION}` });
  }

  /** A client with the configured token; refuses (exit 3) when there is none. */
  client(): GprClient {
    const s = this.settings;
    if (!s.token) throw new NoTokenError('No API token is configured.');
    return new GprClient({ baseUrl: s.baseUrl, token: s.token, retries: s.retries, userAgent: `gpr/${VERSION}` });
  }

  progress(): Progress {
    return new Progress(this.json);
  }

  /** JSON on stdout with --json, else the human rendering. */
  out(data: unknown, human: () => string): void {
    process.stdout.write(redactSecrets(this.json ? `${JSON.stringify(data, null, 2)}\n` : human()));
  }
}

/** A --timeout flag (seconds, or a duration such as 15m or 2h) in milliseconds; without one, the fallback. */
export function timeoutMs(value: string | undefined, fallbackSeconds: number): number;
export function timeoutMs(value: string | undefined, fallbackSeconds?: number): number | undefined;
export function timeoutMs(value: string | undefined, fallbackSeconds?: number): number | undefined {
  if (value === undefined) return fallbackSeconds === undefined ? undefined : fallbackSeconds * 1000;
  return durationFlag('--timeout', value) * 1000;
}
