import type { DataSource } from 'typeorm';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import { createAgenda, defineJobs } from './jobs/agenda.js';
import { jobDefinitions, type JobDefinition, type JobQueue } from './jobs/job-queue.js';
import { RateLimiter } from './http/rate-limiter.js';
import type { Logger } from './logger.js';
import { AccountsService } from './modules/accounts/accounts.service.js';
import { BillingService } from './modules/billing/billing.service.js';
import { LedgerService } from './modules/billing/ledger.service.js';
import {
  createPayments,
  reconcilePayments,
  RECONCILE_PAYMENTS_EVERY_MS,
  type Payments,
} from './modules/billing/payments.js';
import type { RentalHandoff } from './modules/billing/rental-handoff.js';
import { InventoryService } from './modules/inventory/inventory.service.js';
import { ProviderChecksService } from './modules/inventory/provider-checks.service.js';
import { KeysService } from './modules/keys/keys.service.js';
import { AgentKeysService } from './modules/agents/agent-keys.service.js';
import { AgentsService } from './modules/agents/agents.service.js';
import { CredentialsService } from './modules/credentials/credentials.service.js';
import { SecretBox } from './modules/credentials/secret-box.js';
import type { AuthorizationServer } from './modules/oauth/authorization-server.js';
import { createAuthorizationServer } from './modules/oauth/oauth-services.js';
import { OAUTH_PURGE_EVERY_MS } from './modules/oauth/authorization-server.js';
import { consentUrl } from './modules/oauth/consent.router.js';
import { ReceiptsService } from './modules/receipts/receipts.service.js';
import { RentalReadsService } from './modules/rentals/reads/rental-reads.service.js';
import { RentalsService } from './modules/rentals/admission/rental-requests.service.js';
import { CardCheckoutService } from './modules/rentals/admission/card-checkout.service.js';
import { CardOrdersService } from './modules/rentals/admission/card-payment-outcomes.service.js';
import { CardRentalHandoff } from './modules/rentals/lifecycle/rental-handoff.service.js';
import { IDLE_SWEEP_EVERY_MS } from './modules/rentals/lifecycle/idle.js';
import {
  createRentalLifecycle,
  type LifecycleDeps,
  type LifecycleTiming,
  type RentalLifecycle,
} from './modules/rentals/lifecycle/rental-lifecycle.js';
import { EventsService } from './modules/events/events.service.js';
import { EventHub } from './modules/events/event-hub.js';
import { NotificationsService, type NotificationSender } from './modules/notifications/notifications.service.js';
import type { ProviderRegistry } from './providers/provider-registry.js';
import { WebhookDeliveries } from './modules/webhooks/webhook-delivery.js';
import { MysqlWebhookEventLog } from './modules/webhooks/webhook-dispatch.repository.js';
import { WebhooksService } from './modules/webhooks/webhooks.service.js';
import { countWebhookDelivery } from './metrics/outcomes.js';
import { createStore, type AppStore } from './repositories.js';

/** How often the event hub reads the log's tail while anyone listens: a waiting read answers within this of a commit. */
const EVENT_TAIL_MS = 250;

/** Everything a controller or bot feature may call. Built once per process (or per test). */
export interface Services {
  config: Config;
  ds: DataSource;
  /** The database as the services see it: one repository per aggregate (src/repositories.ts). */
  store: AppStore;
  clock: Clock;
  logger: Logger;
  providers: ProviderRegistry;
  rateLimiter: RateLimiter;
  keys: KeysService;
  ledger: LedgerService;
  accounts: AccountsService;
  billing: BillingService;
  inventory: InventoryService;
  /** The providers' read-only checks, for operators (`GET /api/v1/providers/check`). */
  providerChecks: ProviderChecksService;
  payments: Payments;
  rentals: RentalsService;
  /** Card admission: a rental paid by card through a hosted checkout. */
  cardCheckout: CardCheckoutService;
  rentalReads: RentalReadsService;
  credentials: CredentialsService;
  agents: AgentsService;
  agentKeys: AgentKeysService;
  /** Reads of the durable event log. */
  events: EventsService;
  /** Webhook endpoints of keys and accounts. */
  webhooks: WebhooksService;
  /** Fan-out of events to webhook endpoints and their signed tries (run by their jobs). */
  webhookDeliveries: WebhookDeliveries;
  /** The process's one tail of the event log, waking event streams and waiting reads; stop it on shutdown. */
  eventHub: EventHub;
  /** Provisioning, termination, metering and reconciliation of rentals (run by its jobs). */
  lifecycle: RentalLifecycle;
  /** Teardown receipts: signed at a verified destruction, served with the rental, their keys published. */
  receipts: ReceiptsService;
  /** Remote MCP's OAuth authorization server, whose consent is an agent authorization session. */
  oauth: AuthorizationServer;
  /** Where a remote MCP client's approved session continues (its consent page). */
  clientContinueUrl: (interactionUid: string) => string;
  /** Background work: enqueue here; the worker role (src/worker.ts) runs it. */
  jobs: JobQueue;
  /** Every job this process defined on `jobs`, handlers bound; the worker schedules the repeating ones. */
  jobDefinitions: readonly JobDefinition[];
}

export interface ServiceDeps {
  config: Config;
  ds: DataSource;
  clock: Clock;
  logger: Logger;
  providers: ProviderRegistry;
  /** Replaces the rentals module's hand-off of paid card orders (tests); null drops them. */
  rentalHandoff?: RentalHandoff | null;
  /** Certificates TLS trusts for client metadata documents instead of the system's (a test's own authority). */
  clientMetadataCa?: string;
}

/** The composition root: builds every service and every job handler once, in dependency order. */
export function createServices({
  config,
  ds,
  clock,
  logger,
  providers,
  rentalHandoff,
  clientMetadataCa,
}: ServiceDeps): Services {
  const store = createStore(ds);
  // The plugins' drift report is written to the store from now on, in the background.
  providers.drift.attach((batch, max) => store.read((r) => r.providerDrift.record(batch, max)));
  const rateLimiter = new RateLimiter(store, clock);
  const ledger = new LedgerService(store, clock, { lowCreditsMinor: config.billing.lowCreditsMinor });
  const keys = new KeysService(store, clock);
  const accounts = new AccountsService(store, clock, keys, rateLimiter, {
    agentV1Enabled: config.agents.v1Enabled,
    signupRatePerMinute: config.signup.ratePerMinute,
    defaultBillingModel: config.billing.defaultModel,
  });
  const billing = new BillingService(store, keys);
  const inventory = new InventoryService(store, providers, clock, logger, {
    publicBaseUrl: config.http.publicBaseUrl,
    offerMaxAgeSeconds: config.inventory.offerMaxAgeSeconds,
  });
  // Every process gets an Agenda: enqueuing needs no processing, and only the worker role starts it.
  const { queue: jobs } = createAgenda(ds, config);
  const handoff = rentalHandoff === undefined ? new CardRentalHandoff(store, jobs) : (rentalHandoff ?? undefined);
  const payments = createPayments({
    config,
    store,
    clock,
    logger,
    ledger,
    cardOrders: new CardOrdersService(store),
    rentalHandoff: handoff,
  });
  const eventHub = new EventHub(store, { tailMs: EVENT_TAIL_MS, push: config.push }, logger);
  const rentalReads = new RentalReadsService(store, eventHub);
  const box = SecretBox.fromConfig(config);
  const rentals = new RentalsService(store, clock, logger, ledger, keys, jobs, inventory, rentalReads, box, {
    meteringEveryMs: config.rentals.meteringEveryMs,
  });
  const cardCheckout = new CardCheckoutService(store, clock, inventory, payments.sessions, keys);
  const credentials = new CredentialsService(store, clock, box);
  const receipts = new ReceiptsService(store, clock, box, (principal, id) => rentalReads.get(principal, id), {
    issuer: config.http.publicBaseUrl,
  });
  const unfinishedRentals = (accountId: string, keyIds: readonly string[]) =>
    store.read((r) => r.rentals.reads.unfinishedOfKeys(accountId, keyIds));
  const agentKeys = new AgentKeysService(store, clock, keys, unfinishedRentals, rentals);
  const agents = new AgentsService(
    store,
    clock,
    keys,
    rateLimiter,
    {
      agentV1Enabled: config.agents.v1Enabled,
      publicBaseUrl: config.http.publicBaseUrl,
      setupRatePerMinute: config.agents.setupRatePerMinute,
    },
    agentKeys,
  );
  const lifecycleDeps: LifecycleDeps = {
    store,
    clock,
    logger,
    providers,
    jobs,
    ledger,
    box,
    refunds: payments.sessions,
    inventory,
    receipts,
  };
  const lifecycle = createRentalLifecycle(lifecycleDeps, lifecycleTiming(config));
  const webhookLogger = logger.child({ component: 'webhooks' });
  const webhookEvents = new MysqlWebhookEventLog(store, webhookLogger);
  const webhooks = new WebhooksService(store, webhookEvents, clock, box, jobs, rateLimiter, {
    allowPrivateDestinations: config.webhooks.allowPrivateDestinations,
  });
  const webhookDeliveries = new WebhookDeliveries(store, webhookEvents, clock, webhookLogger, jobs, box, {
    allowPrivateDestinations: config.webhooks.allowPrivateDestinations,
    firstRetryMs: config.webhooks.firstRetryMs,
  });
  // Every lock lifetime is stated (at most MAX_JOB_LOCK_LIFETIME_MS, docs/operations.md): longer
  // than a run can take, short enough that a dead worker's lock does not stop the job for long.
  const oauth = createAuthorizationServer({ config, store, box, clock, keys, logger, metadataCa: clientMetadataCa });
  const definitions = jobDefinitions({
    // A run: provider calls (30 s each at most) and one machine check (its SSH bounds, under 40 s).
    'rental.provision': {
      handler: (d) => lifecycle.provision(d.deploymentId),
      concurrency: 8,
      lockLifetimeMs: 120_000,
    },
    'rental.terminate': {
      handler: (d) => lifecycle.terminate(d.deploymentId),
      concurrency: 8,
      lockLifetimeMs: 120_000,
      priority: 10,
    },
    'rental.expire': { handler: (d) => lifecycle.expire(d.deploymentId), lockLifetimeMs: 60_000 },
    'rental.expiring': { handler: (d) => lifecycle.noticeExpiring(d.deploymentId), lockLifetimeMs: 60_000 },
    // A sweep waits at most SWEEP_WAIT_MS for its samples; slower ones finish outside it.
    'rental.idle': {
      handler: async () => void (await lifecycle.watchIdle()),
      everyMs: IDLE_SWEEP_EVERY_MS,
      concurrency: 1,
      lockLifetimeMs: 30_000,
    },
    // A sweep takes seconds; one outliving its lock may overlap the next (each rental is charged under its row lock).
    'rental.meter': {
      handler: async () => void (await lifecycle.meter()),
      everyMs: config.rentals.meteringEveryMs,
      concurrency: 1,
      lockLifetimeMs: 60_000,
    },
    'rental.reconcile': {
      handler: async () => void (await lifecycle.reconcile()),
      everyMs: 60_000,
      concurrency: 1,
      lockLifetimeMs: 120_000,
    },
    'inventory.refresh': {
      async handler() {
        const results = await inventory.refresh();
        logger.debug({ results }, 'inventory refreshed');
      },
      everyMs: config.inventory.refreshSeconds * 1000,
      // Providers are asked in parallel, each call cut at 30 s: a hanging one cannot hold the sweep long.
      lockLifetimeMs: 120_000,
      concurrency: 1,
    },
    // The authorization server's expired records (codes, interactions, tokens): a few deletes.
    'oauth.purge': {
      handler: async () => void (await oauth.purgeExpired()),
      everyMs: OAUTH_PURGE_EVERY_MS,
      concurrency: 1,
      lockLifetimeMs: 60_000,
    },
    'payments.reconcile': {
      handler: async () => void (await reconcilePayments({ payments, logger })),
      everyMs: RECONCILE_PAYMENTS_EVERY_MS,
      concurrency: 1,
      lockLifetimeMs: 120_000,
    },
    // A pass reads new events and writes deliveries: well under a second.
    'webhooks.dispatch': {
      handler: async () => void (await webhookDeliveries.dispatch()),
      everyMs: config.webhooks.dispatchEveryMs,
      concurrency: 1,
      lockLifetimeMs: 30_000,
    },
    // A try takes at most ten seconds; a run outliving its lock is refused by the delivery's own claim.
    // Tries only wait on receivers, so a worker holds many: with each account held to a few tries in
    // flight (TRIES_IN_FLIGHT_PER_ACCOUNT), it takes this many silent receivers' accounts, each
    // signed up separately, to make another account's delivery wait for a slot.
    'webhooks.deliver': {
      handler: async (d) => void countWebhookDelivery(await webhookDeliveries.deliver(d.deliveryId)),
      concurrency: 64,
      lockLifetimeMs: 60_000,
    },
  });
  // Defined in every process (defining starts nothing, and it gives enqueued jobs their priority).
  defineJobs(jobs.agenda, definitions);
  return {
    config,
    ds,
    store,
    clock,
    logger,
    providers,
    rateLimiter,
    keys,
    ledger,
    accounts,
    billing,
    inventory,
    providerChecks: new ProviderChecksService(providers, rateLimiter, clock),
    payments,
    rentals,
    cardCheckout,
    rentalReads,
    credentials,
    jobs,
    agents,
    agentKeys,
    events: new EventsService(store),
    eventHub,
    webhooks,
    webhookDeliveries,
    lifecycle,
    receipts,
    oauth,
    clientContinueUrl: consentUrl,
    jobDefinitions: definitions,
  };
}

/** The bot role's jobs, built like the worker's; start them with startJobWorker(botJobs). */
export interface BotJobs {
  notifications: NotificationsService;
  /** The bot's own queue, on an Agenda that defines only the bot's jobs. */
  jobs: JobQueue;
  jobDefinitions: readonly JobDefinition[];
  logger: Logger;
}

/**
 * Owner notifications as jobs of the bot role, which holds the Telegram token: the periodic
 * collect (every `collectEveryMs`, default TELEGRAM_NOTIFY_SECONDS) records what happened and
 * enqueues one deliver job per new notification, which sends it with `sender`. They are defined
 * on an Agenda of their own, so only the process that starts them claims them, and it claims
 * nothing else. `retryAfterMs` is the wait before a failed send is tried again (tests shorten it).
 */
export function createBotJobs(
  s: Services,
  sender: NotificationSender,
  timing: { collectEveryMs?: number; retryAfterMs?: number } = {},
): BotJobs {
  const { queue } = createAgenda(s.ds, s.config);
  const logger = s.logger.child({ component: 'telegram-bot' });
  const notifications = new NotificationsService(s.store, s.clock, logger, queue, {
    ...(timing.retryAfterMs === undefined ? {} : { retryAfterMs: timing.retryAfterMs }),
    idleGraceMs: s.config.rentals.idleGraceSeconds * 1000,
  });
  const definitions = jobDefinitions({
    'notifications.collect': {
      handler: async () => void (await notifications.collect()),
      everyMs: timing.collectEveryMs ?? s.config.telegram.notifySeconds * 1000,
      concurrency: 1,
      lockLifetimeMs: 60_000,
    },
    // One at a time, oldest first, as an owner would read them; a send outliving its lock may repeat.
    'notifications.deliver': {
      handler: async (d) => void (await notifications.deliver(d.notificationId, sender)),
      concurrency: 1,
      lockLifetimeMs: 60_000,
      retry: notifications.retry,
    },
  });
  defineJobs(queue.agenda, definitions);
  return { notifications, jobs: queue, jobDefinitions: definitions, logger };
}

/** The lifecycle's timing from configuration: polls and the first destruction re-check wait RENTAL_POLL_MS. */
export function lifecycleTiming(config: Pick<Config, 'rentals' | 'inventory'>): Partial<LifecycleTiming> {
  // A waiting rental looks at least once per inventory refresh, so its deadline holds to within one.
  return {
    pollMs: config.rentals.pollMs,
    verifyBaseDelayMs: config.rentals.pollMs,
    capacityPollMs: Math.min(15_000, config.inventory.refreshSeconds * 1000),
    idleGraceMs: config.rentals.idleGraceSeconds * 1000,
    meterPeriodMs: config.rentals.meteringEveryMs,
  };
}

/** What the lifecycle parts are built from, for building another lifecycle (tests with their own timing). */
export function lifecycleDepsOf(s: Services): LifecycleDeps {
  return {
    store: s.store,
    clock: s.clock,
    logger: s.logger,
    providers: s.providers,
    jobs: s.jobs,
    ledger: s.ledger,
    box: SecretBox.fromConfig(s.config),
    refunds: s.payments.sessions,
    inventory: s.inventory,
    receipts: s.receipts,
  };
}
