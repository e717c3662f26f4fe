import type { AppStore, Repositories } from '../../../src/repositories.js';
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

/** Every aggregate's memory repository over one set of tables (see memory-store.ts). */
class MemoryRepositories implements Repositories {
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
}

/** A fresh in-memory store of every repository: what the unit tier builds services on. */
export function memoryStore(): MemoryStore<Repositories> & AppStore {
  return new MemoryStore((tables) => new MemoryRepositories(tables));
}
