import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { DeploymentBillingModel, RentalStatus } from './order.entity.js';

/** The machine behind a rental; created with its order in one transaction. */
@Entity({ name: 'deployments' })
export class Deployment {
  @PrimaryColumn({ type: 'char', length: 36 })
  id: string;

  @Column({ name: 'order_id', type: 'char', length: 36 })
  orderId: string;

  @Column({ name: 'account_id', type: 'char', length: 36 })
  accountId: string;

  @Column({ name: 'key_id', type: 'char', length: 36 })
  keyId: string;

  @Column({ type: 'varchar', length: 32 })
  status: RentalStatus;

  /** Copied from the order at admission; never changes afterwards. */
  @Column({ name: 'billing_model', type: 'varchar', length: 32 })
  billingModel: DeploymentBillingModel;

  @Column({ name: 'hours_purchased', type: 'int', nullable: true })
  hoursPurchased: number | null;

  @Column({ name: 'duration_seconds', type: 'int', nullable: true })
  durationSeconds: number | null;

  @Column({ name: 'started_at', type: 'datetime', precision: 3, nullable: true })
  startedAt: Date | null;

  @Column({ name: 'ends_at', type: 'datetime', precision: 3, nullable: true })
  endsAt: Date | null;

  /** Verified destruction time; written once, never changed. */
  @Column({ name: 'ended_at', type: 'datetime', precision: 3, nullable: true })
  endedAt: Date | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'datetime', precision: 3 })
  updatedAt: Date;
}
