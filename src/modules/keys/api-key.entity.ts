import { Column, Entity, PrimaryColumn } from 'typeorm';
import { csvList, minorUnits } from '../../db/columns.js';

export type KeyKind = 'OWNER' | 'AGENT';
export type Scope = 'read' | 'rent' | 'manage' | 'billing';
export const ALL_SCOPES: Scope[] = ['read', 'rent', 'manage', 'billing'];

@Entity({ name: 'api_keys' })
export class ApiKey {
  @PrimaryColumn({ type: 'char', length: 36 })
  id: string;

  @Column({ name: 'account_id', type: 'char', length: 36 })
  accountId: string;

  @Column({ type: 'varchar', length: 8 })
  kind: KeyKind;

  @Column({ type: 'varchar', length: 100 })
  name: string;

  /** Public, indexed part of the token; shown in listings. */
  @Column({ type: 'char', length: 8 })
  prefix: string;

  /** SHA-256 of the secret part; the raw secret is never stored. */
  @Column({ name: 'secret_hash', type: 'binary', length: 32 })
  secretHash: Buffer;

  @Column({ type: 'varchar', length: 64, transformer: csvList })
  scopes: Scope[];

  @Column({ name: 'max_per_rental_minor', type: 'bigint', transformer: minorUnits })
  maxPerRentalMinor: number;

  @Column({ name: 'budget_limit_minor', type: 'bigint', transformer: minorUnits })
  budgetLimitMinor: number;

  @Column({ name: 'max_concurrent_deployments', type: 'int' })
  maxConcurrentDeployments: number;

  /** Grants operator pages such as the jobs dashboard; only ever set on OWNER keys. */
  @Column({ name: 'is_admin', type: 'boolean' })
  isAdmin: boolean;

  /** How the key came to be: signup, setup_code, authorization, owner, telegram. */
  @Column({ type: 'varchar', length: 32 })
  origin: string;

  /**
   * The OWNER key that issued this key, directly or by approving the authorization session it
   * was exchanged for; null for keys no owner key issued (signup, operator, Telegram). Revoking
   * that owner key revokes this one with it.
   */
  @Column({ name: 'issued_by_key_id', type: 'char', length: 36, nullable: true })
  issuedByKeyId: string | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;

  @Column({ name: 'revoked_at', type: 'datetime', precision: 3, nullable: true })
  revokedAt: Date | null;

  @Column({ name: 'last_used_at', type: 'datetime', precision: 3, nullable: true })
  lastUsedAt: Date | null;

  /** The longest any rental of this key may run, in seconds; null: no such limit. */
  @Column({ name: 'max_rental_seconds', type: 'int', nullable: true })
  maxRentalSeconds: number | null;

  /** A rental of this key whose GPUs stay idle this many minutes is warned, then ended; null: never. */
  @Column({ name: 'idle_terminate_minutes', type: 'int', nullable: true })
  idleTerminateMinutes: number | null;
}
