import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { resolve } from 'node:path';

export type BillingModel = 'LEGACY_PREPAID' | 'ACCOUNT_BALANCE';
export type Role = 'api' | 'worker' | 'bot';

export interface ProviderConfig {
  id: string;
  /** Raw string options taken from `<ID>_PROVIDER_<NAME>` variables, validated by the plugin. */
  options: Record<string, string>;
  /**
   * Percent added to this provider's costs for customer prices: `<ID>_PROVIDER_MARKUP_PERCENT`,
   * else `PRICE_MARKUP_PERCENT`. Taken out of `options`: the host prices, not the plugin.
   */
  markupPercent: number;
}

export interface Config {
  nodeEnv: string;
  /** NODE_ENV=development was set explicitly (not merely defaulted): see {@link assertSafeToRun}. */
  developmentRun: boolean;
  port: number;
  /** Address the HTTP server binds: 127.0.0.1 in development, 0.0.0.0 in production, unless HOST is set. */
  host: string;
  databaseUrl: string;
  publicBaseUrl: string;
  providers: ProviderConfig[];
  inventoryRefreshSeconds: number;
  /**
   * How long a provider's offers stay live after its last successful refresh: a provider that
   * keeps failing loses its offers from /offers, /gpus and admission after this.
   */
  offerMaxAgeSeconds: number;
  agentV1Enabled: boolean;
  /** Signups per minute across every process and address: the ceiling. */
  signupRatePerMinute: number;
  /** Signups per minute from one client address (an IPv6 client's /64), so one client cannot use up the ceiling. */
  signupRatePerAddressPerMinute: number;
  /**
   * Which proxies in front of the service may tell the client's address in X-Forwarded-For:
   * false (none: the socket's peer is the client), a number of proxy hops, or their addresses
   * and ranges (`loopback`, `10.0.0.0/8`, ...), as Express's `trust proxy` takes them.
   */
  trustProxy: TrustProxy;
  /** Per client address: agent authorizations begun plus setup-code exchanges per minute. */
  agentSetupRatePerMinute: number;
  logLevel: string;
  defaultBillingModel: BillingModel;
  /** Key-encryption key for secrets at rest (AES-256-GCM); 32 bytes. */
  secretsKey: Buffer;
  secretsKeyId: string;
  secretsKeyGenerated: boolean;
  jobsProcessEveryMs: number;
  /** Delay between provisioning polls of a rental (and the first retry of a destruction check). */
  rentalPollMs: number;
  /** Period of the metering sweep. */
  meteringEveryMs: number;
  adminJobsUser?: string;
  adminJobsPassword?: string;
  stripeSecretKey?: string;
  stripeWebhookSecret: string;
  stripeWebhookSecretGenerated: boolean;
  stripeApiUrl?: string;
  telegramBotToken?: string;
  telegramApiRoot?: string;
  telegramBotUsername?: string;
  telegramWebhookSecret?: string;
  /** A debit that takes a Telegram owner's credits below this (cents) sends a low-credits message. */
  telegramLowCreditsMinor: number;
  /** How often the bot role scans for owner notifications to send. */
  telegramNotifySeconds: number;
  /** Where `latest.json` of the client releases lives; served by this service when under PUBLIC_BASE_URL. */
  releasesUrl: string;
  /** Folder `npm run release` writes the artifacts to, served under `releasesUrl`. */
  releasesDir: string;
}

export type TrustProxy = false | number | string[];

export class ConfigError extends Error {}

/** The one line a process prints when it cannot start for a configuration or argument error. */
export function configErrorLine(err: ConfigError): string {
  return `Configuration error: ${err.message}`;
}

const ROLES: Role[] = ['api', 'worker', 'bot'];

/** The roles named by `--role a,b` or `--role=a,b` in `argv`; every role when none is given. */
export function parseRoles(argv: readonly string[]): Role[] {
  const i = argv.indexOf('--role');
  const eq = argv.find((a) => a.startsWith('--role='));
  const raw = eq ? eq.slice('--role='.length) : i >= 0 ? argv[i + 1] : undefined;
  if (raw === undefined) return ROLES;
  const roles = raw.split(',').map((r) => r.trim()) as Role[];
  for (const r of roles) if (!ROLES.includes(r)) throw new ConfigError(`--role must be one of ${ROLES.join(', ')} (comma-separated), got "${raw}"`);
  return roles;
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function str(env: Env, name: string, fallback: string): string {
  const v = env[name];
  return v === undefined || v.trim() === '' ? fallback : v.trim();
}

function opt(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const v = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function url(env: Env, name: string, fallback: string, protocols: string[]): string {
  const v = str(env, name, fallback);
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${v}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
  }
  return v;
}

function providers(env: Env): ProviderConfig[] {
  const ids = str(env, 'PROVIDERS', 'local')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (ids.length === 0) throw new ConfigError('PROVIDERS must name at least one provider plugin');
  for (const id of ids) {
    if (!/^[a-z][a-z0-9-]{0,31}$/.test(id)) throw new ConfigError(`PROVIDERS contains an invalid plugin id "${id}"`);
  }
  if (new Set(ids).size !== ids.length) throw new ConfigError('PROVIDERS lists a plugin twice');
  const globalMarkup = markup(env, 'PRICE_MARKUP_PERCENT', 0);
  return ids.map((id) => {
    const prefix = `${id.toUpperCase().replace(/-/g, '_')}_PROVIDER_`;
    const options: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) {
      if (k.startsWith(prefix) && v !== undefined && v !== '') options[k.slice(prefix.length)] = v;
    }
    const markupPercent = markup(env, `${prefix}MARKUP_PERCENT`, globalMarkup);
    delete options.MARKUP_PERCENT;
    return { id, options, markupPercent };
  });
}

/** A markup percentage: 0 to 1000 with at most two decimals, so prices stay exact in cents. */
function markup(env: Env, name: string, fallback: number): number {
  const raw = opt(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d{1,4}(\.\d{1,2})?$/.test(raw.trim()) || Number(raw) > 1000) {
    throw new ConfigError(`${name} must be a percentage from 0 to 1000 with at most two decimals, got "${raw}"`);
  }
  return Number(raw);
}

function secretsKey(env: Env): { key: Buffer; id: string; generated: boolean } {
  const raw = opt(env, 'SECRETS_KEY');
  if (!raw) {
    if (str(env, 'NODE_ENV', 'development') === 'production') {
      throw new ConfigError('SECRETS_KEY is required in production (32 bytes, base64)');
    }
    // A fixed, public development key: every process of a dev setup (api and worker apart) can
    // open what another sealed, across restarts. It protects nothing, hence production refuses it.
    return { key: createHash('sha256').update('gpu-rental development secrets key').digest(), id: 'dev', generated: true };
  }
  const key = Buffer.from(raw, 'base64');
  if (key.length !== 32) throw new ConfigError('SECRETS_KEY must be 32 bytes encoded as base64');
  return { key, id: str(env, 'SECRETS_KEY_ID', 'k1'), generated: false };
}

const PROXY_RANGES = ['loopback', 'linklocal', 'uniquelocal'];

/**
 * TRUST_PROXY: unset or `false` trusts no forwarded header. Trusting every hop (`true`) would let
 * any client pick its own address for the per-address limits, so it is refused in favour of a hop
 * count or the proxies' own addresses.
 */
function trustProxy(env: Env): TrustProxy {
  const raw = opt(env, 'TRUST_PROXY');
  if (raw === undefined || raw.toLowerCase() === 'false') return false;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > 10) throw new ConfigError(`TRUST_PROXY must be a hop count from 0 to 10, or the proxies' addresses, got "${raw}"`);
    return hops === 0 ? false : hops;
  }
  if (raw.toLowerCase() === 'true') {
    throw new ConfigError(
      'TRUST_PROXY=true would trust an X-Forwarded-For sent by any client; give the number of proxies in front of the service (e.g. 1) or their addresses (e.g. loopback or 10.0.0.0/8)',
    );
  }
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const item of items) {
    if (PROXY_RANGES.includes(item)) continue;
    const [address, bits, extra] = item.split('/');
    const family = isIP(address);
    const maxBits = family === 6 ? 128 : 32;
    const bitsOk = bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= maxBits);
    if (family === 0 || extra !== undefined || !bitsOk) {
      throw new ConfigError(`TRUST_PROXY lists "${item}", which is not an IP address, a CIDR range or one of ${PROXY_RANGES.join(', ')}`);
    }
  }
  return items;
}

/**
 * Refuses to run roles with a combination that is safe only on a developer's own machine: the
 * built-in development SECRETS_KEY (public) with the `local` provider, whose instances are shells
 * on this host. Anyone holding such a shell who reached the database could open every renter's
 * SSH key with it. (Commands that only read the configuration, like packaging a release, are not
 * runs.)
 */
export function assertSafeToRun(config: Config): void {
  if (config.secretsKeyGenerated && config.providers.some((p) => p.id === 'local') && !config.developmentRun) {
    throw new ConfigError(
      'the local provider with the built-in development SECRETS_KEY runs only when NODE_ENV=development is set explicitly (`npm start` sets it); otherwise set SECRETS_KEY (32 bytes, base64: `openssl rand -base64 32`)',
    );
  }
}

/** Telegram accepts 1-256 characters of A-Za-z0-9_- as a webhook secret token. */
function webhookToken(env: Env): string | undefined {
  const v = opt(env, 'TELEGRAM_WEBHOOK_SECRET');
  if (v !== undefined && !/^[A-Za-z0-9_-]{1,256}$/.test(v)) {
    throw new ConfigError('TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and -');
  }
  return v;
}

/** Parses and validates the environment once. Throws ConfigError naming the offending variable. */
export function loadConfig(env: Env = process.env): Config {
  const port = int(env, 'PORT', 8080, 0, 65535);
  const logLevel = str(env, 'LOG_LEVEL', 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  const billing = str(env, 'DEFAULT_BILLING_MODEL', 'ACCOUNT_BALANCE');
  if (billing !== 'ACCOUNT_BALANCE' && billing !== 'LEGACY_PREPAID') {
    throw new ConfigError(`DEFAULT_BILLING_MODEL must be ACCOUNT_BALANCE or LEGACY_PREPAID, got "${billing}"`);
  }
  const secrets = secretsKey(env);
  const webhookSecret = opt(env, 'STRIPE_WEBHOOK_SECRET');
  if (opt(env, 'STRIPE_SECRET_KEY') && webhookSecret === undefined) {
    // The development webhook secret is public: with real Stripe money behind it, anyone could sign a payment.
    throw new ConfigError('STRIPE_WEBHOOK_SECRET is required when STRIPE_SECRET_KEY is set (the signing secret of your Stripe webhook endpoint, whsec_...)');
  }
  const inventoryRefreshSeconds = int(env, 'INVENTORY_REFRESH_SECONDS', 30, 1, 86400);
  const offerMaxAgeSeconds = int(env, 'OFFER_MAX_AGE_SECONDS', 600, 1, 7 * 86400);
  if (offerMaxAgeSeconds <= inventoryRefreshSeconds) {
    // Otherwise every offer would drop out between two healthy refreshes.
    throw new ConfigError(`OFFER_MAX_AGE_SECONDS (${offerMaxAgeSeconds}) must be greater than INVENTORY_REFRESH_SECONDS (${inventoryRefreshSeconds})`);
  }
  const publicBaseUrl = url(env, 'PUBLIC_BASE_URL', `http://localhost:${port}`, ['http:', 'https:']).replace(/\/+$/, '');
  const nodeEnv = str(env, 'NODE_ENV', 'development');
  const providerConfigs = providers(env);
  const adminJobsPassword = opt(env, 'ADMIN_JOBS_PASSWORD');
  if (adminJobsPassword !== undefined && adminJobsPassword.length < 12) {
    // Guesses are rate-limited, but a short password falls to a patient guesser all the same.
    throw new ConfigError('ADMIN_JOBS_PASSWORD must be at least 12 characters (e.g. `openssl rand -base64 18`)');
  }
  return {
    nodeEnv,
    developmentRun: opt(env, 'NODE_ENV') === 'development',
    port,
    // The development payment page is free and the local provider hands out shells on this host:
    // a first start on a cloud machine must not offer them to the internet.
    host: str(env, 'HOST', nodeEnv === 'production' ? '0.0.0.0' : '127.0.0.1'),
    databaseUrl: url(env, 'DATABASE_URL', 'mysql://root@127.0.0.1:3306/gpu_rental', ['mysql:', 'mariadb:']),
    publicBaseUrl,
    providers: providerConfigs,
    inventoryRefreshSeconds,
    offerMaxAgeSeconds,
    agentV1Enabled: bool(env, 'AGENT_V1_ENABLED', true),
    signupRatePerMinute: int(env, 'SIGNUP_RATE_PER_MINUTE', 30, 1, 1_000_000),
    signupRatePerAddressPerMinute: int(env, 'SIGNUP_RATE_PER_ADDRESS_PER_MINUTE', 5, 1, 1_000_000),
    trustProxy: trustProxy(env),
    agentSetupRatePerMinute: int(env, 'AGENT_SETUP_RATE_PER_MINUTE', 60, 1, 1_000_000),
    logLevel,
    defaultBillingModel: billing,
    secretsKey: secrets.key,
    secretsKeyId: secrets.id,
    secretsKeyGenerated: secrets.generated,
    jobsProcessEveryMs: int(env, 'JOBS_PROCESS_EVERY_MS', 1000, 50, 600_000),
    rentalPollMs: int(env, 'RENTAL_POLL_MS', 1000, 20, 600_000),
    meteringEveryMs: int(env, 'METERING_EVERY_MS', 15_000, 100, 3_600_000),
    adminJobsUser: opt(env, 'ADMIN_JOBS_USER'),
    adminJobsPassword,
    stripeSecretKey: opt(env, 'STRIPE_SECRET_KEY'),
    // Fixed in development so every api process verifies what the local payment page signed.
    stripeWebhookSecret: webhookSecret ?? `whsec_dev_${createHash('sha256').update('gpu-rental development webhook secret').digest('hex').slice(0, 32)}`,
    stripeWebhookSecretGenerated: webhookSecret === undefined,
    stripeApiUrl: opt(env, 'STRIPE_API_URL') && url(env, 'STRIPE_API_URL', '', ['http:', 'https:']),
    telegramBotToken: opt(env, 'TELEGRAM_BOT_TOKEN'),
    telegramApiRoot: opt(env, 'TELEGRAM_API_ROOT') && url(env, 'TELEGRAM_API_ROOT', '', ['http:', 'https:']),
    telegramBotUsername: opt(env, 'TELEGRAM_BOT_USERNAME'),
    telegramWebhookSecret: webhookToken(env),
    telegramLowCreditsMinor: int(env, 'TELEGRAM_LOW_CREDITS_MINOR', 500, 0, 100_000_000),
    telegramNotifySeconds: int(env, 'TELEGRAM_NOTIFY_SECONDS', 10, 1, 3600),
    releasesUrl: url(env, 'RELEASES_URL', `${publicBaseUrl}/releases`, ['http:', 'https:']).replace(/\/+$/, ''),
    releasesDir: resolve(str(env, 'RELEASES_DIR', 'releases')),
  };
}

/** A heading of docs/configuration.md; variables are listed under the heading they name. */
export type ConfigSection =
  | 'Service'
  | 'Providers and inventory'
  | 'Agents and rate limits'
  | 'Billing and payments'
  | 'Secrets'
  | 'Jobs and metering'
  | 'Jobs dashboard'
  | 'Telegram bot'
  | 'Client releases';

/** One environment variable {@link loadConfig} reads, as docs/configuration.md presents it. */
export interface ConfigVariable {
  name: string;
  section: ConfigSection;
  /**
   * The value an unset variable stands for, written as an operator would set it (setting the
   * variable to it changes nothing; a test holds loadConfig to that); null when the default
   * depends on other settings or there is none.
   */
  default: string | null;
  /** The default in words, shown when `default` is null. */
  defaultText?: string;
  /** What the variable does, in Markdown. */
  meaning: string;
}

/**
 * Every variable loadConfig reads, beside the code that parses it. `npm run docs` renders this
 * table into docs/configuration.md; a test fails when a variable read above is missing here, when
 * a literal default here differs from the parsed one, or when the page is stale.
 */
export const CONFIG_VARIABLES: readonly ConfigVariable[] = [
  { name: 'PORT', section: 'Service', default: '8080', meaning: 'HTTP port of the `api` role.' },
  {
    name: 'HOST',
    section: 'Service',
    default: null,
    defaultText: '`127.0.0.1`; `0.0.0.0` with `NODE_ENV=production`',
    meaning:
      'Address the `api` role listens on. A development service answers only this machine, because its payment page credits anyone who clicks Pay and the local provider hands out shells on this host; set `HOST=0.0.0.0` to reach it from elsewhere (read [security](security.md) first).',
  },
  {
    name: 'NODE_ENV',
    section: 'Service',
    default: null,
    defaultText: '`development` (not set)',
    meaning:
      '`production` makes `SECRETS_KEY` mandatory, binds `0.0.0.0` and turns on HSTS. The `local` provider runs on the built-in development `SECRETS_KEY` only when `NODE_ENV=development` is set explicitly (`npm start` and `npm run dev` set it).',
  },
  {
    name: 'DATABASE_URL',
    section: 'Service',
    default: 'mysql://root@127.0.0.1:3306/gpu_rental',
    meaning: 'MariaDB or MySQL 8 (`mysql:` or `mariadb:`). The database is created if it is missing and migrated at start.',
  },
  {
    name: 'PUBLIC_BASE_URL',
    section: 'Service',
    default: null,
    defaultText: '`http://localhost:$PORT`',
    meaning: 'Base of every URL the service hands out: offer links, payment and approval pages, the OpenAPI `servers` entry, the Telegram webhook.',
  },
  {
    name: 'TRUST_PROXY',
    section: 'Service',
    default: null,
    defaultText: 'unset: no forwarded header is trusted',
    meaning:
      'Which proxies in front of the service may state the client\'s address in `X-Forwarded-For`: a hop count (`1`, at most 10) or their addresses and ranges (`loopback`, `10.0.0.0/8`, comma-separated). Per-address limits key on the address this makes trustworthy: behind a proxy, set it, or every client shares the proxy\'s budget. `true` is refused.',
  },
  {
    name: 'LOG_LEVEL',
    section: 'Service',
    default: 'info',
    meaning: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`. Logs are JSON lines (pino) on standard output.',
  },
  {
    name: 'PROVIDERS',
    section: 'Providers and inventory',
    default: 'local',
    meaning: 'Comma-separated ids of the provider plugins to load (folders under `plugins/`: `local`, `vast`, `runpod`, `lambda`).',
  },
  {
    name: '<ID>_PROVIDER_<NAME>',
    section: 'Providers and inventory',
    default: null,
    defaultText: 'per plugin',
    meaning:
      'Options of the provider plugin `<ID>` (upper-cased, `-` as `_`), handed to it without the prefix; the plugin validates them and names the variable on error. See [Provider plugin options](#provider-plugin-options).',
  },
  {
    name: 'INVENTORY_REFRESH_SECONDS',
    section: 'Providers and inventory',
    default: '30',
    meaning: 'How often a worker refreshes the offer cache from the providers.',
  },
  {
    name: 'OFFER_MAX_AGE_SECONDS',
    section: 'Providers and inventory',
    default: '600',
    meaning:
      "How long a provider's offers stay listed and rentable after its last successful refresh; a provider that keeps failing loses them after this. Must be greater than `INVENTORY_REFRESH_SECONDS`.",
  },
  {
    name: 'PRICE_MARKUP_PERCENT',
    section: 'Providers and inventory',
    default: '0',
    meaning: "Percent added to every provider's hourly cost to make customer prices: 0 to 1000, at most two decimals.",
  },
  {
    name: '<ID>_PROVIDER_MARKUP_PERCENT',
    section: 'Providers and inventory',
    default: null,
    defaultText: '`PRICE_MARKUP_PERCENT`',
    meaning: 'The markup of one provider (`VAST_PROVIDER_MARKUP_PERCENT=15`); the host prices, so it is not passed to the plugin.',
  },
  {
    name: 'AGENT_V1_ENABLED',
    section: 'Agents and rate limits',
    default: 'true',
    meaning:
      "`false` switches off agent creation from outside: signup, authorization sessions and setup-code exchange answer 503 `AGENTS_DISABLED`, and the bot mints no setup codes. Owners still approve, issue and revoke their agents' keys.",
  },
  {
    name: 'SIGNUP_RATE_PER_MINUTE',
    section: 'Agents and rate limits',
    default: '30',
    meaning: 'Signups per minute across every address and every `api` process (counted in MySQL): the ceiling.',
  },
  {
    name: 'SIGNUP_RATE_PER_ADDRESS_PER_MINUTE',
    section: 'Agents and rate limits',
    default: '5',
    meaning: "Signups per client address (an IPv6 client's /64) and minute, counted before the body is read, so one client cannot use up the ceiling.",
  },
  {
    name: 'AGENT_SETUP_RATE_PER_MINUTE',
    section: 'Agents and rate limits',
    default: '60',
    meaning:
      'Per client address and minute: agent authorizations begun plus setup-code exchanges. An agent polling the exchange at its `Retry-After` pace, ceil(60 / (rate − 1)) seconds, never meets it.',
  },
  {
    name: 'DEFAULT_BILLING_MODEL',
    section: 'Billing and payments',
    default: 'ACCOUNT_BALANCE',
    meaning: 'Billing model of new accounts, `ACCOUNT_BALANCE` or `LEGACY_PREPAID`; stored with each account, so changing it affects new accounts only.',
  },
  {
    name: 'STRIPE_SECRET_KEY',
    section: 'Billing and payments',
    default: null,
    defaultText: 'unset: the built-in development payment page',
    meaning: 'Stripe API key; top-up and card-checkout links become Stripe Checkout Sessions.',
  },
  {
    name: 'STRIPE_WEBHOOK_SECRET',
    section: 'Billing and payments',
    default: null,
    defaultText: 'a fixed, public development secret',
    meaning: 'Signing secret of the Stripe webhook endpoint (`whsec_…`); required with `STRIPE_SECRET_KEY`.',
  },
  {
    name: 'STRIPE_API_URL',
    section: 'Billing and payments',
    default: null,
    defaultText: "Stripe's",
    meaning: 'Base URL of the Stripe API (the tests point it at a local fake).',
  },
  {
    name: 'SECRETS_KEY',
    section: 'Secrets',
    default: null,
    defaultText: 'a fixed development key; refused in production',
    meaning:
      "32 bytes, base64 (`openssl rand -base64 32`): the key that encrypts deployments' SSH private keys at rest (AES-256-GCM) and signs the approval page's form tokens.",
  },
  {
    name: 'SECRETS_KEY_ID',
    section: 'Secrets',
    default: 'k1',
    meaning: 'Id stored next to each sealed secret, for key rotation (`dev` with the development key).',
  },
  {
    name: 'JOBS_PROCESS_EVERY_MS',
    section: 'Jobs and metering',
    default: '1000',
    meaning: 'How often a worker looks for due jobs; jobs enqueued in the same process start at once.',
  },
  {
    name: 'RENTAL_POLL_MS',
    section: 'Jobs and metering',
    default: '1000',
    meaning: 'Delay between provisioning polls of a rental, and the first delay of destruction re-checks.',
  },
  { name: 'METERING_EVERY_MS', section: 'Jobs and metering', default: '15000', meaning: 'Period of the metering sweep that charges running metered rentals.' },
  {
    name: 'ADMIN_JOBS_USER',
    section: 'Jobs dashboard',
    default: null,
    defaultText: 'unset',
    meaning: 'Basic-auth user of the jobs dashboard at `/admin/jobs`; the dashboard is off unless this and `ADMIN_JOBS_PASSWORD` are set.',
  },
  {
    name: 'ADMIN_JOBS_PASSWORD',
    section: 'Jobs dashboard',
    default: null,
    defaultText: 'unset',
    meaning:
      'Basic-auth password of the jobs dashboard, 12 characters or more. Ten wrong guesses a minute from one address (sixty from all) refuse basic auth with 429 until the minute ends.',
  },
  { name: 'TELEGRAM_BOT_TOKEN', section: 'Telegram bot', default: null, defaultText: 'unset: no bot', meaning: 'Turns the Telegram owner bot on.' },
  { name: 'TELEGRAM_API_ROOT', section: 'Telegram bot', default: null, defaultText: "Telegram's", meaning: 'Base URL of the Bot API server (the tests point it at a fake).' },
  {
    name: 'TELEGRAM_BOT_USERNAME',
    section: 'Telegram bot',
    default: null,
    defaultText: 'unset',
    meaning: 'The bot\'s username, for the "Approve in Telegram" deep links of approval pages.',
  },
  {
    name: 'TELEGRAM_WEBHOOK_SECRET',
    section: 'Telegram bot',
    default: null,
    defaultText: 'unset: long polling',
    meaning:
      'Webhook mode instead of long polling: the `bot` role registers `PUBLIC_BASE_URL/telegram/webhook` and every `api` process takes updates carrying this secret token (1 to 256 of `A-Za-z0-9_-`).',
  },
  {
    name: 'TELEGRAM_LOW_CREDITS_MINOR',
    section: 'Telegram bot',
    default: '500',
    meaning: 'A debit that takes a Telegram owner\'s credits below this many cents sends a "credits running low" message.',
  },
  { name: 'TELEGRAM_NOTIFY_SECONDS', section: 'Telegram bot', default: '10', meaning: 'How often the `bot` role looks for owner notifications to send.' },
  {
    name: 'RELEASES_URL',
    section: 'Client releases',
    default: null,
    defaultText: '`$PUBLIC_BASE_URL/releases`',
    meaning: "Where the client releases' `latest.json` lives; when it is under `PUBLIC_BASE_URL` this service serves it and the files.",
  },
  { name: 'RELEASES_DIR', section: 'Client releases', default: 'releases', meaning: 'Folder `npm run release` writes to and the service serves from.' },
];
