import type { DataSource } from 'typeorm';
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

/** Up to `limit` secrets of `kind` not sealed under `currentKeyId`, with ids after `afterId`, in id order. */
export async function sealedUnderOtherKeys(
  ds: DataSource,
  kind: SealedSecretKind,
  currentKeyId: string,
  afterId: string,
  limit: number,
): Promise<SealedSecret[]> {
  const rows: { id: string; sealed: Buffer; keyId: string }[] = await ds.query(kind.select, [
    currentKeyId,
    afterId,
    limit,
  ]);
  return rows.map((r) => ({ id: r.id, sealed: Buffer.from(r.sealed), keyId: r.keyId }));
}

/** Stores `next` in place of `previous`; false when the row changed since it was read. */
export async function replaceSealed(
  ds: DataSource,
  kind: SealedSecretKind,
  previous: SealedSecret,
  next: { sealed: Buffer; keyId: string },
): Promise<boolean> {
  const res: { affectedRows: number } = await ds.query(kind.update, [
    next.sealed,
    next.keyId,
    previous.id,
    previous.keyId,
    previous.sealed,
  ]);
  return res.affectedRows === 1;
}

/** How many secrets of `kind` each key id holds. */
export async function sealedCountsByKey(ds: DataSource, kind: SealedSecretKind): Promise<Record<string, number>> {
  const rows: { keyId: string; n: number | string }[] = await ds.query(kind.count);
  return Object.fromEntries(rows.map((r) => [r.keyId, Number(r.n)]));
}
