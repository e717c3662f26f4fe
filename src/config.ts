import { choice, ConfigError, opt, str, url, type Env } from './config-values.js';
import {
  readHttp,
  readMetrics,
  readReleases,
  type HttpConfig,
  type MetricsConfig,
  type ReleasesConfig,
} from './config/http.js';
import {
  readJobs,
  readRentals,
  readWebhooks,
  type JobsConfig,
  type RentalsConfig,
  type WebhooksConfig,
} from './config/jobs.js';
import {
  readAgents,
  readPush,
  readSignup,
  type AgentsConfig,
  type PushConfig,
  type SignupConfig,
} from './config/limits.js';
import { readBilling, readStripe, type BillingConfig, type StripeConfig } from './config/money.js';
import {
  readInventory,
  readMachines,
  readProviders,
  type InventoryConfig,
  type MachinesConfig,
  type ProviderConfig,
} from './config/providers.js';
import { readSecrets, type SecretsConfig } from './config/secrets.js';
import { readTelegram, type TelegramConfig } from './config/telegram.js';

export type Role = 'api' | 'worker' | 'bot';

export type { AgentsConfig, PushConfig, SignupConfig } from './config/limits.js';
export type { BillingConfig, BillingModel, StripeConfig } from './config/money.js';
export type { HttpConfig, MetricsConfig, ReleasesConfig, TrustProxy } from './config/http.js';
export {
  JOB_CLAIM_MODES,
  type JobClaimMode,
  type JobsConfig,
  type RentalsConfig,
  type WebhooksConfig,
} from './config/jobs.js';
export type { InventoryConfig, MachinesConfig, ProviderConfig } from './config/providers.js';
export type { SecretsConfig } from './config/secrets.js';
export type { TelegramConfig } from './config/telegram.js';
export { ConfigError, configErrorLine } from './config-values.js';

/**
 * The service's settings, parsed once from the environment by {@link loadConfig} and grouped by
 * the concern that reads them. docs/configuration.md names the variable behind each.
 */
export interface Config {
  nodeEnv: string;
  /** NODE_ENV=development was set explicitly (not merely defaulted): see {@link assertSafeToRun}. */
  developmentRun: boolean;
  logLevel: string;
  http: HttpConfig;
  db: {
    /** DATABASE_URL: MariaDB or MySQL. */
    url: string;
  };
  secrets: SecretsConfig;
  /** The provider plugins to load (PROVIDERS), in that order. */
  providers: ProviderConfig[];
  inventory: InventoryConfig;
  machines: MachinesConfig;
  agents: AgentsConfig;
  signup: SignupConfig;
  push: PushConfig;
  billing: BillingConfig;
  stripe: StripeConfig;
  jobs: JobsConfig;
  rentals: RentalsConfig;
  webhooks: WebhooksConfig;
  telegram: TelegramConfig;
  releases: ReleasesConfig;
  metrics: MetricsConfig;
}

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

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * Refuses to run roles with a combination that is safe only on a developer's own machine: the
 * built-in development SECRETS_KEY (public) with the `local` provider, whose instances are shells
 * on this host. Anyone holding such a shell who reached the database could open every renter's
 * SSH key with it. (Commands that only read the configuration, like packaging a release, are not
 * runs.)
 */
export function assertSafeToRun(config: Config): void {
  if (config.secrets.generated && config.providers.some((p) => p.id === 'local') && !config.developmentRun) {
    throw new ConfigError(
      'the local provider with the built-in development SECRETS_KEY runs only when NODE_ENV=development is set explicitly (`npm start` sets it); otherwise set SECRETS_KEY (32 bytes, base64: `openssl rand -base64 32`)',
    );
  }
}

/**
 * Parses and validates the environment once: the one reader of the environment, each group
 * parsed by its reader under src/config/. Throws ConfigError naming the offending variable.
 */
export function loadConfig(env: Env = process.env): Config {
  const nodeEnv = str(env, 'NODE_ENV', 'development');
  const http = readHttp(env, nodeEnv);
  return {
    nodeEnv,
    developmentRun: opt(env, 'NODE_ENV') === 'development',
    logLevel: choice(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    http,
    db: { url: url(env, 'DATABASE_URL', 'mysql://root@127.0.0.1:3306/gpu_rental', ['mysql:', 'mariadb:']) },
    secrets: readSecrets(env, nodeEnv),
    providers: readProviders(env),
    inventory: readInventory(env),
    machines: readMachines(env),
    agents: readAgents(env),
    signup: readSignup(env),
    push: readPush(env),
    billing: readBilling(env),
    stripe: readStripe(env),
    jobs: readJobs(env),
    rentals: readRentals(env),
    webhooks: readWebhooks(env, nodeEnv),
    telegram: readTelegram(env),
    releases: readReleases(env, http.publicBaseUrl),
    metrics: readMetrics(env, http.port),
  };
}
