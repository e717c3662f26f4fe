import type { RentalSealedColumnsRepository } from '../../../src/modules/rentals/store/sealed-columns.repository.js';
import type { MemoryTables } from './memory-store.js';
import { MemorySealedColumn } from './sealed-column.js';

/*
 * The part of the rentals aggregate that has a memory twin: the sealed columns of `orders` and
 * `deployments` (entities keyed by id), as re-sealing walks them. The rest of the aggregate is
 * tested on MariaDB until its twin is written.
 */

/** The rentals' sealed columns in memory. */
export class MemoryRentalSealedColumns implements RentalSealedColumnsRepository {
  readonly sshKeys: MemorySealedColumn;
  readonly machineSecrets: MemorySealedColumn;

  constructor(tables: MemoryTables) {
    this.sshKeys = new MemorySealedColumn(tables, {
      table: 'deployments',
      sealed: 'sshPrivateKeyEnc',
      keyId: 'sshKeyKid',
    });
    this.machineSecrets = new MemorySealedColumn(tables, {
      table: 'orders',
      sealed: 'machineSecretsEnc',
      keyId: 'machineSecretsKid',
    });
  }
}
