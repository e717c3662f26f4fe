import type { Executor } from '../../db/mysql-store.js';
import { secretBinding } from '../webhooks/webhooks.service.js';

// Every column that holds a SecretBox ciphertext, with the key id stored beside it: the one list
// that re-sealing after a SECRETS_KEY rotation walks. A new sealed column joins this list, or a
// rotation would leave its secrets under a key the operator is told it may drop.

/** A stored secret: its row, its ciphertext and the id of the key that sealed it. */
export interface SealedSecret {
  id: string;
  sealed: Buffer;
  keyId: string;
}

/** One kind of sealed secret: where it is stored and what its ciphertext is bound to. */
export interface SealedSecretKind {
  /** What the secrets are, in reports. */
  name: string;
  /** The additional data each row's ciphertext was sealed with (see its sealer). */
  binding: (id: string) => string;
  /** Rows sealed under another key than `?` (the current one), after id `?`, at most `?`. */
  select: string;
  /** Replaces one row's ciphertext and key id, only while it still holds what was read. */
  update: string;
  /** Stored secrets of this kind per key id. */
  count: string;
}

export const SEALED_SECRET_KINDS: readonly SealedSecretKind[] = [
  {
    // Sealed by provisioning (lifecycle/provisioning.ts), bound to the deployment's id.
    name: 'deployment SSH private keys',
    binding: (id) => id,
    select:
      'SELECT id, ssh_private_key_enc AS sealed, ssh_key_kid AS keyId FROM deployments ' +
      'WHERE ssh_private_key_enc IS NOT NULL AND ssh_key_kid <> ? AND id > ? ORDER BY id LIMIT ?',
    update:
      'UPDATE deployments SET ssh_private_key_enc = ?, ssh_key_kid = ? WHERE id = ? AND ssh_key_kid = ? AND ssh_private_key_enc = ?',
    count:
      'SELECT ssh_key_kid AS keyId, COUNT(*) AS n FROM deployments WHERE ssh_private_key_enc IS NOT NULL GROUP BY ssh_key_kid',
  },
  {
    // Sealed at admission (rentals/store/machine-secrets.ts), bound to the order's id.
    name: 'machine variables and startup scripts',
    binding: (id) => id,
    select:
      'SELECT id, machine_secrets_enc AS sealed, machine_secrets_kid AS keyId FROM orders ' +
      'WHERE machine_secrets_enc IS NOT NULL AND machine_secrets_kid <> ? AND id > ? ORDER BY id LIMIT ?',
    update:
      'UPDATE orders SET machine_secrets_enc = ?, machine_secrets_kid = ? WHERE id = ? AND machine_secrets_kid = ? AND machine_secrets_enc = ?',
    count:
      'SELECT machine_secrets_kid AS keyId, COUNT(*) AS n FROM orders WHERE machine_secrets_enc IS NOT NULL GROUP BY machine_secrets_kid',
  },
  {
    name: 'webhook signing secrets',
    binding: secretBinding,
    select:
      'SELECT id, secret_sealed AS sealed, secret_key_id AS keyId FROM webhook_endpoints WHERE secret_key_id <> ? AND id > ? ORDER BY id LIMIT ?',
    update:
      'UPDATE webhook_endpoints SET secret_sealed = ?, secret_key_id = ? WHERE id = ? AND secret_key_id = ? AND secret_sealed = ?',
    count: 'SELECT secret_key_id AS keyId, COUNT(*) AS n FROM webhook_endpoints GROUP BY secret_key_id',
  },
];

/**
 * The sealed secrets of every kind, as re-sealing walks them. Each call stands alone (no
 * transaction): a row is replaced only while it still holds what was read, so services that seal
 * and open meanwhile are never overwritten.
 */
export interface SealedSecretsRepository {
  /**
   * Up to `limit` secrets of `kind` not sealed under `currentKeyId`, with ids after `afterId`
   * (every id is after ''), in id order.
   */
  underOtherKeys(kind: SealedSecretKind, currentKeyId: string, afterId: string, limit: number): Promise<SealedSecret[]>;
  /** Stores `next` in place of `previous`; false, writing nothing, when the row no longer holds `previous`. */
  replace(kind: SealedSecretKind, previous: SealedSecret, next: { sealed: Buffer; keyId: string }): Promise<boolean>;
  /** How many stored secrets of `kind` each key id holds (key ids holding none are absent). */
  countsByKey(kind: SealedSecretKind): Promise<Record<string, number>>;
}

export class MysqlSealedSecretsRepository implements SealedSecretsRepository {
  constructor(private readonly sql: Executor) {}

  async underOtherKeys(
    kind: SealedSecretKind,
    currentKeyId: string,
    afterId: string,
    limit: number,
  ): Promise<SealedSecret[]> {
    const rows: { id: string; sealed: Buffer; keyId: string }[] = await this.sql.query(kind.select, [
      currentKeyId,
      afterId,
      limit,
    ]);
    return rows.map((r) => ({ id: r.id, sealed: Buffer.from(r.sealed), keyId: r.keyId }));
  }

  async replace(
    kind: SealedSecretKind,
    previous: SealedSecret,
    next: { sealed: Buffer; keyId: string },
  ): Promise<boolean> {
    const res: { affectedRows: number } = await this.sql.query(kind.update, [
      next.sealed,
      next.keyId,
      previous.id,
      previous.keyId,
      previous.sealed,
    ]);
    return res.affectedRows === 1;
  }

  async countsByKey(kind: SealedSecretKind): Promise<Record<string, number>> {
    const rows: { keyId: string; n: number | string }[] = await this.sql.query(kind.count);
    return Object.fromEntries(rows.map((r) => [r.keyId, Number(r.n)]));
  }
}
