import { DataSource, EntityManager } from 'typeorm';
import type { Executor } from '../../db/mysql-store.js';
import type { Viewer } from '../keys/visibility.js';
import type { Deployment } from '../rentals/store/deployment.entity.js';
import { lockDeploymentOrRentalFor } from '../rentals/store/rental-reads.repository.js';
import { CredentialReveal, type RevealRefusal } from './credential-reveal.entity.js';

// The only code that writes `credential_reveals`, the audit of every call for a deployment's
// SSH access: one row per reveal, and one row per key, reason and minute for refusals.

/** A reveal's audit row, written in the transaction that opens the key. */
export type RevealRow = Pick<CredentialReveal, 'deploymentId' | 'accountId' | 'keyId' | 'requestId' | 'calledAt'>;

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

/** The reveal audit, and the deployment a reveal opens the key of. */
export interface CredentialRevealsRepository {
  /**
   * The deployment `id` names, or else the one deployment of the rental `id` names, as `viewer`
   * may see it (see src/modules/keys/visibility.ts), locked FOR UPDATE until the transaction
   * ends so its status holds until the audit row commits; null when the viewer sees none. In a
   * transaction only. The rentals aggregate owns the row: this runs its read
   * (rental-reads.repository.ts) until rentals are on the store, and moves there then.
   */
  lockDeploymentFor(viewer: Viewer, id: string): Promise<Deployment | null>;
  /** Writes the audit row of a reveal (outcome REVEALED), in the transaction that opens the key. */
  insertReveal(row: RevealRow): Promise<void>;
  /**
   * Counts a refused call on the row of its key, reason and window, starting the row (with this
   * call's deployment id, request id and time) on the first refusal of the window; later ones add
   * one call and move the row's last call time. Stands alone: no transaction needed.
   */
  countRefused(r: RefusedReveal): Promise<void>;
  /** The audit rows of the calls of key `keyId`, oldest row first, ids as decimal strings. */
  ofKey(keyId: string): Promise<CredentialReveal[]>;
}

/** TypeORM's entity calls run on the DataSource or a transaction's manager, not in a pipelined transaction. */
function managerOf(sql: Executor): EntityManager {
  if (sql instanceof DataSource) return sql.manager;
  if (sql instanceof EntityManager) return sql;
  throw new Error('the reveal audit is not written in a pipelined transaction');
}

export class MysqlCredentialRevealsRepository implements CredentialRevealsRepository {
  constructor(private readonly sql: Executor) {}

  lockDeploymentFor(viewer: Viewer, id: string): Promise<Deployment | null> {
    if (!(this.sql instanceof EntityManager)) throw new Error('a deployment is locked only inside a transaction');
    return lockDeploymentOrRentalFor(this.sql, viewer, id);
  }

  async insertReveal(row: RevealRow): Promise<void> {
    await managerOf(this.sql).insert(CredentialReveal, { ...row, outcome: 'REVEALED', refusal: null });
  }

  async countRefused(r: RefusedReveal): Promise<void> {
    await this.sql.query(
      `INSERT INTO credential_reveals
       (deployment_id, account_id, key_id, request_id, outcome, refusal, refusal_window, refused_calls, called_at, last_called_at)
     VALUES (?, ?, ?, ?, 'REFUSED', ?, ?, 1, ?, ?)
     ON DUPLICATE KEY UPDATE refused_calls = refused_calls + 1, last_called_at = ?`,
      [r.deploymentId, r.accountId, r.keyId, r.requestId, r.refusal, r.window, r.at, r.at, r.at],
    );
  }

  async ofKey(keyId: string): Promise<CredentialReveal[]> {
    const rows = await managerOf(this.sql).find(CredentialReveal, { where: { keyId }, order: { id: 'ASC' } });
    // A BIGINT id comes back as a number when it fits.
    return rows.map((r) => Object.assign(r, { id: String(r.id) }));
  }
}
