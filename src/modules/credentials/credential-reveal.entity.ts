import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

export type RevealOutcome = 'REVEALED' | 'REFUSED';
/** Why a reveal call was refused. */
export type RevealRefusal = 'NOT_FOUND' | 'NOT_ACTIVE' | 'JSON_BODY' | 'ERROR';

/**
 * Audit of credential reveal calls by authenticated keys: a row per reveal, and a row per key,
 * refusal reason and minute that counts the refused calls (the first call's deployment id and
 * request id, and the last call's time).
 */
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

  /** A refusal's minute: refused calls of one key and reason in one minute share a row. Null for a reveal. */
  @Column({ name: 'refusal_window', type: 'datetime', nullable: true })
  refusalWindow: Date | null;

  /** Calls the row stands for: 1 for a reveal, the count of refused calls in the window otherwise. */
  @Column({ name: 'refused_calls', type: 'int', default: 1 })
  refusedCalls: number;

  /** The first call the row stands for. */
  @Column({ name: 'called_at', type: 'datetime', precision: 3 })
  calledAt: Date;

  /** The latest refused call of the window. */
  @Column({ name: 'last_called_at', type: 'datetime', precision: 3, nullable: true })
  lastCalledAt: Date | null;
}
