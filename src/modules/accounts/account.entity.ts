import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { BillingModel } from '../../config.js';
import { minorUnits } from '../../db/columns.js';

@Entity({ name: 'accounts' })
export class Account {
  @PrimaryColumn({ type: 'char', length: 36 })
  id: string;

  /** Persisted at creation; a rental copies it and never changes afterwards. */
  @Column({ name: 'billing_model', type: 'varchar', length: 32 })
  billingModel: BillingModel;

  /**
   * The credits the customer has, exact to the metering sweep: the sum of ledger_entries.amount_minor
   * minus `unpostedUsageMinor`. Moved with each ledger entry and with each sweep's usage.
   */
  @Column({ name: 'balance_minor', type: 'bigint', transformer: minorUnits })
  balanceMinor: number;

  /** Metered usage already taken from `balanceMinor` that no ledger entry holds yet (posted hourly). */
  @Column({ name: 'unposted_usage_minor', type: 'bigint', transformer: minorUnits, default: 0 })
  unpostedUsageMinor: number;

  @Column({ type: 'boolean' })
  frozen: boolean;

  @Column({ type: 'varchar', length: 254, nullable: true })
  email: string | null;

  @Column({ name: 'telegram_user_id', type: 'bigint', nullable: true, transformer: minorUnits })
  telegramUserId: number | null;

  @Column({ name: 'telegram_chat_id', type: 'bigint', nullable: true, transformer: minorUnits })
  telegramChatId: number | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;
}
