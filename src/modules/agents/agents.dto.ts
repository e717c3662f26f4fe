import type { KeyDto } from '../accounts/accounts.dto.js';
import type { Scope } from '../keys/api-key.entity.js';
import type { RentalStatus } from '../rentals/state/rental-status.js';

/** Optional body of POST /api/v1/agent-authorizations; the call may also be sent without a body. */
export interface BeginAuthorizationRequest {
  /**
   * What the agent calls itself: shown to the owner on the approval page and used as its key's
   * name unless the owner names the key when approving.
   * @minLength 1
   * @maxLength 100
   */
  name?: string;
}

export interface BeginAuthorizationResponse {
  authorizationId: string;
  /** The name the agent gave, or null. */
  name: string | null;
  /**
   * Seconds to wait between exchange polls; polling at this pace for the whole session stays
   * within the per-address rate limit. Each 409 AGENT_AUTHORIZATION_PENDING also says it in
   * `Retry-After`.
   */
  pollIntervalSeconds: number;
  /** Private: the agent keeps it and polls the exchange call with it. Shown once. */
  setupCode: string;
  /** Public: the agent hands this page to its owner, who approves there or in Telegram. */
  approvalUrl: string;
  /** @format date-time */
  expiresAt: string;
}

export interface ApproveAuthorizationRequest {
  /**
   * The public approval code (last path segment of the approval URL).
   * @pattern ^gpa_[A-Za-z0-9_-]{43}$
   */
  approvalCode: string;
  /**
   * Per-rental spending cap in cents.
   * @isInt
   * @minimum 500
   * @maximum 10000000
   */
  maxPerRentalMinor: number;
  /**
   * Total net-spending cap in cents over the key's lifetime.
   * @isInt
   * @minimum 500
   * @maximum 10000000
   */
  budgetLimitMinor: number;
  /**
   * Maximum concurrent deployments.
   * @isInt
   * @minimum 1
   * @maximum 100
   */
  maxConcurrentDeployments: number;
  /**
   * The longest any rental of the key may run, in seconds (60 to 2592000, 30 days). Rentals asking
   * for a longer lease are refused, and rentals without one end after this long. Null or absent:
   * no such limit.
   * @isInt
   * @minimum 60
   * @maximum 2592000
   */
  maxRentalSeconds?: number | null;
  /**
   * Minutes (1 to 1440) a rental of the key may keep every GPU under 5 % utilisation before it
   * gets `rental.idle_warning`; still idle IDLE_GRACE_SECONDS later (default 600), it is ended
   * with termination reason IDLE. The agent cannot change it. Null or absent: never.
   * @isInt
   * @minimum 1
   * @maximum 1440
   */
  idleTerminateMinutes?: number | null;
  /**
   * Label of the agent key; defaults to the name the agent gave when it began the session.
   * @minLength 1
   * @maxLength 100
   */
  name?: string;
}

export interface ApproveAuthorizationResponse {
  authorizationId: string;
  status: 'APPROVED';
  /** The agent must exchange its setup code before this time. @format date-time */
  exchangeBefore: string;
  maxPerRentalMinor: number;
  budgetLimitMinor: number;
  maxConcurrentDeployments: number;
  /** The longest any rental of the key may run, in seconds; null: no such limit. */
  maxRentalSeconds: number | null;
  /** Minutes of idle GPUs after which the key's rentals are warned, then ended; null: never. */
  idleTerminateMinutes: number | null;
}

export interface ExchangeSetupCodeRequest {
  /**
   * The private setup code from the bot or from beginning an authorization.
   * @pattern ^gps_[A-Za-z0-9_-]{43}$
   */
  setupCode: string;
}

/** Carries the raw token once. */
export interface AgentKeyIssued {
  key: KeyDto;
  /** `gpr_<prefix>.<secret>`; shown once. Null on an identical replay of an agent-keys request. */
  token: string | null;
}

export interface IssueAgentKeyRequest {
  /**
   * @minLength 1
   * @maxLength 100
   */
  name: string;
  /**
   * A non-empty subset of the calling owner key's scopes.
   * @minItems 1
   */
  scopes: Scope[];
  /**
   * @isInt
   * @minimum 1
   * @maximum 100000000
   */
  maxPerRentalMinor: number;
  /**
   * @isInt
   * @minimum 1
   * @maximum 1000000000
   */
  budgetLimitMinor: number;
  /**
   * @isInt
   * @minimum 1
   * @maximum 1000
   */
  maxConcurrentDeployments: number;
  /**
   * The longest any rental of the key may run, in seconds (60 to 2592000, 30 days). Rentals asking
   * for a longer lease are refused, and rentals without one end after this long. Null or absent:
   * no such limit.
   * @isInt
   * @minimum 60
   * @maximum 2592000
   */
  maxRentalSeconds?: number | null;
  /**
   * Minutes (1 to 1440) a rental of the key may keep every GPU under 5 % utilisation before it
   * gets `rental.idle_warning`; still idle IDLE_GRACE_SECONDS later (default 600), it is ended
   * with termination reason IDLE. The agent cannot change it. Null or absent: never.
   * @isInt
   * @minimum 1
   * @maximum 1440
   */
  idleTerminateMinutes?: number | null;
}

/** A rental started by a revoked key that had not finished when the key was revoked. */
export interface KeyRental {
  rentalId: string;
  deploymentId: string;
  /** The key that started it. */
  keyId: string;
  /** Its status after this call: TERMINATING (or still AWAITING_PAYMENT) once terminated with the key. */
  status: RentalStatus;
}

/** A key revoked, and what became of the rentals it had started. */
export interface RevokedKey {
  id: string;
  /** @format date-time */
  revokedAt: string;
  /**
   * The key's rentals not yet TERMINATED or FAILED. Revoking stops the key, not its machines:
   * without `terminateRentals=true` they keep running and are charged until terminated.
   */
  liveRentals: KeyRental[];
  /** True when this call terminated `liveRentals` with the key (`terminateRentals=true`). */
  rentalsTerminated: boolean;
  /** What becomes of `liveRentals`, and what to do about them. */
  rentalsNote: string;
}

/**
 * An OWNER key revoked, with everything it let in that was revoked with it. Its `liveRentals`
 * are those of the owner key and of every agent key it let in, revoked now or before.
 */
export interface RevokedOwnerKey extends RevokedKey {
  /** Agent keys it issued or that were exchanged for sessions it approved, revoked by this call. */
  revokedAgentKeyIds: string[];
  /** Authorization sessions it approved that had not been exchanged; they can no longer be. */
  revokedAuthorizationIds: string[];
}
