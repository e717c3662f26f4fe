import { DataSource, EntityManager } from 'typeorm';
import type { Executor } from '../../db/mysql-store.js';
import type { KeyLimits } from '../keys/key-limits.js';
import { AgentAuthorization } from './agent-authorization.entity.js';

// The only code that reads or writes `agent_authorizations` rows: the sessions agents open and
// owners approve, and the setup codes owners mint. Codes are looked up by their SHA-256 hash;
// the services hash them and keep every rule about status and expiry.

/** The limits and the approving owner a session takes on when it is approved. */
export interface Approval extends KeyLimits {
  accountId: string;
  approvedByKeyId: string | null;
  name: string;
  approvedAt: Date;
}

/** The limits of a session nobody approved yet: none, until its owner sets them. */
export const NO_LIMITS_YET = {
  maxPerRentalMinor: null,
  budgetLimitMinor: null,
  maxConcurrentDeployments: null,
  maxRentalSeconds: null,
  idleTerminateMinutes: null,
} as const satisfies Record<keyof KeyLimits, null>;

/** The limits an approved session or a minted setup code carries: set when it was approved or minted. */
export function approvedLimits(row: AgentAuthorization): KeyLimits {
  return {
    maxPerRentalMinor: row.maxPerRentalMinor!,
    budgetLimitMinor: row.budgetLimitMinor!,
    maxConcurrentDeployments: row.maxConcurrentDeployments!,
    maxRentalSeconds: row.maxRentalSeconds,
    idleTerminateMinutes: row.idleTerminateMinutes,
  };
}

/**
 * A new row's fields; a setup code an owner mints has no requested name, and only a remote MCP
 * client's session an OAuth interaction: they leave those to the columns' default (null).
 */
export type NewAuthorization = Omit<AgentAuthorization, 'requestedName' | 'oauthInteractionUid'> &
  Partial<Pick<AgentAuthorization, 'requestedName' | 'oauthInteractionUid'>>;

/** Writes a new session or setup code and answers the row as written. */
export async function insertAuthorization(
  ds: DataSource | EntityManager,
  fields: NewAuthorization,
): Promise<AgentAuthorization> {
  const repo = ds.getRepository(AgentAuthorization);
  const row = repo.create(fields);
  await repo.insert(row);
  return row;
}

/** The session with this approval code hash, read without a lock; null when there is none. */
export function authorizationByApprovalCode(
  ds: DataSource | EntityManager,
  approvalCodeHash: Buffer,
): Promise<AgentAuthorization | null> {
  return ds.getRepository(AgentAuthorization).findOneBy({ approvalCodeHash });
}

/** Locks the session with this approval code hash FOR UPDATE, for the approval decision. */
export function lockByApprovalCode(m: EntityManager, approvalCodeHash: Buffer): Promise<AgentAuthorization | null> {
  return m
    .getRepository(AgentAuthorization)
    .createQueryBuilder('a')
    .setLock('pessimistic_write')
    .where('a.approval_code_hash = :h', { h: approvalCodeHash })
    .getOne();
}

/** Locks the session or setup code with this setup code hash FOR UPDATE, for the exchange decision. */
export function lockBySetupCode(m: EntityManager, setupCodeHash: Buffer): Promise<AgentAuthorization | null> {
  return m
    .getRepository(AgentAuthorization)
    .createQueryBuilder('a')
    .setLock('pessimistic_write')
    .where('a.setup_code_hash = :h', { h: setupCodeHash })
    .getOne();
}

/** Locks FOR UPDATE the session answering OAuth interaction `uid`, for the decision to issue its key. */
export function lockByOAuthInteraction(m: EntityManager, uid: string): Promise<AgentAuthorization | null> {
  return m
    .getRepository(AgentAuthorization)
    .createQueryBuilder('a')
    .setLock('pessimistic_write')
    .where('a.oauth_interaction_uid = :uid', { uid })
    .getOne();
}

/** Records session `id` APPROVED by an owner, with the limits its key will carry. */
export async function markApproved(m: EntityManager, id: string, approval: Approval): Promise<void> {
  const patch: Partial<AgentAuthorization> = { status: 'APPROVED', ...approval };
  await m.update(AgentAuthorization, { id }, patch);
}

/** Records session or setup code `id` EXCHANGED for key `issuedKeyId`: it issues no other. */
export async function markExchanged(m: EntityManager, id: string, issuedKeyId: string, at: Date): Promise<void> {
  await m.update(AgentAuthorization, { id }, { status: 'EXCHANGED', exchangedAt: at, issuedKeyId });
}

/**
 * Locks FOR UPDATE what OWNER key `keyId` approved or minted that is not exchanged yet (status
 * APPROVED), and answers their ids.
 */
export async function lockUnexchangedApprovalsOf(m: Executor, keyId: string): Promise<string[]> {
  const rows: { id: string }[] = await m.query(
    `SELECT id FROM agent_authorizations WHERE approved_by_key_id = ? AND status = 'APPROVED' FOR UPDATE`,
    [keyId],
  );
  return rows.map((r) => r.id);
}

/** Marks the sessions and setup codes given REVOKED: their setup codes stop working. */
export async function markAuthorizationsRevoked(m: Executor, ids: readonly string[]): Promise<void> {
  if (ids.length) await m.query(`UPDATE agent_authorizations SET status = 'REVOKED' WHERE id IN (?)`, [ids]);
}

/**
 * The rows of `agent_authorizations`: part of the accounts aggregate
 * (AccountsRepository.authorizations). Codes are given as their SHA-256 hashes; the rules about
 * status and expiry are the services'.
 */
export interface AgentAuthorizationsRepository {
  /** Writes a new session or setup code and answers the row as written (no requested name: null). Stands alone. */
  insert(fields: NewAuthorization): Promise<AgentAuthorization>;
  /** The session with this approval code hash, as last committed; null when there is none. */
  byApprovalCode(approvalCodeHash: Buffer): Promise<AgentAuthorization | null>;
  /** Locks FOR UPDATE the session with this approval code hash; null when there is none. In a transaction only. */
  lockByApprovalCode(approvalCodeHash: Buffer): Promise<AgentAuthorization | null>;
  /** Locks FOR UPDATE the session or setup code with this setup code hash; null when there is none. In a transaction only. */
  lockBySetupCode(setupCodeHash: Buffer): Promise<AgentAuthorization | null>;
  /** The session answering OAuth interaction `uid`, as last committed; null when there is none. */
  byOAuthInteraction(uid: string): Promise<AgentAuthorization | null>;
  /** Locks FOR UPDATE the session answering OAuth interaction `uid`; null when there is none. In a transaction only. */
  lockByOAuthInteraction(uid: string): Promise<AgentAuthorization | null>;
  /** Records session `id` APPROVED with the approval's owner and limits; in the transaction that locked it. */
  markApproved(id: string, approval: Approval): Promise<void>;
  /** Records `id` EXCHANGED for key `issuedKeyId` at `at`; in the transaction that locked it and made the key. */
  markExchanged(id: string, issuedKeyId: string, at: Date): Promise<void>;
  /**
   * Locks FOR UPDATE what OWNER key `keyId` approved or minted that is not exchanged yet (status
   * APPROVED) and answers their ids; in a transaction, after the account and key locks.
   */
  lockUnexchangedApprovalsOf(keyId: string): Promise<string[]>;
  /** Marks the rows given REVOKED (none: nothing): their setup codes stop working. */
  markRevoked(ids: readonly string[]): Promise<void>;
}

/** TypeORM's entity calls run on the DataSource or a transaction's manager, not in a pipelined transaction. */
function managerOf(sql: Executor): EntityManager {
  if (sql instanceof DataSource) return sql.manager;
  if (sql instanceof EntityManager) return sql;
  throw new Error('agent authorizations are not read or written in a pipelined transaction');
}

/** The FOR UPDATE reads need a transaction's manager. */
function transactionOf(sql: Executor): EntityManager {
  if (sql instanceof EntityManager) return sql;
  throw new Error('an agent authorization is locked only inside a transaction');
}

export class MysqlAgentAuthorizationsRepository implements AgentAuthorizationsRepository {
  constructor(private readonly sql: Executor) {}

  insert(fields: NewAuthorization): Promise<AgentAuthorization> {
    return insertAuthorization(managerOf(this.sql), fields);
  }

  byApprovalCode(approvalCodeHash: Buffer): Promise<AgentAuthorization | null> {
    return authorizationByApprovalCode(managerOf(this.sql), approvalCodeHash);
  }

  lockByApprovalCode(approvalCodeHash: Buffer): Promise<AgentAuthorization | null> {
    return lockByApprovalCode(transactionOf(this.sql), approvalCodeHash);
  }

  lockBySetupCode(setupCodeHash: Buffer): Promise<AgentAuthorization | null> {
    return lockBySetupCode(transactionOf(this.sql), setupCodeHash);
  }

  byOAuthInteraction(uid: string): Promise<AgentAuthorization | null> {
    return managerOf(this.sql).getRepository(AgentAuthorization).findOneBy({ oauthInteractionUid: uid });
  }

  lockByOAuthInteraction(uid: string): Promise<AgentAuthorization | null> {
    return lockByOAuthInteraction(transactionOf(this.sql), uid);
  }

  markApproved(id: string, approval: Approval): Promise<void> {
    return markApproved(managerOf(this.sql), id, approval);
  }

  markExchanged(id: string, issuedKeyId: string, at: Date): Promise<void> {
    return markExchanged(managerOf(this.sql), id, issuedKeyId, at);
  }

  lockUnexchangedApprovalsOf(keyId: string): Promise<string[]> {
    return lockUnexchangedApprovalsOf(this.sql, keyId);
  }

  markRevoked(ids: readonly string[]): Promise<void> {
    return markAuthorizationsRevoked(this.sql, ids);
  }
}
