import type { Store } from '../../../src/db/store.js';
import type { Repositories } from '../../../src/repositories.js';
import type { RentalsRepository } from '../../../src/modules/rentals/store/rentals.repository.js';
import { MemoryRentalSealedColumns } from './rentals.js';
import { MemoryAccountsRepository } from './accounts.js';
import { MemoryRateLimitsRepository } from './rate-limits.js';
import { MemoryCredentialsRepository } from './credentials.js';
import { MemoryIdempotencyRepository } from './idempotency.js';
import { MemoryInventoryRepository } from './inventory.js';
import { MemoryJobOutbox } from './job-queue.js';
import { MemoryStore, type MemoryTables } from './memory-store.js';
import { MemoryWebhooksRepository } from './webhooks.js';
import { MemoryLedgerRepository } from './ledger.js';
import { MemoryCheckoutsRepository } from './checkouts.js';
import { MemoryEventsRepository } from './events.js';
import { MemoryTelegramRepository } from './telegram.js';
import { MemoryProviderDriftRepository } from './provider-drift.js';
import { MemoryReceiptsRepository } from './receipts.js';
import { MemoryOAuthRecordsRepository } from './oauth-records.js';

/**
 * The aggregates that have a memory twin: all but rentals, whose services (admission, the state
 * machine, the lifecycle) are tested on MariaDB until its twin is written; of rentals, only the
 * sealed columns that re-sealing walks.
 */
export type UnitRepositories = Omit<Repositories, 'rentals'> & { rentals: Pick<RentalsRepository, 'sealed'> };

/** Every memory repository over one set of tables (see memory-store.ts). */
class MemoryRepositories implements UnitRepositories {
  constructor(private readonly tables: MemoryTables) {}

  get idempotency() {
    return new MemoryIdempotencyRepository(this.tables);
  }

  get accounts() {
    return new MemoryAccountsRepository(this.tables);
  }

  get rateLimits() {
    return new MemoryRateLimitsRepository(this.tables);
  }

  get jobs() {
    return new MemoryJobOutbox(this.tables);
  }

  get inventory() {
    return new MemoryInventoryRepository(this.tables);
  }

  get credentials() {
    return new MemoryCredentialsRepository(this.tables);
  }

  get webhooks() {
    return new MemoryWebhooksRepository(this.tables);
  }

  get ledger() {
    return new MemoryLedgerRepository(this.tables);
  }

  get checkouts() {
    return new MemoryCheckoutsRepository(this.tables);
  }

  get events() {
    return new MemoryEventsRepository(this.tables);
  }

  get telegram() {
    return new MemoryTelegramRepository(this.tables);
  }

  get providerDrift() {
    return new MemoryProviderDriftRepository(this.tables);
  }

  get receipts() {
    return new MemoryReceiptsRepository(this.tables);
  }

  get oauth() {
    return new MemoryOAuthRecordsRepository(this.tables);
  }

  get rentals() {
    return { sealed: new MemoryRentalSealedColumns(this.tables) };
  }
}

/** A fresh in-memory store of every memory repository: what the unit tier builds services on. */
export function memoryStore(): MemoryStore<UnitRepositories> & Store<UnitRepositories> {
  return new MemoryStore((tables) => new MemoryRepositories(tables));
}
