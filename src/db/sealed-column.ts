import type { Executor } from './mysql-store.js';

// A column of SecretBox ciphertexts with the id of the key that sealed each stored beside it, as
// re-sealing after a SECRETS_KEY rotation walks it. Each aggregate names its own sealed columns'
// statements (its table is its own); this runs them, so that every column is walked alike.

/** A stored secret: its row, its ciphertext and the id of the key that sealed it. */
export interface SealedSecret {
  id: string;
  sealed: Buffer;
  keyId: string;
}

/**
 * One sealed column, as re-sealing walks it. Each call stands alone (no transaction): a row is
 * replaced only while it still holds what was read, so services that seal and open meanwhile are
 * never overwritten.
 */
export interface SealedColumn {
  /**
   * Up to `limit` secrets not sealed under `currentKeyId`, with ids after `afterId` (every id is
   * after ''), in id order.
   */
  underOtherKeys(currentKeyId: string, afterId: string, limit: number): Promise<SealedSecret[]>;
  /** Stores `next` in place of `previous`; false, writing nothing, when the row no longer holds `previous`. */
  replace(previous: SealedSecret, next: { sealed: Buffer; keyId: string }): Promise<boolean>;
  /** How many stored secrets each key id holds (key ids holding none are absent). */
  countsByKey(): Promise<Record<string, number>>;
}

/** The statements of one sealed column, written by the aggregate that owns its table. */
export interface SealedColumnStatements {
  /** `id`, `sealed` and `keyId` of the rows sealed under another key than `?` (the current one), after id `?`, at most `?`, in id order. */
  select: string;
  /** Sets the ciphertext `?` and key id `?` of row `?` only while it holds key id `?` and ciphertext `?`. */
  update: string;
  /** `keyId` and `n`: the stored secrets per key id. */
  count: string;
}

/** A sealed column on MySQL: its owner's statements, on one executor. */
export class MysqlSealedColumn implements SealedColumn {
  constructor(
    private readonly sql: Executor,
    private readonly statements: SealedColumnStatements,
  ) {}

  async underOtherKeys(currentKeyId: string, afterId: string, limit: number): Promise<SealedSecret[]> {
    const rows: { id: string; sealed: Buffer; keyId: string }[] = await this.sql.query(this.statements.select, [
      currentKeyId,
      afterId,
      limit,
    ]);
    return rows.map((r) => ({ id: r.id, sealed: Buffer.from(r.sealed), keyId: r.keyId }));
  }

  async replace(previous: SealedSecret, next: { sealed: Buffer; keyId: string }): Promise<boolean> {
    const res: { affectedRows: number } = await this.sql.query(this.statements.update, [
      next.sealed,
      next.keyId,
      previous.id,
      previous.keyId,
      previous.sealed,
    ]);
    return res.affectedRows === 1;
  }

  async countsByKey(): Promise<Record<string, number>> {
    const rows: { keyId: string; n: number | string }[] = await this.sql.query(this.statements.count);
    return Object.fromEntries(rows.map((r) => [r.keyId, Number(r.n)]));
  }
}
