import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** Audit row written in the same transaction as every credential reveal. */
@Entity({ name: 'credential_reveals' })
export class CredentialReveal {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ name: 'deployment_id', type: 'char', length: 36 })
  deploymentId: string;

  @Column({ name: 'account_id', type: 'char', length: 36 })
  accountId: string;

  @Column({ name: 'key_id', type: 'char', length: 36 })
  keyId: string;

  @Column({ name: 'request_id', type: 'varchar', length: 128 })
  requestId: string;

  @Column({ name: 'revealed_at', type: 'datetime', precision: 3 })
  revealedAt: Date;
}
