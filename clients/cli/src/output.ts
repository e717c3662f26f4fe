import {
  GprApiError,
  GprNetworkError,
  GprRentalStateError,
  GprTimeoutError,
  GprUnsafeValueError,
  budgetFloorNext,
  centsLookingPrice,
  failureNext,
  notActiveNext,
  notFoundNext,
  rentalRefusalNext,
} from '@gpu-rental/sdk';

/** Exit codes, documented in docs/clients.md and `gpr --help`. */
export const EXIT = {
  OK: 0,
  API: 1,
  USAGE: 2,
  AUTH: 3,
  PAYMENT: 4,
  TIMEOUT: 5,
  NETWORK: 6,
  RATE_LIMITED: 7,
  RECEIPT_INVALID: 8,
} as const;

export const EXIT_HELP = `Exit codes:
  0  success
  1  the API refused the request, or answered with a value unsafe to use (the message says why)
  2  usage error (bad arguments)
  3  authentication or permission (no token, refused token, missing scope)
  4  payment required (not enough credits, frozen account)
  5  timed out waiting (the operation may still complete: check with gpr status)
  6  network error (service unreachable)
  7  rate limited (wait the number of seconds shown, then retry)
  8  a teardown receipt did not verify (gpr receipt verify: the line says why)`;

/** A usage problem found before any request: exit 2. */
export class UsageError extends Error {
  readonly code = 'USAGE';
}

/** No token configured: exit 3 without calling the API. */
export class NoTokenError extends Error {
  readonly code = 'NO_TOKEN';
}

/**
 * Secrets this run sent (variable values, the startup script): whatever gpr prints is cleared of
 * them, so even a service that echoed one back could not put it on a screen or into a log.
 */
const secrets = new Set<string>();

/** Values this short are not worth hiding and would blank ordinary words and numbers. */
const MIN_SECRET_CHARS = 6;

export function keepSecret(value: string): void {
  if (value.length >= MIN_SECRET_CHARS) secrets.add(value);
}

/** `text` with every kept secret, raw or JSON-escaped, replaced by [redacted]. */
export function redactSecrets(text: string): string {
  let out = text;
  for (const secret of secrets) {
    for (const form of new Set([secret, JSON.stringify(secret).slice(1, -1)])) out = out.split(form).join('[redacted]');
  }
  return out;
}

/** How gpr names the rental settings in hints about them. */
const SETTING_NAMES = {
  image: '--image',
  env: '--env / --env-from',
  startupScript: '--script',
  ports: '--port',
  diskGb: '--disk',
  lease: '--ttl',
  waitForCapacity: '--wait-capacity',
  offers: 'see `gpr offers --json`',
  account: 'see `gpr whoami`',
};

const FAILURE_HOW = {
  rent: 'rent with `gpr rent`',
  offers: 'see `gpr offers`',
  waitForCapacity: '`gpr rent --gpu ... --wait-capacity 30m`',
};

interface Described {
  code: string;
  message: string;
  requestId: string | null;
  status: number | null;
  hint: string;
  exit: number;
  retryAfterSeconds?: number;
}

const HINTS: Record<string, string> = {
  UNAUTHENTICATED:
    'The token was refused (absent, wrong or revoked). If it worked before, it was revoked: ask the account owner for a new key or a setup code (`gpr setup <code>`); `gpr signup` makes a new, unfunded account of your own. Or set GPR_TOKEN.',
  FORBIDDEN:
    'This key lacks the scope for that call (top-ups need `billing`, which setup-code keys never have; SSH credentials and terminate need `manage`). Ask the account owner.',
  INSUFFICIENT_CREDITS: 'Add credits: `gpr topup <usd> --wait`, give the printed link to a human to pay, then retry.',
  ACCOUNT_FROZEN: 'The account is frozen or negative; the owner must settle it before new rentals.',
  KEY_LIMIT_EXCEEDED:
    "The request is over this key's per-rental cap or total budget: lower --budget / --max-price, or ask the owner for a key with higher limits.",
  BUDGET_REQUIRED: `This account needs a budget per rental: add --budget <usd>. ${budgetFloorNext('--budget')}`,
  BUDGET_TOO_SMALL: `${budgetFloorNext('--budget (in dollars)')} A prepaid account's budget must also buy one whole hour at the offer's price.`,
  NO_MATCHING_OFFER:
    'Nothing matches: list what there is with `gpr offers --gpu <name>` and raise --max-price or change --gpu / --count.',
  OFFER_NOT_FOUND:
    'Offer ids change with the inventory: run `gpr offers` again and use a current id, or rent by --gpu.',
  CONCURRENCY_LIMIT_REACHED:
    'This key runs as many rentals as it may: `gpr rentals`, then `gpr terminate <id>` one you no longer need.',
  IDEMPOTENCY_CONFLICT:
    'That idempotency key was used with a different request: a new request needs a new --idempotency-key (or none: gpr makes one); to retry the first, repeat it unchanged.',
  SIGNUP_ALREADY_COMPLETED:
    'That signup already happened, or a working token is already stored: `gpr whoami` shows it. To make a separate account on purpose, `gpr signup --force`.',
  AGENT_SETUP_INVALID: 'The setup code is wrong, expired (10 minutes) or used: ask the owner for a new one.',
  AGENTS_DISABLED: 'Agent signup and setup are switched off on this service.',
  NOT_FOUND: notFoundNext('list yours with `gpr rentals`'),
  VALIDATION_FAILED: 'The request was rejected as invalid: check the arguments with `gpr <command> --help`.',
  INVALID_REQUEST: 'The request was malformed: check the arguments with `gpr <command> --help`.',
  TOPUP_EXPIRED: 'The payment link expired: create a new one with `gpr topup <usd>`.',
  UNAVAILABLE: 'The service is temporarily unavailable: retry shortly. Quote the request id if it persists.',
  NETWORK_ERROR: 'Check GPR_BASE_URL / --base-url and your connection, then retry.',
  TIMEOUT:
    'The operation may still finish: check with `gpr status <id>`, or keep waiting with `gpr wait <id>` (longer with --timeout).',
  NO_TOKEN: 'Run `gpr signup` (new account) or `gpr setup <code>` (code from the owner), or set GPR_TOKEN.',
  USAGE: 'See `gpr <command> --help`.',
  RENTAL_ENDED: 'The rental ended before it became ACTIVE: see `gpr status <id>`.',
  GPU_MISMATCH: failureNext('GPU_MISMATCH', FAILURE_HOW)!,
  NO_CAPACITY: failureNext('NO_CAPACITY', FAILURE_HOW)!,
  UNSAFE_SERVICE_VALUE:
    'The service may be compromised or misconfigured; nothing was run or written. Do not connect by hand with these values; report it with the message to the operator.',
};

function exitFor(status: number | null, code: string): number {
  if (code === 'RATE_LIMITED' || status === 429) return EXIT.RATE_LIMITED;
  if (code === 'KEY_LIMIT_EXCEEDED' || status === 402) return EXIT.PAYMENT;
  if (status === 401 || status === 403) return EXIT.AUTH;
  return EXIT.API;
}

/** Turns anything thrown into code, message, request id, what to do next and an exit code. */
export function describe(err: unknown): Described {
  if (err instanceof GprApiError) {
    const hint =
      err.code === 'RATE_LIMITED' || err.status === 429
        ? `Rate limited: wait ${err.retryAfterSeconds ?? 60} s, then retry.`
        : err.code === 'DEPLOYMENT_NOT_ACTIVE'
          ? notActiveNext(err.retryAfterSeconds, {
              retry: 'run the command again',
              watch: 'wait with `gpr wait <id>`',
              rent: 'rent a new one with `gpr rent`',
            })
          : (rentalRefusalNext(err.code, err.message, SETTING_NAMES) ??
            HINTS[err.code] ??
            (err.status >= 500 ? HINTS.UNAVAILABLE : 'Quote the request id when asking for help.'));
    return {
      code: err.code,
      message: err.message,
      requestId: err.requestId,
      status: err.status,
      hint,
      exit: exitFor(err.status, err.code),
      retryAfterSeconds: err.retryAfterSeconds,
    };
  }
  if (err instanceof GprNetworkError)
    return {
      code: err.code,
      message: err.message,
      requestId: null,
      status: null,
      hint: HINTS.NETWORK_ERROR,
      exit: EXIT.NETWORK,
    };
  if (err instanceof GprTimeoutError)
    return {
      code: err.code,
      message: err.message,
      requestId: null,
      status: null,
      hint: HINTS.TIMEOUT,
      exit: EXIT.TIMEOUT,
    };
  if (err instanceof GprRentalStateError) {
    return {
      code: err.code,
      message: err.message,
      requestId: null,
      status: null,
      hint:
        HINTS[err.code] ??
        `See \`gpr status ${err.rental.rentalId}\`; a failed rental's debit is returned automatically.`,
      exit: EXIT.API,
    };
  }
  // The service's fault, not the caller's: exit 1 like any refusal the service's answer causes.
  if (err instanceof GprUnsafeValueError)
    return {
      code: err.code,
      message: err.message,
      requestId: null,
      status: null,
      hint: HINTS[err.code],
      exit: EXIT.API,
    };
  if (err instanceof NoTokenError)
    return {
      code: err.code,
      message: err.message,
      requestId: null,
      status: null,
      hint: HINTS.NO_TOKEN,
      exit: EXIT.AUTH,
    };
  if (err instanceof UsageError || err instanceof RangeError)
    return { code: 'USAGE', message: err.message, requestId: null, status: null, hint: HINTS.USAGE, exit: EXIT.USAGE };
  return {
    code: 'CLIENT_ERROR',
    message: (err as Error)?.message ?? String(err),
    requestId: null,
    status: null,
    hint: 'This is a bug in gpr or its environment; report it with the message.',
    exit: EXIT.API,
  };
}

/** Prints the error (JSON on stdout with --json, else words on stderr) and returns the exit code. */
export function reportError(err: unknown, json: boolean): number {
  const described = describe(err);
  const d = { ...described, message: redactSecrets(described.message) };
  if (json) {
    const { exit: _exit, ...error } = d;
    process.stdout.write(`${JSON.stringify({ error })}\n`);
  } else {
    const status = d.status ? ` (HTTP ${d.status})` : '';
    process.stderr.write(`Error ${d.code}${status}: ${d.message}\n`);
    process.stderr.write(`Request id: ${d.requestId ?? 'none (no response from the service)'}\n`);
    process.stderr.write(`Next: ${d.hint}\n`);
  }
  return d.exit;
}

/** Left-aligned columns with a header row. */
export function table(headers: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n') + '\n';
}

/** Key/value lines, aligned. */
export function fields(obj: [string, unknown][]): string {
  const w = Math.max(...obj.map(([k]) => k.length));
  return obj.map(([k, v]) => `${k.padEnd(w)}  ${v === null || v === undefined ? '-' : String(v)}`).join('\n') + '\n';
}

/**
 * Progress on stderr: a spinner on a terminal; otherwise one line per change of text, so logs
 * and agents still see the state move.
 */
export class Progress {
  private timer?: NodeJS.Timeout;
  private text = '';
  private frame = 0;
  private readonly tty = Boolean(process.stderr.isTTY);

  constructor(private readonly quiet: boolean) {}

  update(text: string): void {
    if (this.quiet || text === this.text) return;
    this.text = text;
    if (!this.tty) {
      process.stderr.write(`${text}\n`);
      return;
    }
    this.timer ??= setInterval(() => this.render(), 100);
    this.render();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.tty && !this.quiet && this.text) process.stderr.write('\r\x1b[2K');
  }

  private render(): void {
    const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    process.stderr.write(`\r\x1b[2K${frames[this.frame++ % frames.length]} ${this.text}`);
  }
}

/** Says on stderr when a price flag looks typed in cents; the request still goes as typed. */
export function warnIfCents(flag: string, value: string): void {
  const warning = centsLookingPrice(flag, value);
  if (warning) process.stderr.write(`Warning: ${warning}\n`);
}
