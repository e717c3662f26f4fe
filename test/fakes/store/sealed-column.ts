import type { SealedColumn, SealedSecret } from '../../../src/db/sealed-column.js';
import type { MemoryTables } from './memory-store.js';

/** Where a sealed column lives in the memory tables: its owner's table, and the entity properties of the ciphertext and its key id. */
export interface SealedPlace {
  table: string;
  sealed: string;
  keyId: string;
}

type Row = Record<string, unknown> & { id: string };

/** A stored ciphertext as a Buffer (a memory row's copy holds a plain Uint8Array). */
const bytes = (v: unknown): Buffer | null => (v instanceof Uint8Array ? Buffer.from(v) : null);

/** Ids in the byte order of the utf8mb4_bin collation (code order for ASCII ids). */
const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * One sealed column in memory, as src/db/sealed-column.ts walks it on MySQL. Rows are looked up by
 * their `id`, whatever key their own aggregate stores them under; a row without a ciphertext or a
 * key id holds no secret.
 */
export class MemorySealedColumn implements SealedColumn {
  constructor(
    private readonly tables: MemoryTables,
    private readonly place: SealedPlace,
  ) {}

  private get rows() {
    return this.tables.table<Row>(this.place.table);
  }

  /** The secrets as stored: rows with a ciphertext and a key id. */
  private stored(): SealedSecret[] {
    const { sealed, keyId } = this.place;
    return this.rows.all().flatMap((r) => {
      const ciphertext = bytes(r[sealed]);
      return ciphertext && typeof r[keyId] === 'string' ? [{ id: r.id, sealed: ciphertext, keyId: r[keyId] }] : [];
    });
  }

  async underOtherKeys(currentKeyId: string, afterId: string, limit: number): Promise<SealedSecret[]> {
    return this.stored()
      .filter((s) => s.keyId !== currentKeyId && s.id > afterId)
      .sort(byId)
      .slice(0, limit);
  }

  async replace(previous: SealedSecret, next: { sealed: Buffer; keyId: string }): Promise<boolean> {
    const { sealed, keyId } = this.place;
    const keys = this.rows.keysWhere(
      (r) => r.id === previous.id && r[keyId] === previous.keyId && !!bytes(r[sealed])?.equals(previous.sealed),
    );
    for (const k of keys) this.rows.update(k, { [sealed]: next.sealed, [keyId]: next.keyId });
    return keys.length === 1;
  }

  async countsByKey(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const s of this.stored()) counts[s.keyId] = (counts[s.keyId] ?? 0) + 1;
    return counts;
  }
}
