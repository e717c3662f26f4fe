import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

export type RevealOutcome = 'REVEALED' | 'REFUSED';
/** Why a reveal call was refused. */
export type RevealRefusal = 'NOT_FOUND' | 'NOT_ACTIVE' | 'JSON_BODY' | 'ERROR';

/** Audit row of every credential reveal call by an authenticated key, whether it revealed or not. */
@Entity({ name: 'credential_reveals' })
export class CredentialReveal {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  /** The deployment id as asked for; a refused call may name one that does not exist. */
  @Column({ name: 'deployment_id', type: 'varchar', length: 64 })
  deploymentId: string;

  /** The calling key's account. */
  @Column({ name: 'account_id', type: 'char', length: 36 })
  accountId: string;

  @Column({ name: 'key_id', type: 'char', length: 36 })
  keyId: string;

  @Column({ name: 'request_id', type: 'varchar', length: 128 })
  requestId: string;

  @Column({ type: 'varchar', length: 16 })
  outcome: RevealOutcome;

  @Column({ type: 'varchar', length: 32, nullable: true })
  refusal: RevealRefusal | null;

  @Column({ name: 'called_at', type: 'datetime', precision: 3 })
  calledAt: Date;
}
