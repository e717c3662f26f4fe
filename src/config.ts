import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { bool, ConfigError, int, opt, str, url, type Env } from './config-values.js';
import { parseKeyList } from './modules/credentials/secret-box.js';

export type BillingModel = 'LEGACY_PREPAID' | 'ACCOUNT_BALANCE';
export type Role = 'api' | 'worker' | 'bot';

/**
 * How a worker takes a due job: `skip-locked` locks it with `SELECT … FOR UPDATE SKIP LOCKED`,
 * `update` with a conditional UPDATE for servers where SKIP LOCKED is missing or node-local.
 */
export const JOB_CLAIM_MODES = ['skip-locked', 'update'] as const;
export type JobClaimMode = (typeof JOB_CLAIM_MODES)[number];

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
  /** Glob patterns (`*` = any run of characters) a rental's `machine.image` must match; empty: any image. */
  machineImageAllowlist: string[];
  /** Largest disk a rental may ask for, in GB. */
  machineMaxDiskGb: number;
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
  /** Event streams plus waiting reads one api process holds at once: per key, per client address (an IPv6 client's /64), in all (unset: from its open-file limit). */
  push: { perKey: number; perAddress: number; open: number | undefined };
  logLevel: string;
  defaultBillingModel: BillingModel;
  /** Key-encryption key for secrets at rest (AES-256-GCM); 32 bytes. */
  secretsKey: Buffer;
  secretsKeyId: string;
  secretsKeyGenerated: boolean;
  /** Keys of earlier rotations (SECRETS_KEY_PREVIOUS), by id: they open what they sealed and never seal. */
  secretsKeysPrevious: { id: string; key: Buffer }[];
  jobsProcessEveryMs: number;
  /** How workers claim due jobs (JOBS_CLAIM). */
  jobsClaim: JobClaimMode;
  /** Delay between provisioning polls of a rental (and the first retry of a destruction check). */
  rentalPollMs: number;
  /** Period of the metering sweep. */
  meteringEveryMs: number;
  /** How long a rental warned as idle may stay idle before it is ended (IDLE). */
  idleGraceSeconds: number;
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
  /** A debit that takes an account's credits below this (cents) writes `credits.low` (and the bot's low-credits message). */
  lowCreditsMinor: number;
  /** How often the bot role scans for owner notifications to send. */
  telegramNotifySeconds: number;
  /** Where `latest.json` of the client releases lives; served by this service when under PUBLIC_BASE_URL. */
  releasesUrl: string;
  /** Folder `npm run release` writes the artifacts to, served under `releasesUrl`. */
  releasesDir: string;
  /** Webhook endpoints may be loopback or private addresses, over http too (development). */
  webhookAllowPrivateDestinations: boolean;
  /** Wait before the first retry of a failed webhook delivery; later waits double. */
  webhookFirstRetryMs: number;
  /** Period of the webhook dispatcher. */
  webhookDispatchEveryMs: number;
  /** Port of the separate /metrics, /readyz and /healthz listener (METRICS_PORT); none when unset. */
  metricsPort?: number;
  /** Address the metrics listener binds (METRICS_HOST, loopback by default). */
  metricsHost: string;
  /** Bearer token that opens /metrics on the api port (METRICS_TOKEN); without it /metrics is not there. */
  metricsToken?: string;
}

export type TrustProxy = false | number | string[];

export { ConfigError, configErrorLine } from './config-values.js';

const ROLES: Role[] = ['api', 'worker', 'bot'];

/** The roles named by `--role a,b` or `--role=a,b` in `argv`; every role when none is given. */
export function parseRoles(argv: readonly string[]): Role[] {
  const i = argv.indexOf('--role');
  const eq = argv.find((a) => a.startsWith('--role='));
  const raw = eq ? eq.slice('--role='.length) : i >= 0 ? argv[i + 1] : undefined;
  if (raw === undefined) return ROLES;
  const roles = raw.split(',').map((r) => r.trim()) as Role[];
  for (const r of roles)
    if (!ROLES.includes(r))
      throw new ConfigError(`--role must be one of ${ROLES.join(', ')} (comma-separated), got "${raw}"`);
  return roles;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

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
    return {
      key: createHash('sha256').update('gpu-rental development secrets key').digest(),
      id: 'dev',
      generated: true,
    };
  }
  const key = Buffer.from(raw, 'base64');
  if (key.length !== 32) throw new ConfigError('SECRETS_KEY must be 32 bytes encoded as base64');
  return { key, id: str(env, 'SECRETS_KEY_ID', 'k1'), generated: false };
}

/** SECRETS_KEY_PREVIOUS: the keys of earlier rotations, which open what they sealed and never seal. */
function previousSecretsKeys(env: Env, currentId: string): { id: string; key: Buffer }[] {
  try {
    return parseKeyList(opt(env, 'SECRETS_KEY_PREVIOUS') ?? '', currentId);
  } catch (err) {
    throw new ConfigError(`SECRETS_KEY_PREVIOUS ${(err as Error).message}`);
  }
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
    if (hops > 10)
      throw new ConfigError(`TRUST_PROXY must be a hop count from 0 to 10, or the proxies' addresses, got "${raw}"`);
    return hops === 0 ? false : hops;
  }
  if (raw.toLowerCase() === 'true') {
    throw new ConfigError(
      'TRUST_PROXY=true would trust an X-Forwarded-For sent by any client; give the number of proxies in front of the service (e.g. 1) or their addresses (e.g. loopback or 10.0.0.0/8)',
    );
  }
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) {
    if (PROXY_RANGES.includes(item)) continue;
    const [address, bits, extra] = item.split('/');
    const family = isIP(address);
    const maxBits = family === 6 ? 128 : 32;
    const bitsOk = bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= maxBits);
    if (family === 0 || extra !== undefined || !bitsOk) {
      throw new ConfigError(
        `TRUST_PROXY lists "${item}", which is not an IP address, a CIDR range or one of ${PROXY_RANGES.join(', ')}`,
      );
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

/**
 * MACHINE_IMAGE_ALLOWLIST: comma-separated patterns of the characters an image reference may hold,
 * plus `*`. Anything else (a space, a quote) could never match a reference, so it is a typo.
 */
function imageAllowlist(env: Env): string[] {
  const patterns = (opt(env, 'MACHINE_IMAGE_ALLOWLIST') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const p of patterns) {
    if (!/^[A-Za-z0-9._/:@*-]+$/.test(p)) {
      throw new ConfigError(
        `MACHINE_IMAGE_ALLOWLIST lists "${p}", which is not an image pattern (letters, digits, . _ - / : @, and * for any run of characters)`,
      );
    }
  }
  return patterns;
}

/** Telegram accepts 1-256 characters of A-Za-z0-9_- as a webhook secret token. */
function webhookToken(env: Env): string | undefined {
  const v = opt(env, 'TELEGRAM_WEBHOOK_SECRET');
  if (v !== undefined && !/^[A-Za-z0-9_-]{1,256}$/.test(v)) {
    throw new ConfigError('TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and -');
  }
  return v;
}

/** METRICS_PORT, METRICS_HOST and METRICS_TOKEN: metrics stay off the public port unless a long enough token guards them. */
function metricsSettings(env: Env, port: number): Pick<Config, 'metricsPort' | 'metricsHost' | 'metricsToken'> {
  const metricsPort = opt(env, 'METRICS_PORT') === undefined ? undefined : int(env, 'METRICS_PORT', 0, 1, 65535);
  if (metricsPort !== undefined && metricsPort === port)
    throw new ConfigError(`METRICS_PORT must differ from PORT (${port})`);
  const metricsToken = opt(env, 'METRICS_TOKEN');
  if (metricsToken !== undefined && metricsToken.length < 24)
    throw new ConfigError('METRICS_TOKEN must be at least 24 characters (e.g. `openssl rand -base64 24`)');
  return { metricsPort, metricsHost: str(env, 'METRICS_HOST', '127.0.0.1'), metricsToken };
}

/** Parses and validates the environment once. Throws ConfigError naming the offending variable. */
export function loadConfig(env: Env = process.env): Config {
  const port = int(env, 'PORT', 8080, 0, 65535);
  const logLevel = str(env, 'LOG_LEVEL', 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel))
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  const billing = str(env, 'DEFAULT_BILLING_MODEL', 'ACCOUNT_BALANCE');
  if (billing !== 'ACCOUNT_BALANCE' && billing !== 'LEGACY_PREPAID') {
    throw new ConfigError(`DEFAULT_BILLING_MODEL must be ACCOUNT_BALANCE or LEGACY_PREPAID, got "${billing}"`);
  }
  const jobsClaim = str(env, 'JOBS_CLAIM', 'skip-locked').toLowerCase() as JobClaimMode;
  if (!JOB_CLAIM_MODES.includes(jobsClaim))
    throw new ConfigError(`JOBS_CLAIM must be ${JOB_CLAIM_MODES.join(' or ')}, got "${jobsClaim}"`);
  const secrets = secretsKey(env);
  const webhookSecret = opt(env, 'STRIPE_WEBHOOK_SECRET');
  if (opt(env, 'STRIPE_SECRET_KEY') && webhookSecret === undefined) {
    // The development webhook secret is public: with real Stripe money behind it, anyone could sign a payment.
    throw new ConfigError(
      'STRIPE_WEBHOOK_SECRET is required when STRIPE_SECRET_KEY is set (the signing secret of your Stripe webhook endpoint, whsec_...)',
    );
  }
  const inventoryRefreshSeconds = int(env, 'INVENTORY_REFRESH_SECONDS', 30, 1, 86400);
  const offerMaxAgeSeconds = int(env, 'OFFER_MAX_AGE_SECONDS', 600, 1, 7 * 86400);
  if (offerMaxAgeSeconds <= inventoryRefreshSeconds) {
    // Otherwise every offer would drop out between two healthy refreshes.
    throw new ConfigError(
      `OFFER_MAX_AGE_SECONDS (${offerMaxAgeSeconds}) must be greater than INVENTORY_REFRESH_SECONDS (${inventoryRefreshSeconds})`,
    );
  }
  const publicBaseUrl = url(env, 'PUBLIC_BASE_URL', `http://localhost:${port}`, ['http:', 'https:']).replace(
    /\/+$/,
    '',
  );
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
    machineImageAllowlist: imageAllowlist(env),
    machineMaxDiskGb: int(env, 'MACHINE_MAX_DISK_GB', 1000, 1, 100_000),
    agentV1Enabled: bool(env, 'AGENT_V1_ENABLED', true),
    signupRatePerMinute: int(env, 'SIGNUP_RATE_PER_MINUTE', 30, 1, 1_000_000),
    signupRatePerAddressPerMinute: int(env, 'SIGNUP_RATE_PER_ADDRESS_PER_MINUTE', 5, 1, 1_000_000),
    trustProxy: trustProxy(env),
    agentSetupRatePerMinute: int(env, 'AGENT_SETUP_RATE_PER_MINUTE', 60, 1, 1_000_000),
    push: {
      perKey: int(env, 'PUSH_MAX_PER_KEY', 20, 1, 100_000),
      perAddress: int(env, 'PUSH_MAX_PER_ADDRESS', 200, 1, 1_000_000),
      open: opt(env, 'PUSH_MAX_OPEN') ? int(env, 'PUSH_MAX_OPEN', 0, 1, 1_000_000) : undefined,
    },
    logLevel,
    defaultBillingModel: billing,
    secretsKey: secrets.key,
    secretsKeyId: secrets.id,
    secretsKeyGenerated: secrets.generated,
    secretsKeysPrevious: previousSecretsKeys(env, secrets.id),
    jobsProcessEveryMs: int(env, 'JOBS_PROCESS_EVERY_MS', 1000, 50, 600_000),
    jobsClaim,
    rentalPollMs: int(env, 'RENTAL_POLL_MS', 1000, 20, 600_000),
    meteringEveryMs: int(env, 'METERING_EVERY_MS', 15_000, 100, 3_600_000),
    idleGraceSeconds: int(env, 'IDLE_GRACE_SECONDS', 600, 1, 86_400),
    adminJobsUser: opt(env, 'ADMIN_JOBS_USER'),
    adminJobsPassword,
    stripeSecretKey: opt(env, 'STRIPE_SECRET_KEY'),
    // Fixed in development so every api process verifies what the local payment page signed.
    stripeWebhookSecret:
      webhookSecret ??
      `whsec_dev_${createHash('sha256').update('gpu-rental development webhook secret').digest('hex').slice(0, 32)}`,
    stripeWebhookSecretGenerated: webhookSecret === undefined,
    stripeApiUrl: opt(env, 'STRIPE_API_URL') && url(env, 'STRIPE_API_URL', '', ['http:', 'https:']),
    telegramBotToken: opt(env, 'TELEGRAM_BOT_TOKEN'),
    telegramApiRoot: opt(env, 'TELEGRAM_API_ROOT') && url(env, 'TELEGRAM_API_ROOT', '', ['http:', 'https:']),
    telegramBotUsername: opt(env, 'TELEGRAM_BOT_USERNAME'),
    telegramWebhookSecret: webhookToken(env),
    lowCreditsMinor: int(env, 'LOW_CREDITS_MINOR', 500, 0, 100_000_000),
    telegramNotifySeconds: int(env, 'TELEGRAM_NOTIFY_SECONDS', 10, 1, 3600),
    releasesUrl: url(env, 'RELEASES_URL', `${publicBaseUrl}/releases`, ['http:', 'https:']).replace(/\/+$/, ''),
    releasesDir: resolve(str(env, 'RELEASES_DIR', 'releases')),
    webhookAllowPrivateDestinations: bool(env, 'WEBHOOK_ALLOW_PRIVATE_DESTINATIONS', nodeEnv !== 'production'),
    webhookFirstRetryMs: int(env, 'WEBHOOK_FIRST_RETRY_MS', 30_000, 10, 30_000),
    webhookDispatchEveryMs: int(env, 'WEBHOOK_DISPATCH_MS', 1000, 50, 60_000),
    ...metricsSettings(env, port),
  };
}
