import { Column, Entity, PrimaryColumn } from 'typeorm';
import { minorUnits } from '../../db/columns.js';

/** SESSION: opened by an agent, approved by its owner. TELEGRAM: a setup code an owner minted. */
export type AuthorizationOrigin = 'SESSION' | 'TELEGRAM';
/**
 * Stored states; expiry is derived from `expiresAt` at read time. REVOKED: approved, then its
 * approving owner key was revoked before the agent exchanged it; it can no longer be exchanged.
 */
export type AuthorizationStatus = 'PENDING' | 'APPROVED' | 'EXCHANGED' | 'REVOKED';

/** One way for an agent to obtain a key; exchanged at most once. Codes are stored as hashes only. */
@Entity({ name: 'agent_authorizations' })
export class AgentAuthorization {
  @PrimaryColumn({ type: 'char', length: 36 })
  id: string;

  @Column({ type: 'varchar', length: 16 })
  origin: AuthorizationOrigin;

  @Column({ type: 'varchar', length: 16 })
  status: AuthorizationStatus;

  @Column({ name: 'setup_code_hash', type: 'binary', length: 32 })
  setupCodeHash: Buffer;

  @Column({ name: 'approval_code_hash', type: 'binary', length: 32, nullable: true })
  approvalCodeHash: Buffer | null;

  /** The owner's account; set when approved or minted. */
  @Column({ name: 'account_id', type: 'char', length: 36, nullable: true })
  accountId: string | null;

  /** The OWNER key that approved or minted it; null when done through the Telegram bot. */
  @Column({ name: 'approved_by_key_id', type: 'char', length: 36, nullable: true })
  approvedByKeyId: string | null;

  @Column({ type: 'varchar', length: 100, nullable: true })
  name: string | null;

  /** The name the agent gave itself when it began the session (untrusted text; escape it). */
  @Column({ name: 'requested_name', type: 'varchar', length: 100, nullable: true })
  requestedName: string | null;

  @Column({ name: 'max_per_rental_minor', type: 'bigint', nullable: true, transformer: minorUnits })
  maxPerRentalMinor: number | null;

  @Column({ name: 'budget_limit_minor', type: 'bigint', nullable: true, transformer: minorUnits })
  budgetLimitMinor: number | null;

  @Column({ name: 'max_concurrent_deployments', type: 'int', nullable: true })
  maxConcurrentDeployments: number | null;

  @Column({ name: 'issued_key_id', type: 'char', length: 36, nullable: true })
  issuedKeyId: string | null;

  @Column({ name: 'expires_at', type: 'datetime', precision: 3 })
  expiresAt: Date;

  @Column({ name: 'approved_at', type: 'datetime', precision: 3, nullable: true })
  approvedAt: Date | null;

  @Column({ name: 'exchanged_at', type: 'datetime', precision: 3, nullable: true })
  exchangedAt: Date | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;

  /** The longest rental the key to be issued may run, in seconds; null: no such limit. */
  @Column({ name: 'max_rental_seconds', type: 'int', nullable: true })
  maxRentalSeconds: number | null;

  /** Minutes of idle GPUs after which the issued key's rentals are warned, then ended; null: never. */
  @Column({ name: 'idle_terminate_minutes', type: 'int', nullable: true })
  idleTerminateMinutes: number | null;

  /** The OAuth interaction (a remote MCP client's /authorize) this session answers; null for the API's sessions. */
  @Column({ name: 'oauth_interaction_uid', type: 'varchar', length: 64, nullable: true })
  oauthInteractionUid: string | null;
}
