import type { AppStore, Repositories } from '../../../src/repositories.js';
import { MemoryIdempotencyRepository } from './idempotency.js';
import { MemoryJobOutbox } from './job-queue.js';
import { MemoryStore, type MemoryTables } from './memory-store.js';

/** Every aggregate's memory repository over one set of tables (see memory-store.ts). */
class MemoryRepositories implements Repositories {
  constructor(private readonly tables: MemoryTables) {}

  get idempotency() {
    return new MemoryIdempotencyRepository(this.tables);
  }

  get jobs() {
    return new MemoryJobOutbox(this.tables);
  }
}

/** A fresh in-memory store of every repository: what the unit tier builds services on. */
export function memoryStore(): MemoryStore<Repositories> & AppStore {
  return new MemoryStore((tables) => new MemoryRepositories(tables));
}
