import type { DataSource } from 'typeorm';
import { MysqlStore, type Executor } from './db/mysql-store.js';
import { createDataSource, migrate } from './db/data-source.js';
import { entities } from './entities.js';
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
import { MysqlRentalsRepository, type RentalsRepository } from './modules/rentals/store/rentals.repository.js';
import { MysqlEventsRepository, type EventsRepository } from './modules/events/events.repository.js';
import { MysqlTelegramRepository, type TelegramRepository } from './modules/telegram/telegram.repository.js';
import {
  MysqlProviderDriftRepository,
  type ProviderDriftRepository,
} from './modules/inventory/provider-drift.repository.js';
import { MysqlReceiptsRepository, type ReceiptsRepository } from './modules/receipts/receipts.repository.js';
import { MysqlOAuthRecordsRepository, type OAuthRecordsRepository } from './modules/oauth/oauth-records.repository.js';

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
  /** The credential reveal audit. */
  credentials: CredentialsRepository;
  /** Webhook endpoints, their deliveries and tries, and each account's tries in flight. */
  webhooks: WebhooksRepository;
  /** Ledger entries and the balances and key spend cached with them. */
  ledger: LedgerRepository;
  /** Top-up and card checkouts, and the payment events that settled them. */
  checkouts: CheckoutsRepository;
  /** Orders, their deployments, create attempts and idle watches, and the rental state machine's statements. */
  rentals: RentalsRepository;
  /** The event log, each account's numbering of it, and the cursors of the log's consumers. */
  events: EventsRepository;
  /** The owner bot's dialogues, the owners' notifications and what each chat chose to be told of. */
  telegram: TelegramRepository;
  /** The drift report: each shape of a provider's answer its plugin could not fully read. */
  providerDrift: ProviderDriftRepository;
  /** The keys that sign teardown receipts, and the receipts they signed. */
  receipts: ReceiptsRepository;
  /** The authorization server's records: clients, interactions, codes, tokens, grants. */
  oauth: OAuthRecordsRepository;
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

  private rentalRows?: RentalsRepository;
  get rentals(): RentalsRepository {
    return (this.rentalRows ??= new MysqlRentalsRepository(this.sql));
  }

  private log?: EventsRepository;
  get events(): EventsRepository {
    return (this.log ??= new MysqlEventsRepository(this.sql));
  }

  private bot?: TelegramRepository;
  get telegram(): TelegramRepository {
    return (this.bot ??= new MysqlTelegramRepository(this.sql));
  }

  private drift?: ProviderDriftRepository;
  get providerDrift(): ProviderDriftRepository {
    return (this.drift ??= new MysqlProviderDriftRepository(this.sql));
  }

  private signed?: ReceiptsRepository;
  get receipts(): ReceiptsRepository {
    return (this.signed ??= new MysqlReceiptsRepository(this.sql));
  }

  private oauthRecords?: OAuthRecordsRepository;
  get oauth(): OAuthRecordsRepository {
    return (this.oauthRecords ??= new MysqlOAuthRecordsRepository(this.sql));
  }
}

/** The MySQL store of the DataSource: the one way the services reach the database. */
export function createStore(ds: DataSource): AppStore {
  return new MysqlStore(ds, (sql) => new MysqlRepositories(sql));
}

/** A store that holds its own connections: a command's, closed when the command ends. */
export interface OwnedStore {
  readonly store: AppStore;
  /** Ends the store's connections; nothing runs on the store afterwards. */
  close(): Promise<void>;
}

/**
 * Opens the database at `databaseUrl` with `poolSize` connections and migrates it (as every process
 * does before it works), for a command that runs once and ends (the owner command): the DataSource
 * is opened and closed here and handed to nobody. A failed migration closes it before rejecting.
 */
export async function openStore(databaseUrl: string, poolSize: number): Promise<OwnedStore> {
  const ds = createDataSource(databaseUrl, poolSize, entities);
  await ds.initialize();
  try {
    await migrate(ds);
  } catch (err) {
    await ds.destroy();
    throw err;
  }
  return { store: createStore(ds), close: () => ds.destroy() };
}
