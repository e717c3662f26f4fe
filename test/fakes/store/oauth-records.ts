import type { OAuthRecord, OAuthRecordsRepository } from '../../../src/modules/oauth/oauth-records.repository.js';
import type { MemoryTables } from './memory-store.js';

const keyOf = (model: string, idHash: string) => `${model}\u0000${idHash}`;
const live = (r: OAuthRecord, now: Date) => r.expiresAt === null || r.expiresAt.getTime() > now.getTime();
/** A row as read: the tables' copies turn a Buffer into a plain byte array, as a driver would not. */
const asRead = (r: OAuthRecord): OAuthRecord => ({ ...r, payload: Buffer.from(r.payload) });

/** `oauth_records` in memory, keyed as its primary key is. */
export class MemoryOAuthRecordsRepository implements OAuthRecordsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<OAuthRecord>('oauth_records');
  }

  async upsert(record: Omit<OAuthRecord, 'consumedAt'>): Promise<void> {
    const key = keyOf(record.model, record.idHash);
    this.rows.put(key, { ...record, consumedAt: this.rows.get(key)?.consumedAt ?? null });
  }

  async find(model: string, idHash: string, now: Date): Promise<OAuthRecord | null> {
    const row = this.rows.get(keyOf(model, idHash));
    return row && live(row, now) ? asRead(row) : null;
  }

  async findByUid(model: string, uidHash: string, now: Date): Promise<OAuthRecord | null> {
    const row = this.rows.first((r) => r.model === model && r.uidHash === uidHash && live(r, now));
    return row ? asRead(row) : null;
  }

  async findByUserCode(model: string, userCodeHash: string, now: Date): Promise<OAuthRecord | null> {
    const row = this.rows.first((r) => r.model === model && r.userCodeHash === userCodeHash && live(r, now));
    return row ? asRead(row) : null;
  }

  async consume(model: string, idHash: string, at: Date): Promise<void> {
    this.rows.update(keyOf(model, idHash), { consumedAt: at });
  }

  async destroy(model: string, idHash: string): Promise<void> {
    this.rows.delete(keyOf(model, idHash));
  }

  async revokeByGrant(grantHash: string): Promise<void> {
    for (const key of this.rows.keysWhere((r) => r.grantHash === grantHash)) this.rows.delete(key);
  }

  async purgeExpired(before: Date, limit: number): Promise<number> {
    const keys = this.rows
      .keysWhere((r) => r.expiresAt !== null && r.expiresAt.getTime() < before.getTime())
      .slice(0, limit);
    for (const key of keys) this.rows.delete(key);
    return keys.length;
  }
}
