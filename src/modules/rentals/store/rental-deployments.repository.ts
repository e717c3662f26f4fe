import type { Executor } from '../../../db/mysql-store.js';
import type { RentalStatus } from '../state/rental-status.js';
import type { DeploymentAttempt } from './deployment-attempt.entity.js';
import type { Deployment } from './deployment.entity.js';
import {
  assignAttempt,
  assignFirstCandidate,
  cancelledUnpaidOrders,
  clearInstance,
  deploymentIn,
  deploymentOfOrder,
  deploymentsUnchangedSince,
  failedAfterUse,
  failedWithReversalPending,
  findDeployment,
  insertAttempt,
  labelsOfDeploymentsIn,
  lastAttempt,
  lockDeployment,
  overdueDeployments,
  pinHostKey,
  readCardOrder,
  recordAttemptOutcome,
  recordFailedVerification,
  recordInstance,
  recordSshAddress,
  recordUsable,
  reservingRentals,
  setLastCheckDetail,
  setMeteredUsage,
  setPhase,
  storeSshKey,
  terminatedWithDetailPrefix,
  type AttemptAssignment,
  type CardOrderRow,
  type ReservingRow,
} from './deployments.repository.js';
import { lockingManagerOf, managerOf, sqlOf, transactionOf } from './rentals-executor.repository.js';

// The deployments and create-attempts parts of the rentals aggregate (rentals.repository.ts),
// over the statements of deployments.repository.ts.

/** `deployments` rows, statuses aside (see {@link RentalStateRepository}). */
export interface DeploymentsRepository {
  /** Deployment `id`, or null. Entity read. */
  find(id: string): Promise<Deployment | null>;
  /** Deployment `id`; rejects when there is none. Entity read. */
  get(id: string): Promise<Deployment>;
  /** The deployment of order `orderId`, or null (a card order not yet admitted has none). Entity read. */
  ofOrder(orderId: string): Promise<Deployment | null>;
  /** Deployment `id` locked FOR UPDATE until the transaction ends; null when there is none. Entity read, in a transaction only. */
  lock(id: string): Promise<Deployment | null>;
  /** Stores the SSH key pair (private half sealed) unless one is stored already: the first key written stays. Entity write. */
  storeSshKey(
    id: string,
    key: Pick<Deployment, 'sshPublicKey' | 'sshPrivateKeyEnc' | 'sshKeyKid'>,
    at: Date,
  ): Promise<void>;
  /** Where the instance answers SSH, kept as soon as the provider says. Entity write. */
  recordSshAddress(id: string, ssh: { host: string; port: number; user: string }): Promise<void>;
  /** Pins the machine's host key fingerprint unless one is pinned already; true when this call pinned it. */
  pinHostKey(id: string, fingerprint: string): Promise<boolean>;
  /** The first moment the machine let the check in (the first one stays), while provisioning; answers `at`. */
  recordUsable(id: string, at: Date): Promise<Date>;
  /** When the machines of key `keyId`'s FAILED rentals that had worked first let the check in, after `since`, newest first. */
  failedAfterUse(keyId: string, since: Date, limit: number): Promise<Date[]>;
  /** The provider instance that runs (or ran) the deployment. Entity write. */
  recordInstance(id: string, instanceId: string, at: Date): Promise<void>;
  /** One more destruction check that did not verify, and why. Entity write. */
  recordFailedVerification(id: string, verifyAttempts: number, detail: string, at: Date): Promise<void>;
  /** The outcome of the last destruction check or clean-up, as shown to the operator. Entity write. */
  setLastCheckDetail(id: string, detail: string): Promise<void>;
  /** Points the deployment at its newest attempt (and, metered, the price of the offer it tries). Entity write. */
  assignAttempt(id: string, patch: AttemptAssignment): Promise<void>;
  /** The usage charged so far and the moment it runs to, and how much of it is posted up to when. Entity write. */
  setMeteredUsage(
    id: string,
    usage: Pick<Deployment, 'usageMinor' | 'meteredUntil' | 'postedUsageMinor' | 'postedUntil'> &
      Partial<Pick<Deployment, 'trafficMinor' | 'postedTrafficMinor'>>,
    at: Date,
  ): Promise<void>;
  /** The deployments in `statuses` whose status has not changed since before `cutoff`. */
  unchangedSince(statuses: readonly RentalStatus[], cutoff: Date): Promise<{ id: string; status: RentalStatus }[]>;
  /** FAILED deployments whose order's reversal is still PENDING, failed before `cutoff`. */
  failedWithReversalPending(cutoff: Date): Promise<string[]>;
  /** ACTIVE deployments whose end is at or before `now`. */
  overdue(now: Date): Promise<string[]>;
  /** TERMINATED deployments whose last check detail starts with `detailPrefix`, with their instance's label and provider. */
  terminatedWithDetailPrefix(
    detailPrefix: string,
  ): Promise<{ id: string; label: string | null; providerId: string | null }[]>;
  /** The account's metered rentals in a reserving status, with their keys. One statement. */
  reserving(accountId: string): Promise<ReservingRow[]>;
  /** A card order's deployment status and cancel request; with `lock`, locked FOR UPDATE (in a transaction only). */
  cardOrder(orderId: string, lock: boolean): Promise<CardOrderRow | null>;
  /** Unpaid card orders whose owners asked to terminate them (only `orderId`'s, given), oldest request first. */
  cancelledUnpaidOrders(limit: number, orderId: string | null): Promise<string[]>;
  /** Puts the deployment in provisioning `phase`; `phase_since` moves only when the phase changes. */
  setPhase(id: string, phase: string, at: Date): Promise<void>;
  /** Forgets the instance of an attempt given up on, so the next attempt starts clean. Entity write. */
  clearInstance(id: string, at: Date): Promise<void>;
  /** A rental that waited for capacity runs its first candidate, at its price, and leaves its phase. Entity write. */
  assignFirstCandidate(
    id: string,
    first: { id: string; provider: string; pricePerHourMinor: number },
    at: Date,
  ): Promise<void>;
}

/** `deployment_attempts`: one row per provider create call, written before the call. */
export interface DeploymentAttemptsRepository {
  /** The deployment's newest attempt on record, or null. Entity read. */
  last(deploymentId: string): Promise<DeploymentAttempt | null>;
  /** Writes a new attempt row; `attempt.id` is set to the row's id. Entity write. */
  insert(attempt: DeploymentAttempt): Promise<void>;
  /** Records what came of attempt `id` (outcome, detail, instance, retry time). Entity write. */
  recordOutcome(id: string, fields: Partial<DeploymentAttempt>): Promise<void>;
  /** Those of `labels` carried by an attempt of a deployment in one of `statuses`. */
  labelsIn(labels: readonly string[], statuses: readonly RentalStatus[]): Promise<Set<string>>;
}

export class MysqlDeploymentsRepository implements DeploymentsRepository {
  constructor(private readonly sql: Executor) {}

  async find(id: string): Promise<Deployment | null> {
    return findDeployment(managerOf(this.sql), id);
  }

  async get(id: string): Promise<Deployment> {
    return deploymentIn(managerOf(this.sql), id);
  }

  async ofOrder(orderId: string): Promise<Deployment | null> {
    return deploymentOfOrder(managerOf(this.sql), orderId);
  }

  async lock(id: string): Promise<Deployment | null> {
    return lockDeployment(lockingManagerOf(this.sql), id);
  }

  async storeSshKey(
    id: string,
    key: Pick<Deployment, 'sshPublicKey' | 'sshPrivateKeyEnc' | 'sshKeyKid'>,
    at: Date,
  ): Promise<void> {
    return storeSshKey(managerOf(this.sql), id, key, at);
  }

  async recordSshAddress(id: string, ssh: { host: string; port: number; user: string }): Promise<void> {
    return recordSshAddress(managerOf(this.sql), id, ssh);
  }

  async pinHostKey(id: string, fingerprint: string): Promise<boolean> {
    return pinHostKey(this.sql, id, fingerprint);
  }

  async recordUsable(id: string, at: Date): Promise<Date> {
    return recordUsable(this.sql, id, at);
  }

  async failedAfterUse(keyId: string, since: Date, limit: number): Promise<Date[]> {
    return failedAfterUse(sqlOf(this.sql), keyId, since, limit);
  }

  async recordInstance(id: string, instanceId: string, at: Date): Promise<void> {
    return recordInstance(managerOf(this.sql), id, instanceId, at);
  }

  async recordFailedVerification(id: string, verifyAttempts: number, detail: string, at: Date): Promise<void> {
    return recordFailedVerification(managerOf(this.sql), id, verifyAttempts, detail, at);
  }

  async setLastCheckDetail(id: string, detail: string): Promise<void> {
    return setLastCheckDetail(managerOf(this.sql), id, detail);
  }

  async assignAttempt(id: string, patch: AttemptAssignment): Promise<void> {
    return assignAttempt(managerOf(this.sql), id, patch);
  }

  async setMeteredUsage(
    id: string,
    usage: Pick<Deployment, 'usageMinor' | 'meteredUntil' | 'postedUsageMinor' | 'postedUntil'> &
      Partial<Pick<Deployment, 'trafficMinor' | 'postedTrafficMinor'>>,
    at: Date,
  ): Promise<void> {
    return setMeteredUsage(managerOf(this.sql), id, usage, at);
  }

  async unchangedSince(
    statuses: readonly RentalStatus[],
    cutoff: Date,
  ): Promise<{ id: string; status: RentalStatus }[]> {
    return deploymentsUnchangedSince(this.sql, statuses, cutoff);
  }

  async failedWithReversalPending(cutoff: Date): Promise<string[]> {
    return failedWithReversalPending(this.sql, cutoff);
  }

  async overdue(now: Date): Promise<string[]> {
    return overdueDeployments(this.sql, now);
  }

  async terminatedWithDetailPrefix(
    detailPrefix: string,
  ): Promise<{ id: string; label: string | null; providerId: string | null }[]> {
    return terminatedWithDetailPrefix(this.sql, detailPrefix);
  }

  async reserving(accountId: string): Promise<ReservingRow[]> {
    return reservingRentals(sqlOf(this.sql), accountId);
  }

  async cardOrder(orderId: string, lock: boolean): Promise<CardOrderRow | null> {
    return readCardOrder(lock ? transactionOf(this.sql) : this.sql, orderId, lock);
  }

  async cancelledUnpaidOrders(limit: number, orderId: string | null): Promise<string[]> {
    return cancelledUnpaidOrders(this.sql, limit, orderId);
  }

  async setPhase(id: string, phase: string, at: Date): Promise<void> {
    return setPhase(this.sql, id, phase, at);
  }

  async clearInstance(id: string, at: Date): Promise<void> {
    return clearInstance(managerOf(this.sql), id, at);
  }

  async assignFirstCandidate(
    id: string,
    first: { id: string; provider: string; pricePerHourMinor: number },
    at: Date,
  ): Promise<void> {
    return assignFirstCandidate(managerOf(this.sql), id, first, at);
  }
}

export class MysqlDeploymentAttemptsRepository implements DeploymentAttemptsRepository {
  constructor(private readonly sql: Executor) {}

  async last(deploymentId: string): Promise<DeploymentAttempt | null> {
    return lastAttempt(managerOf(this.sql), deploymentId);
  }

  async insert(attempt: DeploymentAttempt): Promise<void> {
    return insertAttempt(managerOf(this.sql), attempt);
  }

  async recordOutcome(id: string, fields: Partial<DeploymentAttempt>): Promise<void> {
    return recordAttemptOutcome(managerOf(this.sql), id, fields);
  }

  async labelsIn(labels: readonly string[], statuses: readonly RentalStatus[]): Promise<Set<string>> {
    return labelsOfDeploymentsIn(this.sql, labels, statuses);
  }
}
