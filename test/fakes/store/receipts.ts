import { ReceiptSigningKey } from '../../../src/modules/receipts/receipt-signing-key.entity.js';
import type {
  NewSigningKey,
  ReceiptSealedColumns,
  ReceiptsRepository,
} from '../../../src/modules/receipts/receipts.repository.js';
import { TeardownReceipt } from '../../../src/modules/receipts/teardown-receipt.entity.js';
import type { MemoryTables } from './memory-store.js';
import { MemorySealedColumn } from './sealed-column.js';

/*
 * The receipts aggregate in memory: `receipt_signing_keys` keyed by id, with the unique index on
 * `active_for_kid`, and `teardown_receipts` keyed by deployment id, as on MySQL.
 */

/** A stored key with its bytes as Buffers again (a memory row's copy holds plain Uint8Arrays). */
function keyOf(k: ReceiptSigningKey): ReceiptSigningKey {
  return Object.assign(new ReceiptSigningKey(), k, {
    publicKey: Buffer.from(k.publicKey),
    privateKeySealed: k.privateKeySealed === null ? null : Buffer.from(k.privateKeySealed),
  });
}

const byCreation = (a: ReceiptSigningKey, b: ReceiptSigningKey) =>
  a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export class MemoryReceiptsRepository implements ReceiptsRepository {
  readonly sealed: ReceiptSealedColumns;

  constructor(private readonly tables: MemoryTables) {
    this.sealed = {
      signingKeys: new MemorySealedColumn(tables, {
        table: 'receipt_signing_keys',
        sealed: 'privateKeySealed',
        keyId: 'privateKeyKid',
      }),
    };
  }

  private get keys() {
    return this.tables.table<ReceiptSigningKey>('receipt_signing_keys');
  }

  private get receipts() {
    return this.tables.table<TeardownReceipt>('teardown_receipts');
  }

  async activeKey(kid: string): Promise<ReceiptSigningKey | null> {
    const found = this.keys.first((k) => k.activeForKid === kid);
    return found ? keyOf(found) : null;
  }

  async addKey(key: NewSigningKey): Promise<boolean> {
    if (this.keys.first((k) => k.activeForKid === key.kid)) return false;
    const row = Object.assign(new ReceiptSigningKey(), {
      id: key.id,
      publicKey: Buffer.from(key.publicKey),
      privateKeySealed: key.privateKeySealed === null ? null : Buffer.from(key.privateKeySealed),
      privateKeyKid: key.kid,
      activeForKid: key.kid,
      createdAt: new Date(key.createdAt),
      retiredAt: null,
    });
    return this.keys.insert(key.id, row);
  }

  async retireOthers(kid: string, at: Date): Promise<number> {
    const ids = this.keys.keysWhere((k) => k.activeForKid !== null && k.activeForKid !== kid);
    for (const id of ids)
      this.keys.update(id, {
        privateKeySealed: null,
        privateKeyKid: null,
        activeForKid: null,
        retiredAt: new Date(at),
      });
    return ids.length;
  }

  async retireKey(id: string, at: Date): Promise<boolean> {
    if (!this.keys.first((k) => k.id === id && k.activeForKid !== null)) return false;
    return this.keys.update(id, {
      privateKeySealed: null,
      privateKeyKid: null,
      activeForKid: null,
      retiredAt: new Date(at),
    });
  }

  async publicKeys(): Promise<Pick<ReceiptSigningKey, 'id' | 'publicKey' | 'createdAt' | 'retiredAt'>[]> {
    return this.keys
      .all()
      .sort(byCreation)
      .map((k) => ({ id: k.id, publicKey: Buffer.from(k.publicKey), createdAt: k.createdAt, retiredAt: k.retiredAt }));
  }

  async addReceipt(receipt: TeardownReceipt): Promise<boolean> {
    return this.receipts.insert(receipt.deploymentId, Object.assign(new TeardownReceipt(), receipt));
  }

  async receiptOf(deploymentId: string): Promise<TeardownReceipt | null> {
    return this.receipts.get(deploymentId) ?? null;
  }
}
