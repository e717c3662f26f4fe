import type {
  IdempotencyRepository,
  NewIdempotencyRecord,
} from '../../../src/modules/idempotency/idempotency.repository.js';
import { IdempotencyRecord } from '../../../src/modules/idempotency/idempotency-record.entity.js';
import type { MemoryTables } from './memory-store.js';

/** `idempotency_records` in memory: keyed by (scope, key), as its unique index is. */
export class MemoryIdempotencyRepository implements IdempotencyRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get records() {
    return this.tables.table<IdempotencyRecord>('idempotency_records');
  }

  async insert(row: NewIdempotencyRecord): Promise<IdempotencyRecord | null> {
    const key = `${row.scope}\u0000${row.idemKey}`;
    if (this.records.has(key)) return null;
    const record = Object.assign(new IdempotencyRecord(), { id: this.records.nextId(), ...row });
    this.records.insert(key, record);
    return record;
  }

  async find(scope: string, key: string): Promise<IdempotencyRecord | null> {
    return this.records.get(`${scope}\u0000${key}`) ?? null;
  }

  async setResource(recordId: string, resourceId: string): Promise<void> {
    for (const key of this.records.keysWhere((r) => r.id === recordId)) this.records.update(key, { resourceId });
  }
}
