import type { Executor } from '../../db/mysql-store.js';
import { MysqlSealedColumn, type SealedColumn, type SealedColumnStatements } from '../../db/sealed-column.js';
import { ReceiptSigningKey } from './receipt-signing-key.entity.js';
import { TeardownReceipt } from './teardown-receipt.entity.js';

// The receipts aggregate: the keys that sign teardown receipts (`receipt_signing_keys`) and the
// receipts they signed (`teardown_receipts`). The only code that names these tables.

/** A key as it is added: active under the SECRETS_KEY id that sealed its private half. */
export type NewSigningKey = Pick<ReceiptSigningKey, 'id' | 'publicKey' | 'privateKeySealed' | 'createdAt'> & {
  /** The SECRETS_KEY id that sealed the private half, under which the pair is active. */
  kid: string;
};

/** The receipts aggregate's statements. Each stands alone or joins the caller's transaction. */
export interface ReceiptsRepository {
  /** The key active under SECRETS_KEY id `kid`, or null. */
  activeKey(kid: string): Promise<ReceiptSigningKey | null>;
  /**
   * Adds `key` as the active key of its `kid` unless one is already active under it (the unique
   * index keeps one when processes race): true when this one was added.
   */
  addKey(key: NewSigningKey): Promise<boolean>;
  /**
   * Retires every active key that is not active under `kid`: erases its private half and stamps
   * `retiredAt` (its public half stays, still published). Answers how many were retired.
   */
  retireOthers(kid: string, at: Date): Promise<number>;
  /** Retires key `id` as {@link retireOthers} does, if it is still active: true when it was. */
  retireKey(id: string, at: Date): Promise<boolean>;
  /** Every key ever made, public halves only (the private half is left out), oldest first. */
  publicKeys(): Promise<Pick<ReceiptSigningKey, 'id' | 'publicKey' | 'createdAt' | 'retiredAt'>[]>;
  /** Stores a deployment's receipt unless it has one already (a re-run never replaces it): true when stored. */
  addReceipt(receipt: TeardownReceipt): Promise<boolean>;
  /** The receipt of a deployment, or null. */
  receiptOf(deploymentId: string): Promise<TeardownReceipt | null>;
  /** The sealed private halves, as re-sealing after a SECRETS_KEY rotation walks them. */
  readonly sealed: ReceiptSealedColumns;
}

/** The receipts aggregate's sealed columns (credentials/sealed-secrets.ts lists them). */
export interface ReceiptSealedColumns {
  /** Signing keys' private halves (`private_key_sealed`, key id `private_key_kid`), bound to the key's id. */
  readonly signingKeys: SealedColumn;
}

/** Sealed when a pair is made (receipts.service.ts), bound to the key's id (signingKeyBinding). */
const SIGNING_KEYS: SealedColumnStatements = {
  select:
    'SELECT id, private_key_sealed AS sealed, private_key_kid AS keyId FROM receipt_signing_keys ' +
    'WHERE private_key_sealed IS NOT NULL AND private_key_kid <> ? AND id > ? ORDER BY id LIMIT ?',
  update:
    'UPDATE receipt_signing_keys SET private_key_sealed = ?, private_key_kid = ? ' +
    'WHERE id = ? AND private_key_kid = ? AND private_key_sealed = ?',
  count:
    'SELECT private_key_kid AS keyId, COUNT(*) AS n FROM receipt_signing_keys ' +
    'WHERE private_key_sealed IS NOT NULL GROUP BY private_key_kid',
};

const KEY_COLUMNS = 'id, public_key, private_key_sealed, private_key_kid, active_for_kid, created_at, retired_at';

interface KeyRow {
  id: string;
  public_key: Buffer;
  private_key_sealed: Buffer | null;
  private_key_kid: string | null;
  active_for_kid: string | null;
  created_at: Date;
  retired_at: Date | null;
}

function keyOf(r: KeyRow): ReceiptSigningKey {
  return Object.assign(new ReceiptSigningKey(), {
    id: r.id,
    publicKey: Buffer.from(r.public_key),
    privateKeySealed: r.private_key_sealed === null ? null : Buffer.from(r.private_key_sealed),
    privateKeyKid: r.private_key_kid,
    activeForKid: r.active_for_kid,
    createdAt: new Date(r.created_at),
    retiredAt: r.retired_at === null ? null : new Date(r.retired_at),
  });
}

interface ReceiptRow {
  deployment_id: string;
  rental_id: string;
  body: string;
  signing_key_id: string;
  signature: string;
  issued_at: Date;
}

/** The receipts aggregate on MySQL. */
export class MysqlReceiptsRepository implements ReceiptsRepository {
  private columns?: ReceiptSealedColumns;

  constructor(private readonly sql: Executor) {}

  get sealed(): ReceiptSealedColumns {
    return (this.columns ??= { signingKeys: new MysqlSealedColumn(this.sql, SIGNING_KEYS) });
  }

  async activeKey(kid: string): Promise<ReceiptSigningKey | null> {
    const rows: KeyRow[] = await this.sql.query(
      `SELECT ${KEY_COLUMNS} FROM receipt_signing_keys WHERE active_for_kid = ?`,
      [kid],
    );
    return rows.length ? keyOf(rows[0]) : null;
  }

  async addKey(key: NewSigningKey): Promise<boolean> {
    const res: { affectedRows: number } = await this.sql.query(
      `INSERT IGNORE INTO receipt_signing_keys (id, public_key, private_key_sealed, private_key_kid, active_for_kid, created_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
      [key.id, key.publicKey, key.privateKeySealed, key.kid, key.kid, key.createdAt],
    );
    return res.affectedRows === 1;
  }

  async retireOthers(kid: string, at: Date): Promise<number> {
    const res: { affectedRows: number } = await this.sql.query(
      `UPDATE receipt_signing_keys
       SET private_key_sealed = NULL, private_key_kid = NULL, active_for_kid = NULL, retired_at = ?
       WHERE active_for_kid IS NOT NULL AND active_for_kid <> ?`,
      [at, kid],
    );
    return res.affectedRows;
  }

  async retireKey(id: string, at: Date): Promise<boolean> {
    const res: { affectedRows: number } = await this.sql.query(
      `UPDATE receipt_signing_keys
       SET private_key_sealed = NULL, private_key_kid = NULL, active_for_kid = NULL, retired_at = ?
       WHERE id = ? AND active_for_kid IS NOT NULL`,
      [at, id],
    );
    return res.affectedRows === 1;
  }

  async publicKeys(): Promise<Pick<ReceiptSigningKey, 'id' | 'publicKey' | 'createdAt' | 'retiredAt'>[]> {
    const rows: Pick<KeyRow, 'id' | 'public_key' | 'created_at' | 'retired_at'>[] = await this.sql.query(
      'SELECT id, public_key, created_at, retired_at FROM receipt_signing_keys ORDER BY created_at, id',
    );
    return rows.map((r) => ({
      id: r.id,
      publicKey: Buffer.from(r.public_key),
      createdAt: new Date(r.created_at),
      retiredAt: r.retired_at === null ? null : new Date(r.retired_at),
    }));
  }

  async addReceipt(receipt: TeardownReceipt): Promise<boolean> {
    const res: { affectedRows: number } = await this.sql.query(
      `INSERT IGNORE INTO teardown_receipts (deployment_id, rental_id, body, signing_key_id, signature, issued_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
      [receipt.deploymentId, receipt.rentalId, receipt.body, receipt.signingKeyId, receipt.signature, receipt.issuedAt],
    );
    return res.affectedRows === 1;
  }

  async receiptOf(deploymentId: string): Promise<TeardownReceipt | null> {
    const rows: ReceiptRow[] = await this.sql.query(
      'SELECT deployment_id, rental_id, body, signing_key_id, signature, issued_at FROM teardown_receipts WHERE deployment_id = ?',
      [deploymentId],
    );
    if (!rows.length) return null;
    const r = rows[0];
    return Object.assign(new TeardownReceipt(), {
      deploymentId: r.deployment_id,
      rentalId: r.rental_id,
      body: r.body,
      signingKeyId: r.signing_key_id,
      signature: r.signature,
      issuedAt: new Date(r.issued_at),
    });
  }
}
