import type { DataSource } from 'typeorm';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import { createAgenda, defineJobs } from './jobs/agenda.js';
import { allJobDefinitions } from './jobs/job-definitions.js';
import type { JobQueue } from './jobs/job-queue.js';
import { RateLimiter } from './http/rate-limiter.js';
import type { Logger } from './logger.js';
import { AccountsService } from './modules/accounts/accounts.service.js';
import { BillingService } from './modules/billing/billing.service.js';
import { LedgerService } from './modules/billing/ledger.service.js';
import { createPayments, type Payments } from './modules/billing/payments.js';
import { InventoryService } from './modules/inventory/inventory.service.js';
import { KeysService } from './modules/keys/keys.service.js';
import { AgentsService } from './modules/agents/agents.service.js';
import { CredentialsService } from './modules/credentials/credentials.service.js';
import { SecretBox } from './modules/credentials/secret-box.js';
import { RentalsService } from './modules/rentals/rentals.service.js';
import { CardRentalHandoff } from './modules/rentals/lifecycle/rental-handoff.service.js';
import type { ProviderRegistry } from './providers/provider-registry.js';

/** Everything a controller, job or bot feature may call. Built once per process (or per test). */
export interface Services {
  config: Config;
  ds: DataSource;
  clock: Clock;
  logger: Logger;
  providers: ProviderRegistry;
  rateLimiter: RateLimiter;
  keys: KeysService;
  ledger: LedgerService;
  accounts: AccountsService;
  billing: BillingService;
  inventory: InventoryService;
  payments: Payments;
  rentals: RentalsService;
  credentials: CredentialsService;
  agents: AgentsService;
  /** Background work: enqueue here; the worker role (src/worker.ts) runs it. */
  jobs: JobQueue;
}

export interface ServiceDeps {
  config: Config;
  ds: DataSource;
  clock: Clock;
  logger: Logger;
  providers: ProviderRegistry;
}

export function createServices({ config, ds, clock, logger, providers }: ServiceDeps): Services {
  const rateLimiter = new RateLimiter(ds, clock);
  const keys = new KeysService(ds, clock);
  const ledger = new LedgerService(ds, clock);
  const accounts = new AccountsService(ds, clock, keys, rateLimiter, {
    agentV1Enabled: config.agentV1Enabled,
    signupRatePerMinute: config.signupRatePerMinute,
    defaultBillingModel: config.defaultBillingModel,
  });
  const billing = new BillingService(ds, ledger, keys);
  const inventory = new InventoryService(ds, providers, clock, logger, { publicBaseUrl: config.publicBaseUrl, offerMaxAgeSeconds: config.offerMaxAgeSeconds });
  const payments = createPayments({ config, ds, clock, logger, ledger, inventory });
  // Every process gets an Agenda: enqueuing needs no processing, and only the worker role starts it.
  const { queue: jobs } = createAgenda(ds, config);
  const rentals = new RentalsService(ds, clock, logger, ledger, keys, jobs);
  payments.rentalHandoff = new CardRentalHandoff(ds, jobs);
  const credentials = new CredentialsService(ds, clock, SecretBox.fromConfig(config));
  const agents = new AgentsService(ds, clock, keys, rateLimiter, {
    agentV1Enabled: config.agentV1Enabled,
    publicBaseUrl: config.publicBaseUrl,
    setupRatePerMinute: config.agentSetupRatePerMinute,
  });
  const services: Services = { config, ds, clock, logger, providers, rateLimiter, keys, ledger, accounts, billing, inventory, payments, rentals, credentials, jobs, agents };
  defineJobs(jobs.agenda, allJobDefinitions(), services);
  return services;
}
