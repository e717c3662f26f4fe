import type { DataSource, EntityManager } from 'typeorm';
import { CredentialReveal, type RevealRefusal } from '../rentals/store/credential-reveal.entity.js';

// The only code that writes `credential_reveals`, the audit of every call for a deployment's
// SSH access: one row per reveal, and one row per key, reason and minute for refusals.

/** A reveal's audit row, written in the transaction that opens the key. */
export type RevealRow = Pick<CredentialReveal, 'deploymentId' | 'accountId' | 'keyId' | 'requestId' | 'calledAt'>;

/** Writes the audit row of a reveal, in the caller's transaction. */
export async function insertReveal(manager: EntityManager, row: RevealRow): Promise<void> {
  await manager.insert(CredentialReveal, { ...row, outcome: 'REVEALED', refusal: null });
}

/** A refused call, counted on the row of its key, reason and minute (`window`). */
export interface RefusedReveal {
  deploymentId: string;
  accountId: string;
  keyId: string;
  requestId: string;
  refusal: RevealRefusal;
  window: Date;
  at: Date;
}

/** Counts a refused call on its row, starting the row on the first refusal of its window. */
export async function countRefusedReveal(ds: DataSource, r: RefusedReveal): Promise<void> {
  await ds.query(
    `INSERT INTO credential_reveals
       (deployment_id, account_id, key_id, request_id, outcome, refusal, refusal_window, refused_calls, called_at, last_called_at)
     VALUES (?, ?, ?, ?, 'REFUSED', ?, ?, 1, ?, ?)
     ON DUPLICATE KEY UPDATE refused_calls = refused_calls + 1, last_called_at = ?`,
    [r.deploymentId, r.accountId, r.keyId, r.requestId, r.refusal, r.window, r.at, r.at, r.at],
  );
}
