import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** Outcome of one provider create attempt. */
/** GPU_MISMATCH: the machine came up with fewer GPUs than its offer promised; it was destroyed. */
export type AttemptOutcome =
  | 'STARTED'
  | 'CREATED'
  | 'UNAVAILABLE'
  | 'AMBIGUOUS'
  | 'ADOPTED'
  | 'NOT_FOUND'
  | 'FAILED'
  | 'THROTTLED'
  | 'REJECTED'
  | 'GPU_MISMATCH';

/** One create call (at most three per GPU-intent rental), recorded before the call is made. */
@Entity({ name: 'deployment_attempts' })
export class DeploymentAttempt {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ name: 'deployment_id', type: 'char', length: 36 })
  deploymentId: string;

  @Column({ type: 'int' })
  attempt: number;

  @Column({ name: 'offer_id', type: 'char', length: 36 })
  offerId: string;

  @Column({ name: 'provider_id', type: 'varchar', length: 64 })
  providerId: string;

  @Column({ type: 'varchar', length: 128 })
  label: string;

  @Column({ type: 'varchar', length: 32 })
  outcome: AttemptOutcome;

  @Column({ name: 'instance_id', type: 'varchar', length: 191, nullable: true })
  instanceId: string | null;

  @Column({ type: 'varchar', length: 512, nullable: true })
  detail: string | null;

  /** THROTTLED attempts: when the provider may be asked again with the same label. */
  @Column({ name: 'retry_at', type: 'datetime', precision: 3, nullable: true })
  retryAt: Date | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'datetime', precision: 3 })
  updatedAt: Date;
}
