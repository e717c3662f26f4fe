import type { DataSource } from 'typeorm';
import { MysqlStore, type Executor } from './db/mysql-store.js';
import type { Store } from './db/store.js';
import { MysqlJobOutboxRepository, type JobOutboxRepository } from './jobs/job-outbox.repository.js';
import { MysqlRateLimitsRepository, type RateLimitsRepository } from './http/rate-limits.repository.js';
import { MysqlAccountsRepository, type AccountsRepository } from './modules/accounts/accounts.repository.js';
import {
  MysqlIdempotencyRepository,
  type IdempotencyRepository,
} from './modules/idempotency/idempotency.repository.js';
import { MysqlInventoryRepository, type InventoryRepository } from './modules/inventory/inventory.repository.js';
import {
  MysqlCredentialsRepository,
  type CredentialsRepository,
} from './modules/credentials/credentials.repository.js';
import { MysqlWebhooksRepository, type WebhooksRepository } from './modules/webhooks/webhooks.repository.js';
import { MysqlLedgerRepository, type LedgerRepository } from './modules/billing/ledger.repository.js';
import { MysqlCheckoutsRepository, type CheckoutsRepository } from './modules/billing/checkouts.repository.js';

/**
 * Every aggregate's repository, as one transaction (or a read) hands them out. Each is the only
 * code that names its tables (test/unit/architecture.test.ts holds the map); a service names the
 * ones it uses in its own `Store<…>` type, and this whole set is assignable to it.
 */
export interface Repositories {
  idempotency: IdempotencyRepository;
  /** Accounts, their keys and agent authorizations, and the account/key locks. */
  accounts: AccountsRepository;
  /** The rate limiter's fixed-window counters. */
  rateLimits: RateLimitsRepository;
  /** The job outbox: jobs written with the state they act on. */
  jobs: JobOutboxRepository;
  /** The offer cache, its version and the providers' refresh outcomes. */
  inventory: InventoryRepository;
  /** The credential reveal audit and the sealed secrets re-sealing walks. */
  credentials: CredentialsRepository;
  /** Webhook endpoints, their deliveries and tries, and each account's tries in flight. */
  webhooks: WebhooksRepository;
  /** Ledger entries and the balances and key spend cached with them. */
  ledger: LedgerRepository;
  /** Top-up and card checkouts, and the payment events that settled them. */
  checkouts: CheckoutsRepository;
}

/** The store every service of a process shares. */
export type AppStore = Store<Repositories>;

/**
 * The MySQL repositories of one executor, each made on first use: a transaction builds only the
 * ones it touches (admission's round trips and statements stay as they were).
 */
class MysqlRepositories implements Repositories {
  private idem?: IdempotencyRepository;

  constructor(private readonly sql: Executor) {}

  get idempotency(): IdempotencyRepository {
    return (this.idem ??= new MysqlIdempotencyRepository(this.sql));
  }

  private acc?: AccountsRepository;
  get accounts(): AccountsRepository {
    return (this.acc ??= new MysqlAccountsRepository(this.sql));
  }

  private limits?: RateLimitsRepository;
  get rateLimits(): RateLimitsRepository {
    return (this.limits ??= new MysqlRateLimitsRepository(this.sql));
  }

  private outbox?: JobOutboxRepository;
  get jobs(): JobOutboxRepository {
    return (this.outbox ??= new MysqlJobOutboxRepository(this.sql));
  }

  private inv?: InventoryRepository;
  get inventory(): InventoryRepository {
    return (this.inv ??= new MysqlInventoryRepository(this.sql));
  }

  private creds?: CredentialsRepository;
  get credentials(): CredentialsRepository {
    return (this.creds ??= new MysqlCredentialsRepository(this.sql));
  }

  private hooks?: WebhooksRepository;
  get webhooks(): WebhooksRepository {
    return (this.hooks ??= new MysqlWebhooksRepository(this.sql));
  }

  private entries?: LedgerRepository;
  get ledger(): LedgerRepository {
    return (this.entries ??= new MysqlLedgerRepository(this.sql));
  }

  private payments?: CheckoutsRepository;
  get checkouts(): CheckoutsRepository {
    return (this.payments ??= new MysqlCheckoutsRepository(this.sql));
  }
}

/** The MySQL store of the DataSource: the one way the services reach the database. */
export function createStore(ds: DataSource): AppStore {
  return new MysqlStore(ds, (sql) => new MysqlRepositories(sql));
}
