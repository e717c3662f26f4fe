import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { minorUnits } from '../../db/columns.js';

/** Why money moved. RENTAL_DEBIT, USAGE and REVERSAL count towards a key's net spend. */
/** TRAFFIC: a metered rental's internet traffic, billed per GB as used, posted like USAGE. */
export type LedgerKind = 'TOPUP' | 'RENTAL_DEBIT' | 'USAGE' | 'TRAFFIC' | 'REVERSAL' | 'ADJUSTMENT';

/** Append-only: rows are inserted, never updated or deleted. */
@Entity({ name: 'ledger_entries' })
export class LedgerEntry {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ name: 'account_id', type: 'char', length: 36 })
  accountId: string;

  @Column({ name: 'key_id', type: 'char', length: 36, nullable: true })
  keyId: string | null;

  @Column({ name: 'rental_id', type: 'char', length: 36, nullable: true })
  rentalId: string | null;

  @Column({ type: 'varchar', length: 32 })
  kind: LedgerKind;

  /** Signed cents: credits positive, debits negative. */
  @Column({ name: 'amount_minor', type: 'bigint', transformer: minorUnits })
  amountMinor: number;

  @Column({ name: 'balance_after_minor', type: 'bigint', transformer: minorUnits })
  balanceAfterMinor: number;

  /** Unique cause reference (e.g. `topup:<id>`), so a retried webhook or job cannot post twice. */
  @Column({ name: 'external_ref', type: 'varchar', length: 191 })
  externalRef: string;

  @Column({ type: 'varchar', length: 255 })
  description: string;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;
}
