import type { Executor } from '../../../db/mysql-store.js';
import { MysqlSealedColumn, type SealedColumn, type SealedColumnStatements } from '../../../db/sealed-column.js';

// The rentals aggregate's sealed columns, as re-sealing after a SECRETS_KEY rotation walks them
// (credentials/reseal-secrets.ts). A new sealed column of these tables joins this list and
// credentials/sealed-secrets.ts, or a rotation would leave its secrets under a key the operator is
// told they may drop.

/** Sealed by provisioning (lifecycle/provisioning.ts), bound to the deployment's id. */
const SSH_KEYS: SealedColumnStatements = {
  select:
    'SELECT id, ssh_private_key_enc AS sealed, ssh_key_kid AS keyId FROM deployments ' +
    'WHERE ssh_private_key_enc IS NOT NULL AND ssh_key_kid <> ? AND id > ? ORDER BY id LIMIT ?',
  update:
    'UPDATE deployments SET ssh_private_key_enc = ?, ssh_key_kid = ? WHERE id = ? AND ssh_key_kid = ? AND ssh_private_key_enc = ?',
  count:
    'SELECT ssh_key_kid AS keyId, COUNT(*) AS n FROM deployments WHERE ssh_private_key_enc IS NOT NULL GROUP BY ssh_key_kid',
};

/** Sealed at admission (rentals/store/machine-secrets.ts), bound to the order's id. */
const MACHINE_SECRETS: SealedColumnStatements = {
  select:
    'SELECT id, machine_secrets_enc AS sealed, machine_secrets_kid AS keyId FROM orders ' +
    'WHERE machine_secrets_enc IS NOT NULL AND machine_secrets_kid <> ? AND id > ? ORDER BY id LIMIT ?',
  update:
    'UPDATE orders SET machine_secrets_enc = ?, machine_secrets_kid = ? WHERE id = ? AND machine_secrets_kid = ? AND machine_secrets_enc = ?',
  count:
    'SELECT machine_secrets_kid AS keyId, COUNT(*) AS n FROM orders WHERE machine_secrets_enc IS NOT NULL GROUP BY machine_secrets_kid',
};

/** The sealed columns of orders and deployments (RentalsRepository.sealed). Each call stands alone. */
export interface RentalSealedColumnsRepository {
  /** Deployments' SSH private keys (`deployments.ssh_private_key_enc`, key id `ssh_key_kid`), bound to the deployment's id. */
  readonly sshKeys: SealedColumn;
  /** Orders' machine variables and startup scripts (`orders.machine_secrets_enc`, key id `machine_secrets_kid`), bound to the order's id. */
  readonly machineSecrets: SealedColumn;
}

/** The rentals' sealed columns on MySQL, each made on first use. */
export class MysqlRentalSealedColumnsRepository implements RentalSealedColumnsRepository {
  private ssh?: SealedColumn;
  private machine?: SealedColumn;

  constructor(private readonly sql: Executor) {}

  get sshKeys(): SealedColumn {
    return (this.ssh ??= new MysqlSealedColumn(this.sql, SSH_KEYS));
  }

  get machineSecrets(): SealedColumn {
    return (this.machine ??= new MysqlSealedColumn(this.sql, MACHINE_SECRETS));
  }
}
