import type { Executor } from '../../db/mysql-store.js';

// The only code that reads or writes `oauth_records`: what the authorization server keeps
// (clients registered dynamically, interactions, codes, tokens, grants, sessions), one row per
// record of a model. Ids arrive hashed and payloads sealed (oauth-adapter.ts): this file never
// sees a usable credential.

/** One record as stored: its model, hashed id and lookups, the sealed payload and its life. */
export interface OAuthRecord {
  model: string;
  idHash: string;
  /** Hash of the grant the record belongs to, so revoking the grant finds every token of it. */
  grantHash: string | null;
  uidHash: string | null;
  userCodeHash: string | null;
  payload: Buffer;
  /** The secrets key that sealed `payload`. */
  keyId: string;
  /** Null: kept until destroyed. */
  expiresAt: Date | null;
  consumedAt: Date | null;
}

/** The authorization server's records; reads never answer a record past its expiry. */
export interface OAuthRecordsRepository {
  /** Writes the record, replacing one of the same model and id (its consumption kept). */
  upsert(record: Omit<OAuthRecord, 'consumedAt'>): Promise<void>;
  /** The record of `model` with this id hash, unless it expired by `now`. */
  find(model: string, idHash: string, now: Date): Promise<OAuthRecord | null>;
  /** The record of `model` with this uid hash, unless it expired by `now`. */
  findByUid(model: string, uidHash: string, now: Date): Promise<OAuthRecord | null>;
  /** The record of `model` with this user code hash, unless it expired by `now`. */
  findByUserCode(model: string, userCodeHash: string, now: Date): Promise<OAuthRecord | null>;
  /** Marks the record consumed at `at` (a code used once, a refresh token rotated). */
  consume(model: string, idHash: string, at: Date): Promise<void>;
  destroy(model: string, idHash: string): Promise<void>;
  /** Deletes every record of the grant, of any model. */
  revokeByGrant(grantHash: string): Promise<void>;
  /** Deletes up to `limit` records that expired before `before`; answers how many. */
  purgeExpired(before: Date, limit: number): Promise<number>;
}

interface Row {
  model: string;
  id_hash: string;
  grant_hash: string | null;
  uid_hash: string | null;
  user_code_hash: string | null;
  payload: Buffer;
  key_id: string;
  expires_at: Date | null;
  consumed_at: Date | null;
}

const COLUMNS = 'model, id_hash, grant_hash, uid_hash, user_code_hash, payload, key_id, expires_at, consumed_at';
const LIVE = '(expires_at IS NULL OR expires_at > ?)';

const toRecord = (r: Row): OAuthRecord => ({
  model: r.model,
  idHash: r.id_hash,
  grantHash: r.grant_hash,
  uidHash: r.uid_hash,
  userCodeHash: r.user_code_hash,
  payload: r.payload,
  keyId: r.key_id,
  expiresAt: r.expires_at,
  consumedAt: r.consumed_at,
});

export class MysqlOAuthRecordsRepository implements OAuthRecordsRepository {
  constructor(private readonly sql: Executor) {}

  async upsert(r: Omit<OAuthRecord, 'consumedAt'>): Promise<void> {
    await this.sql.query(
      `INSERT INTO oauth_records (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)
       ON DUPLICATE KEY UPDATE grant_hash = VALUES(grant_hash), uid_hash = VALUES(uid_hash),
         user_code_hash = VALUES(user_code_hash), payload = VALUES(payload), key_id = VALUES(key_id),
         expires_at = VALUES(expires_at)`,
      [r.model, r.idHash, r.grantHash, r.uidHash, r.userCodeHash, r.payload, r.keyId, r.expiresAt],
    );
  }

  private async first(rows: Promise<Row[]>): Promise<OAuthRecord | null> {
    const [row] = await rows;
    return row ? toRecord(row) : null;
  }

  find(model: string, idHash: string, now: Date): Promise<OAuthRecord | null> {
    return this.first(
      this.sql.query(`SELECT ${COLUMNS} FROM oauth_records WHERE model = ? AND id_hash = ? AND ${LIVE}`, [
        model,
        idHash,
        now,
      ]),
    );
  }

  findByUid(model: string, uidHash: string, now: Date): Promise<OAuthRecord | null> {
    return this.first(
      this.sql.query(`SELECT ${COLUMNS} FROM oauth_records WHERE model = ? AND uid_hash = ? AND ${LIVE} LIMIT 1`, [
        model,
        uidHash,
        now,
      ]),
    );
  }

  findByUserCode(model: string, userCodeHash: string, now: Date): Promise<OAuthRecord | null> {
    return this.first(
      this.sql.query(
        `SELECT ${COLUMNS} FROM oauth_records WHERE model = ? AND user_code_hash = ? AND ${LIVE} LIMIT 1`,
        [model, userCodeHash, now],
      ),
    );
  }

  async consume(model: string, idHash: string, at: Date): Promise<void> {
    await this.sql.query(`UPDATE oauth_records SET consumed_at = ? WHERE model = ? AND id_hash = ?`, [
      at,
      model,
      idHash,
    ]);
  }

  async destroy(model: string, idHash: string): Promise<void> {
    await this.sql.query(`DELETE FROM oauth_records WHERE model = ? AND id_hash = ?`, [model, idHash]);
  }

  async revokeByGrant(grantHash: string): Promise<void> {
    await this.sql.query(`DELETE FROM oauth_records WHERE grant_hash = ?`, [grantHash]);
  }

  async purgeExpired(before: Date, limit: number): Promise<number> {
    const result: { affectedRows?: number } = await this.sql.query(
      `DELETE FROM oauth_records WHERE expires_at < ? ORDER BY expires_at LIMIT ?`,
      [before, limit],
    );
    return result.affectedRows ?? 0;
  }
}
