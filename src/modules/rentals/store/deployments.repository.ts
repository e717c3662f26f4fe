import type { DataSource, EntityManager } from 'typeorm';
import type { Executor } from '../../../db/mysql-store.js';
import { readMinor } from '../../../db/columns.js';
import { Deployment } from './deployment.entity.js';
import { DeploymentAttempt } from './deployment-attempt.entity.js';
import type { Sql } from '../../../db/sql.js';
import {
  METERED_BILLING_MODELS,
  PROVISIONING_STATUSES,
  RESERVING_STATUSES,
  type RentalStatus,
} from '../state/rental-status.js';

// The reads and writes of `deployments` and `deployment_attempts`: the jobs' reads of one
// deployment, the create attempts, termination's bookkeeping (the metering sweep's statements are
// metering.repository.ts), the reconciler's sweeps, admission's reservations and a card order's payment state. Statuses
// are written only by rental-state.ts; which statuses a sweep looks for is the caller's rule,
// passed in as a set of rental-status.ts. (The customer's reads are rental-reads.repository.ts.)

/** Deployment `id`, or null. */
export function findDeployment(ds: DataSource | EntityManager, id: string): Promise<Deployment | null> {
  return ds.getRepository(Deployment).findOneBy({ id });
}

/** The deployment of order `orderId`, or null (a card order not yet admitted has none). */
export function deploymentOfOrder(ds: DataSource | EntityManager, orderId: string): Promise<Deployment | null> {
  return ds.getRepository(Deployment).findOneBy({ orderId });
}

/** Deployment `id` locked FOR UPDATE until the caller's transaction ends; null when there is none. */
export function lockDeployment(m: EntityManager, id: string): Promise<Deployment | null> {
  return m
    .getRepository(Deployment)
    .createQueryBuilder('d')
    .setLock('pessimistic_write')
    .where('d.id = :id', { id })
    .getOne();
}

/** Stores the deployment's SSH key pair (private half sealed) unless one is stored already: the first key written stays. */
export async function storeSshKey(
  ds: DataSource | EntityManager,
  id: string,
  key: Pick<Deployment, 'sshPublicKey' | 'sshPrivateKeyEnc' | 'sshKeyKid'>,
  at: Date,
): Promise<void> {
  await ds
    .createQueryBuilder()
    .update(Deployment)
    .set({
      sshPublicKey: key.sshPublicKey,
      sshPrivateKeyEnc: key.sshPrivateKeyEnc,
      sshKeyKid: key.sshKeyKid,
      updatedAt: at,
    })
    .where('id = :id AND ssh_private_key_enc IS NULL', { id })
    .execute();
}

/** Where the instance answers SSH, kept as soon as the provider says: termination probes it. */
export async function recordSshAddress(
  ds: DataSource | EntityManager,
  deploymentId: string,
  ssh: { host: string; port: number; user: string },
): Promise<void> {
  await ds
    .getRepository(Deployment)
    .update({ id: deploymentId }, { sshHost: ssh.host, sshPort: ssh.port, sshUser: ssh.user });
}

/**
 * Pins the machine's host key fingerprint unless one is pinned already (the first one stays:
 * a machine showing another later is not the machine we know). True when this call pinned it.
 */
export async function pinHostKey(ds: Executor, deploymentId: string, fingerprint: string): Promise<boolean> {
  const res: { affectedRows: number } = await ds.query(
    `UPDATE deployments SET ssh_host_key = ? WHERE id = ? AND ssh_host_key IS NULL`,
    [fingerprint, deploymentId],
  );
  return res.affectedRows === 1;
}

/** The first moment a machine running the rental's settings let the check in (the first one stays), while it is provisioning. */
export async function recordUsable(ds: Executor, deploymentId: string, at: Date): Promise<Date> {
  await ds.query(`UPDATE deployments SET usable_at = ? WHERE id = ? AND usable_at IS NULL AND status IN (?)`, [
    at,
    deploymentId,
    PROVISIONING_STATUSES,
  ]);
  return at;
}

/**
 * When the machines of key `keyId`'s FAILED rentals that had worked for their renter before
 * failing (`usable_at` set) first let the check in, after `since`, newest first, at most
 * `limit`. One range of `ix_deployments_key_failed_usable`, whatever else the key ran.
 */
export async function failedAfterUse(m: Sql, keyId: string, since: Date, limit: number): Promise<Date[]> {
  const rows: { usable_at: Date }[] = await m.query(
    `SELECT usable_at FROM deployments WHERE key_id = ? AND status = 'FAILED' AND usable_at > ? ORDER BY usable_at DESC LIMIT ?`,
    [keyId, since, limit],
  );
  return rows.map((r) => r.usable_at);
}

/** The provider instance that runs (or ran) the deployment. */
export async function recordInstance(
  ds: DataSource | EntityManager,
  deploymentId: string,
  instanceId: string,
  at: Date,
): Promise<void> {
  await ds.getRepository(Deployment).update({ id: deploymentId }, { instanceId, updatedAt: at });
}

/** One more destruction check that did not verify, and why. */
export async function recordFailedVerification(
  ds: DataSource | EntityManager,
  deploymentId: string,
  verifyAttempts: number,
  detail: string,
  at: Date,
): Promise<void> {
  await ds
    .getRepository(Deployment)
    .update({ id: deploymentId }, { verifyAttempts, lastCheckDetail: detail, updatedAt: at });
}

/** The outcome of the last destruction check or clean-up, as shown to the operator (and read back by the reconciler). */
export async function setLastCheckDetail(
  ds: DataSource | EntityManager,
  deploymentId: string,
  detail: string,
): Promise<void> {
  await ds.getRepository(Deployment).update({ id: deploymentId }, { lastCheckDetail: detail });
}

/** What a deployment records of the create attempt it is on. */
export type AttemptAssignment = Pick<Deployment, 'attempt' | 'label' | 'offerId' | 'providerId' | 'updatedAt'> &
  Partial<Pick<Deployment, 'hourlyPriceMinor' | 'trafficUpPriceMicro' | 'trafficDownPriceMicro'>>;

/** Points the deployment at its newest attempt (and, metered, the price of the offer it tries), in the caller's transaction. */
export async function assignAttempt(m: EntityManager, deploymentId: string, patch: AttemptAssignment): Promise<void> {
  await m.update(Deployment, { id: deploymentId }, patch);
}

/** The newest attempt on record; the attempts table is written before each create call. */
export function lastAttempt(ds: DataSource | EntityManager, deploymentId: string): Promise<DeploymentAttempt | null> {
  return ds.getRepository(DeploymentAttempt).findOne({ where: { deploymentId }, order: { attempt: 'DESC' } });
}

/** Writes a new attempt row in the caller's transaction; `attempt.id` is set to the row's id. */
export async function insertAttempt(m: EntityManager, attempt: DeploymentAttempt): Promise<void> {
  await m.insert(DeploymentAttempt, attempt);
}

/** Records what came of attempt `id` (outcome, detail, instance, retry time). */
export async function recordAttemptOutcome(
  ds: DataSource | EntityManager,
  id: string,
  fields: Partial<DeploymentAttempt>,
): Promise<void> {
  await ds.getRepository(DeploymentAttempt).update({ id }, fields);
}

/** The usage charged so far and the moment it runs to, and how much of it is posted up to when, in the caller's transaction. */
export async function setMeteredUsage(
  m: EntityManager,
  deploymentId: string,
  usage: Pick<Deployment, 'usageMinor' | 'meteredUntil' | 'postedUsageMinor' | 'postedUntil'> &
    Partial<Pick<Deployment, 'trafficMinor' | 'postedTrafficMinor'>>,
  at: Date,
): Promise<void> {
  await m.update(Deployment, { id: deploymentId }, { ...usage, updatedAt: at });
}

/** The deployments in `statuses` whose status has not changed since before `cutoff` (an unstamped change counts from the last update). */
export function deploymentsUnchangedSince(
  ds: Executor,
  statuses: readonly RentalStatus[],
  cutoff: Date,
): Promise<{ id: string; status: RentalStatus }[]> {
  return ds.query(
    `SELECT id, status FROM deployments WHERE status IN (?) AND COALESCE(status_changed_at, updated_at) < ?`,
    [statuses, cutoff],
  );
}

/** FAILED deployments whose order's reversal is still PENDING, failed before `cutoff`. */
export async function failedWithReversalPending(ds: Executor, cutoff: Date): Promise<string[]> {
  const rows: { id: string }[] = await ds.query(
    `SELECT d.id FROM deployments d JOIN orders o ON o.id = d.order_id
        WHERE d.status = 'FAILED' AND o.reversal_status = 'PENDING' AND COALESCE(d.status_changed_at, d.updated_at) < ?`,
    [cutoff],
  );
  return rows.map((r) => r.id);
}

/** ACTIVE deployments (any billing model: a purchase's end or a lease's) whose end is at or before `now`. */
export async function overdueDeployments(ds: Executor, now: Date): Promise<string[]> {
  const rows: { id: string }[] = await ds.query(
    `SELECT id FROM deployments WHERE status = 'ACTIVE' AND ends_at IS NOT NULL AND ends_at <= ?`,
    [now],
  );
  return rows.map((r) => r.id);
}

/** TERMINATED deployments whose last check detail starts with `detailPrefix`, with the label and provider of their instance. */
export async function terminatedWithDetailPrefix(
  ds: Executor,
  detailPrefix: string,
): Promise<{ id: string; label: string | null; providerId: string | null }[]> {
  const rows: { id: string; label: string | null; provider_id: string | null }[] = await ds.query(
    `SELECT id, label, provider_id FROM deployments WHERE status = 'TERMINATED' AND last_check_detail LIKE ?`,
    [`${detailPrefix}%`],
  );
  return rows.map((r) => ({ id: r.id, label: r.label, providerId: r.provider_id }));
}

/** Those of `labels` carried by an attempt of a deployment in one of `statuses`. */
export async function labelsOfDeploymentsIn(
  ds: Executor,
  labels: readonly string[],
  statuses: readonly RentalStatus[],
): Promise<Set<string>> {
  const rows: { label: string }[] = await ds.query(
    `SELECT a.label FROM deployment_attempts a JOIN deployments d ON d.id = a.deployment_id
          WHERE a.label IN (?) AND d.status IN (?)`,
    [labels, statuses],
  );
  return new Set(rows.map((r) => r.label));
}

// Admission's and termination's reads in the caller's transaction.

/** The deployment as it stands in the caller's transaction; it must exist. */
export function deploymentIn(m: EntityManager, id: string): Promise<Deployment> {
  return m.getRepository(Deployment).findOneByOrFail({ id });
}

/**
 * What a live metered rental of an account holds in reserve is computed from, and how far its
 * metering has come (`meteredUntil`, with what bounds its charge): admission's look at both.
 */
export interface ReservingRow extends Pick<Deployment, 'meteredUntil' | 'endsAt' | 'terminateRequestedAt'> {
  keyId: string;
  hourlyPriceMinor: number;
  spendCapMinor: number | null;
  usageMinor: number;
}

/** The account's metered rentals in a reserving status, with their keys. One statement. */
export async function reservingRentals(m: Sql, accountId: string): Promise<ReservingRow[]> {
  const rows: {
    key_id: string;
    hourly_price_minor: string | number;
    spend_cap_minor: string | number | null;
    usage_minor: string | number;
    metered_until: Date | null;
    ends_at: Date | null;
    terminate_requested_at: Date | null;
  }[] = await m.query(
    `SELECT hourly_price_minor, spend_cap_minor, usage_minor, key_id, metered_until, ends_at, terminate_requested_at FROM deployments
      WHERE account_id = ? AND billing_model IN (?) AND status IN (?)`,
    [accountId, METERED_BILLING_MODELS, RESERVING_STATUSES],
  );
  return rows.map((r) => ({
    keyId: r.key_id,
    hourlyPriceMinor: readMinor(r.hourly_price_minor),
    spendCapMinor: r.spend_cap_minor === null ? null : readMinor(r.spend_cap_minor),
    usageMinor: readMinor(r.usage_minor),
    meteredUntil: r.metered_until,
    endsAt: r.ends_at,
    terminateRequestedAt: r.terminate_requested_at,
  }));
}

// A card order's deployment as its payment sees it.

/** A card order's deployment status and whether its owner asked to terminate it (which, unpaid, cancels it). */
export interface CardOrderRow {
  status: RentalStatus;
  cancelled: boolean;
}

/**
 * Reads a card order's deployment, locked for the caller's decision with `lock` (needs a
 * transaction). The rentals module records a terminate request on an unpaid order without
 * changing its status, so the request is read here too.
 */
export async function readCardOrder(m: Executor, orderId: string, lock: boolean): Promise<CardOrderRow | null> {
  const rows: { status: RentalStatus; terminate_requested_at: Date | null }[] = await m.query(
    lock
      ? `SELECT status, terminate_requested_at FROM deployments WHERE order_id = ? FOR UPDATE`
      : `SELECT status, terminate_requested_at FROM deployments WHERE order_id = ?`,
    [orderId],
  );
  return rows[0] ? { status: rows[0].status, cancelled: rows[0].terminate_requested_at !== null } : null;
}

/** Unpaid card orders whose owners asked to terminate them, oldest request first. */
export async function cancelledUnpaidOrders(ds: Executor, limit: number, orderId: string | null): Promise<string[]> {
  const rows: { order_id: string }[] = await ds.query(
    `SELECT order_id FROM deployments
      WHERE status = 'AWAITING_PAYMENT' AND terminate_requested_at IS NOT NULL AND (? IS NULL OR order_id = ?)
      ORDER BY terminate_requested_at LIMIT ?`,
    [orderId, orderId, limit],
  );
  return rows.map((r) => r.order_id);
}

// Provisioning's progress, shown to the customer.

/** Puts the deployment in `phase`; `phase_since` moves only when the phase changes (assigned first, so it compares the old phase). */
export async function setPhase(ds: Executor, id: string, phase: string, at: Date): Promise<void> {
  await ds.query(
    `UPDATE deployments SET phase_since = CASE WHEN phase <=> ? THEN phase_since ELSE ? END, phase = ? WHERE id = ?`,
    [phase, at, phase, id],
  );
}

/** Forgets the instance of an attempt given up on (destroyed), so the next attempt starts clean (its machine's host key too). */
export async function clearInstance(ds: DataSource | EntityManager, id: string, at: Date): Promise<void> {
  await ds.getRepository(Deployment).update(
    { id },
    {
      instanceId: null,
      sshHost: null,
      sshPort: null,
      sshUser: null,
      sshHostKey: null,
      usableAt: null,
      updatedAt: at,
    },
  );
}

/** A rental that waited for capacity runs its first candidate, at its price, and leaves its phase. */
export async function assignFirstCandidate(
  m: EntityManager,
  id: string,
  first: { id: string; provider: string; pricePerHourMinor: number },
  at: Date,
): Promise<void> {
  await m.update(
    Deployment,
    { id },
    {
      offerId: first.id,
      providerId: first.provider,
      hourlyPriceMinor: first.pricePerHourMinor,
      phase: null,
      phaseSince: null,
      updatedAt: at,
    },
  );
}
