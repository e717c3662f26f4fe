/** The environment variables src/config.ts reads, apart from the parsing; the documentation is generated from them. */

/** A heading of docs/configuration.md; variables are listed under the heading they name. */
export type ConfigSection =
  | 'Service'
  | 'Providers and inventory'
  | 'Machines'
  | 'Agents and rate limits'
  | 'Billing and payments'
  | 'Secrets'
  | 'Jobs and metering'
  | 'Jobs dashboard'
  | 'Telegram bot'
  | 'Client releases'
  | 'Webhooks'
  | 'Metrics';

/** One environment variable loadConfig reads, as docs/configuration.md presents it. */
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
 * Every variable loadConfig (src/config.ts, with its group readers under src/config/) reads.
 * `npm run docs` renders this table into docs/configuration.md; a test fails when a variable
 * they read is missing here or one declared here is not read there, when a literal default here
 * differs from the parsed one, or when the page is stale.
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
    meaning:
      'MariaDB or MySQL 8 (`mysql:` or `mariadb:`). The database is created if it is missing and migrated at start.',
  },
  {
    name: 'PUBLIC_BASE_URL',
    section: 'Service',
    default: null,
    defaultText: '`http://localhost:$PORT`',
    meaning:
      'Base of every URL the service hands out: offer links, payment and approval pages, the OpenAPI `servers` entry, the Telegram webhook.',
  },
  {
    name: 'TRUST_PROXY',
    section: 'Service',
    default: null,
    defaultText: 'unset: no forwarded header is trusted',
    meaning:
      "Which proxies in front of the service may state the client's address in `X-Forwarded-For`: a hop count (`1`, at most 10) or their addresses and ranges (`loopback`, `10.0.0.0/8`, comma-separated). Per-address limits key on the address this makes trustworthy: behind a proxy, set it, or every client shares the proxy's budget. `true` is refused.",
  },
  {
    name: 'LOG_LEVEL',
    section: 'Service',
    default: 'info',
    meaning:
      '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`. Logs are JSON lines (pino) on standard output.',
  },
  {
    name: 'PROVIDERS',
    section: 'Providers and inventory',
    default: 'local',
    meaning:
      'Comma-separated ids of the provider plugins to load (folders under `plugins/`: `local`, `vast`, `runpod`, `lambda`).',
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
    meaning:
      'The markup of one provider (`VAST_PROVIDER_MARKUP_PERCENT=15`); the host prices, so it is not passed to the plugin.',
  },
  {
    name: 'MACHINE_IMAGE_ALLOWLIST',
    section: 'Machines',
    default: null,
    defaultText: 'empty: any image, on the offers that take one',
    meaning:
      'The container images a rental may ask for in `machine.image`: comma-separated patterns where `*` stands for any run of characters (`pytorch/pytorch:*,nvcr.io/nvidia/*`). A pattern is matched against the whole reference as the rental writes it; a rental naming another image is refused with 422.',
  },
  {
    name: 'MACHINE_MAX_DISK_GB',
    section: 'Machines',
    default: '1000',
    meaning:
      "Largest `machine.diskGb` a rental may ask for, 1 to 100000, whatever an offer's own `capabilities.maxDiskGb`.",
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
    meaning:
      "Signups per client address (an IPv6 client's /64) and minute, counted before the body is read, so one client cannot use up the ceiling.",
  },
  {
    name: 'AGENT_SETUP_RATE_PER_MINUTE',
    section: 'Agents and rate limits',
    default: '60',
    meaning:
      'Per client address and minute: agent authorizations begun plus setup-code exchanges. An agent polling the exchange at its `Retry-After` pace, ceil(60 / (rate − 1)) seconds, never meets it.',
  },
  {
    name: 'OAUTH_RATE_PER_MINUTE',
    section: 'Agents and rate limits',
    default: '30',
    meaning: "Per client address and minute: remote MCP's OAuth client registrations plus authorization requests.",
  },
  {
    name: 'PUSH_MAX_PER_KEY',
    section: 'Agents and rate limits',
    default: '20',
    meaning:
      'Event streams plus waiting reads (`waitFor`) one key may hold open at once in one `api` process; one more is refused with 429 `RATE_LIMITED` and `Retry-After` until one ends.',
  },
  {
    name: 'PUSH_MAX_PER_ADDRESS',
    section: 'Agents and rate limits',
    default: '200',
    meaning:
      "The same bound per client address (an IPv6 client's /64), whatever the keys, counted before the key is read. Behind a proxy it needs `TRUST_PROXY`, or every client shares the proxy's.",
  },
  {
    name: 'PUSH_MAX_OPEN',
    section: 'Agents and rate limits',
    default: null,
    defaultText:
      "half the process's open-file limit (its soft `RLIMIT_NOFILE`), at most 4096; 512 where the limit cannot be read",
    meaning:
      'Event streams plus waiting reads one `api` process holds open at once, all callers together: past it they are refused with 429 `RATE_LIMITED`, so the files left keep `/healthz`, ordinary requests and the database pool answering. A value that would leave fewer than 256 files of the limit free is lowered to leave them (the process logs it).',
  },
  {
    name: 'DEFAULT_BILLING_MODEL',
    section: 'Billing and payments',
    default: 'ACCOUNT_BALANCE',
    meaning:
      'Billing model of new accounts, `ACCOUNT_BALANCE` or `LEGACY_PREPAID`; stored with each account, so changing it affects new accounts only.',
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
    name: 'SECRETS_KEY_PREVIOUS',
    section: 'Secrets',
    default: null,
    defaultText: 'unset: no earlier key',
    meaning:
      'Earlier keys during a rotation, as comma-separated `id:base64` entries (`k1:AbC...=`): secrets sealed under them still open, new ones are sealed with `SECRETS_KEY`. `owner reseal-secrets` seals every stored secret again under `SECRETS_KEY`; then drop the old key from here. See [operations](operations.md#rotating-secrets_key).',
  },
  {
    name: 'JOBS_PROCESS_EVERY_MS',
    section: 'Jobs and metering',
    default: '1000',
    meaning: 'How often a worker looks for due jobs; jobs enqueued in the same process start at once.',
  },
  {
    name: 'JOBS_CLAIM',
    section: 'Jobs and metering',
    default: 'skip-locked',
    meaning:
      'How a worker claims a due job. `skip-locked` (MariaDB 10.6+, MySQL 8) locks it with `SELECT … FOR UPDATE SKIP LOCKED`. `update` reads candidates without locks and takes one with an UPDATE that holds only while the job is still free, so it needs no SKIP LOCKED: choose it on TiDB (which ignores SKIP LOCKED), Vitess and PlanetScale (which refuse it), and Galera clusters whose workers write through several nodes (SKIP LOCKED only sees the locks of its own node). Both claim the same jobs in the same order; `update` costs a round trip more per claim and more lost attempts when many workers race.',
  },
  {
    name: 'RENTAL_POLL_MS',
    section: 'Jobs and metering',
    default: '1000',
    meaning: 'Delay between provisioning polls of a rental, and the first delay of destruction re-checks.',
  },
  {
    name: 'METERING_EVERY_MS',
    section: 'Jobs and metering',
    default: '15000',
    meaning: 'Period of the metering sweep that charges running metered rentals.',
  },
  {
    name: 'IDLE_GRACE_SECONDS',
    section: 'Jobs and metering',
    default: '600',
    meaning:
      "How long a rental warned as idle (`rental.idle_warning`: its key's `idleTerminateMinutes` passed with every GPU under 5 %) may stay idle before it is ended with reason `IDLE`.",
  },
  {
    name: 'ADMIN_JOBS_USER',
    section: 'Jobs dashboard',
    default: null,
    defaultText: 'unset',
    meaning:
      'Basic-auth user of the jobs dashboard at `/admin/jobs`; the dashboard is off unless this and `ADMIN_JOBS_PASSWORD` are set.',
  },
  {
    name: 'ADMIN_JOBS_PASSWORD',
    section: 'Jobs dashboard',
    default: null,
    defaultText: 'unset',
    meaning:
      'Basic-auth password of the jobs dashboard, 12 characters or more. Ten wrong guesses a minute from one address (sixty from all) refuse basic auth with 429 until the minute ends.',
  },
  {
    name: 'TELEGRAM_BOT_TOKEN',
    section: 'Telegram bot',
    default: null,
    defaultText: 'unset: no bot',
    meaning: 'Turns the Telegram owner bot on.',
  },
  {
    name: 'TELEGRAM_API_ROOT',
    section: 'Telegram bot',
    default: null,
    defaultText: "Telegram's",
    meaning: 'Base URL of the Bot API server (the tests point it at a fake).',
  },
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
    name: 'LOW_CREDITS_MINOR',
    section: 'Billing and payments',
    default: '500',
    meaning:
      'A debit that takes an account\'s credits from at or above this many cents to under it writes a `credits.low` event (and the bot\'s "credits running low" message).',
  },
  {
    name: 'TELEGRAM_NOTIFY_SECONDS',
    section: 'Telegram bot',
    default: '10',
    meaning: 'How often the `bot` role looks for owner notifications to send.',
  },
  {
    name: 'RELEASES_URL',
    section: 'Client releases',
    default: null,
    defaultText: '`$PUBLIC_BASE_URL/releases`',
    meaning:
      "Where the client releases' `latest.json` lives; when it is under `PUBLIC_BASE_URL` this service serves it and the files.",
  },
  {
    name: 'RELEASES_DIR',
    section: 'Client releases',
    default: 'releases',
    meaning: 'Folder `npm run release` writes to and the service serves from.',
  },
  {
    name: 'WEBHOOK_ALLOW_PRIVATE_DESTINATIONS',
    section: 'Webhooks',
    default: null,
    defaultText: '`true` unless `NODE_ENV=production`',
    meaning:
      'Lets webhook endpoints point at loopback and private addresses, over plain `http` too (a receiver on your own machine or network). Off, an endpoint must be `https` on a public address, checked when it is made and again at each delivery.',
  },
  {
    name: 'WEBHOOK_FIRST_RETRY_MS',
    section: 'Webhooks',
    default: '30000',
    meaning:
      'Wait before the first retry of a webhook delivery that failed; each later wait doubles, up to an hour, until 24 hours after the first try.',
  },
  {
    name: 'WEBHOOK_DISPATCH_MS',
    section: 'Webhooks',
    default: '1000',
    meaning: 'How often the `worker` role looks for new events to deliver to webhook endpoints.',
  },
  {
    name: 'METRICS_PORT',
    section: 'Metrics',
    default: null,
    defaultText: 'unset: no listener',
    meaning:
      'Port of a separate listener, on `METRICS_HOST`, serving `GET /metrics` (Prometheus text), `/readyz` and `/healthz` for every role of the process (a worker or bot process has no other port). Give each process on one machine a port of its own; it must differ from `PORT`. See [metrics](operations/metrics.md).',
  },
  {
    name: 'METRICS_HOST',
    section: 'Metrics',
    default: '127.0.0.1',
    meaning: 'Address the metrics listener binds: loopback unless a scraper on another machine must reach it.',
  },
  {
    name: 'METRICS_TOKEN',
    section: 'Metrics',
    default: null,
    defaultText: 'unset: no /metrics on the public port',
    meaning:
      'Serves `GET /metrics` on the `api` port too, to scrapers that send `Authorization: Bearer <token>` (compared in constant time; 401 otherwise). At least 24 characters, e.g. `openssl rand -base64 24`.',
  },
];
