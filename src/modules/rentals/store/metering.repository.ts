import type { Executor } from '../../../db/mysql-store.js';
import { ACCOUNT_OF_ROW, KEY_AND_ACCOUNT_LIMITS, KEY_OF_ROW } from '../../accounts/account-joins.repository.js';
import { readMinor } from '../../../db/columns.js';
import { derivedTable } from '../../../db/derived-table.js';
import type { Sql } from '../../../db/sql.js';
import type { Deployment } from './deployment.entity.js';
import { LIVE_STATUSES, type DeploymentBillingModel, type RentalStatus } from '../state/rental-status.js';

// The metering sweep's statements on `deployments`: the one read of every metered rental, the
// chunk's lock read and its set-based charge, and the limits' read. A chunk's statements travel
// in two round trips before its COMMIT (test/rentals/metering-round-trips.test.ts): the reads and
// writes here never await anything before issuing their statement.

/** A metered rental as the sweep's first read sees it: enough to cut chunks by account. */
export type SweptDeployment = Pick<Deployment, 'id' | 'accountId'>;

/**
 * The started deployments of `billingModels` in `statuses`, sorted by account then id; a plain
 * read, no locks, of the columns `ix_deployments_metered` covers, so it reads that index alone
 * whatever else the table holds. Their metering moment is not among them: every sweep moves it,
 * and an index holding it would be rewritten for every rental at every sweep; it is read under lock.
 */
export async function meteredDeployments(
  ds: Executor,
  billingModels: readonly DeploymentBillingModel[],
  statuses: readonly RentalStatus[],
): Promise<SweptDeployment[]> {
  const rows: { id: string; account_id: string }[] = await ds.query(
    `SELECT id, account_id FROM deployments
        WHERE billing_model IN (?) AND status IN (?) AND started_at IS NOT NULL
        ORDER BY account_id, id`,
    [billingModels, statuses],
  );
  return rows.map((r) => ({ id: r.id, accountId: r.account_id }));
}

/** A deployment's metering as read under lock: everything accrual and posting need. */
export type MeteringState = Pick<
  Deployment,
  | 'id'
  | 'status'
  | 'accountId'
  | 'keyId'
  | 'orderId'
  | 'hourlyPriceMinor'
  | 'spendCapMinor'
  | 'usageMinor'
  | 'startedAt'
  | 'meteredUntil'
  | 'postedUsageMinor'
  | 'postedUntil'
  | 'terminateRequestedAt'
  | 'endsAt'
  | 'trafficUpPriceMicro'
  | 'trafficDownPriceMicro'
  | 'trafficUpBytes'
  | 'trafficDownBytes'
  | 'trafficMinor'
  | 'postedTrafficMinor'
>;

interface MeteringRow {
  id: string;
  status: RentalStatus;
  account_id: string;
  key_id: string;
  order_id: string;
  hourly_price_minor: string | number;
  spend_cap_minor: string | number | null;
  usage_minor: string | number;
  started_at: Date | null;
  metered_until: Date | null;
  posted_usage_minor: string | number;
  posted_until: Date | null;
  terminate_requested_at: Date | null;
  ends_at: Date | null;
  traffic_up_price_micro: number | null;
  traffic_down_price_micro: number | null;
  traffic_up_bytes: string | number;
  traffic_down_bytes: string | number;
  traffic_minor: string | number;
  posted_traffic_minor: string | number;
}

/**
 * Locks deployments `ids` FOR UPDATE in id order (so two sweeps never deadlock) and reads their
 * metering. The statement is issued before anything is awaited, so it travels with whatever the
 * caller issues in the same tick.
 */
export async function lockMeteringStates(sql: Sql, ids: readonly string[]): Promise<MeteringState[]> {
  const rows: MeteringRow[] = await sql.query(
    `SELECT id, status, account_id, key_id, order_id, hourly_price_minor, spend_cap_minor, usage_minor, started_at, metered_until, posted_usage_minor,
            posted_until, terminate_requested_at, ends_at, traffic_up_price_micro, traffic_down_price_micro, traffic_up_bytes,
            traffic_down_bytes, traffic_minor, posted_traffic_minor
       FROM deployments WHERE id IN (?) ORDER BY id FOR UPDATE`,
    [ids],
  );
  return rows.map((r) => ({
    id: r.id,
    status: r.status,
    accountId: r.account_id,
    keyId: r.key_id,
    orderId: r.order_id,
    hourlyPriceMinor: readMinor(r.hourly_price_minor),
    spendCapMinor: r.spend_cap_minor === null ? null : readMinor(r.spend_cap_minor),
    usageMinor: readMinor(r.usage_minor),
    startedAt: r.started_at,
    meteredUntil: r.metered_until,
    postedUsageMinor: readMinor(r.posted_usage_minor),
    postedUntil: r.posted_until,
    terminateRequestedAt: r.terminate_requested_at,
    endsAt: r.ends_at,
    trafficUpPriceMicro: r.traffic_up_price_micro === null ? null : Number(r.traffic_up_price_micro),
    trafficDownPriceMicro: r.traffic_down_price_micro === null ? null : Number(r.traffic_down_price_micro),
    trafficUpBytes: readMinor(r.traffic_up_bytes),
    trafficDownBytes: readMinor(r.traffic_down_bytes),
    trafficMinor: readMinor(r.traffic_minor),
    postedTrafficMinor: readMinor(r.posted_traffic_minor),
  }));
}

/** Usage to add to one deployment, from the metering moment it was read at to a new one, and its posted usage after. */
export interface UsageCharge {
  id: string;
  prevUntil: Date;
  amount: number;
  newUntil: Date;
  /** The deployment's posted usage and the moment it runs to, as the charge leaves them. */
  postedUsage: number;
  postedUntil: Date | null;
  /** Traffic to add, and the deployment's posted traffic as the charge leaves it. */
  traffic: number;
  postedTraffic: number;
}

/**
 * Adds each charge's usage, moves its metering moment on and sets its posted usage, in one
 * statement, only where the moment is still the one it was read at; answers the number of
 * deployments charged. `updated_at` stays: a charge is not a change of the rental (the
 * reconciler and the notifications read `updated_at` as the last change of a row without a
 * status stamp), and leaving it spares every charged row an update of `ix_deployments_status`.
 */
export async function chargeUsage(sql: Sql, charges: readonly UsageCharge[]): Promise<number> {
  const t = derivedTable(
    ['id', 'prev_until', 'amount', 'new_until', 'posted', 'posted_until', 'traffic', 'posted_traffic'],
    charges.map((c) => [
      c.id,
      c.prevUntil,
      c.amount,
      c.newUntil,
      c.postedUsage,
      c.postedUntil,
      c.traffic,
      c.postedTraffic,
    ]),
  );
  const res: { affectedRows: number } = await sql.query(
    `UPDATE deployments d JOIN (${t.sql}) v ON v.id = d.id
            SET d.usage_minor = d.usage_minor + v.amount, d.metered_until = CAST(v.new_until AS DATETIME(3)),
                d.posted_usage_minor = v.posted, d.posted_until = CAST(v.posted_until AS DATETIME(3)),
                d.traffic_minor = d.traffic_minor + v.traffic, d.posted_traffic_minor = v.posted_traffic
          WHERE d.metered_until = CAST(v.prev_until AS DATETIME(3))`,
    t.params,
  );
  return res.affectedRows;
}

/** The counters a running metered rental's limits are checked against. */
export interface MeteredLimits {
  id: string;
  spendCapMinor: number | null;
  usageMinor: number;
  trafficMinor: number;
  /** Of the key that started the rental. */
  budgetLimitMinor: number;
  netSpentMinor: number;
  /** Of the rental's account. */
  balanceMinor: number;
}

/**
 * The ACTIVE deployments of `billingModels` with their limits' counters: the key's net spend and
 * the account's balance, each a single column kept in step by LedgerService. A plain read, no locks,
 * in one statement: the key's and account's part is the accounts aggregate's (account-joins.repository.ts).
 */
export async function activeMeteredLimits(
  ds: Executor,
  billingModels: readonly DeploymentBillingModel[],
): Promise<MeteredLimits[]> {
  const rows: {
    id: string;
    spend_cap_minor: string | number | null;
    usage_minor: string | number;
    traffic_minor: string | number;
    budget_limit_minor: string | number;
    net_spent_minor: string | number;
    balance_minor: string | number;
  }[] = await ds.query(
    `SELECT d.id, d.spend_cap_minor, d.usage_minor, d.traffic_minor, ${KEY_AND_ACCOUNT_LIMITS}
         FROM deployments d ${KEY_OF_ROW} ${ACCOUNT_OF_ROW}
        WHERE d.status = 'ACTIVE' AND d.billing_model IN (?)`,
    [billingModels],
  );
  return rows.map((r) => ({
    id: r.id,
    spendCapMinor: r.spend_cap_minor === null ? null : readMinor(r.spend_cap_minor),
    usageMinor: readMinor(r.usage_minor),
    trafficMinor: readMinor(r.traffic_minor),
    budgetLimitMinor: readMinor(r.budget_limit_minor),
    netSpentMinor: readMinor(r.net_spent_minor),
    balanceMinor: readMinor(r.balance_minor),
  }));
}

/** One instance's traffic counters as a status poll read them, by the label of the attempt that made it. */
export interface TrafficReading {
  label: string;
  upBytes: number;
  downBytes: number;
}

/**
 * Records traffic counters read from instances, in one statement: each deployment keeps the
 * highest reading of each counter (a counter that went back, an instance that restarted its
 * count, never charges twice), and only a deployment still running whose offer bills traffic, at
 * its current attempt's label, takes one. Answers how many deployments took a reading. No money
 * moves here: the metering sweep charges the growth.
 */
export async function recordTrafficReadings(
  sql: Executor,
  readings: readonly TrafficReading[],
  at: Date,
): Promise<number> {
  if (readings.length === 0) return 0;
  const t = derivedTable(
    ['label', 'up_bytes', 'down_bytes'],
    readings.map((x) => [x.label, Math.trunc(x.upBytes), Math.trunc(x.downBytes)]),
  );
  const res: { affectedRows: number } = await sql.query(
    `UPDATE deployments d JOIN (${t.sql}) v ON v.label = d.label
        SET d.traffic_up_bytes = GREATEST(d.traffic_up_bytes, v.up_bytes),
            d.traffic_down_bytes = GREATEST(d.traffic_down_bytes, v.down_bytes), d.traffic_read_at = ?
      WHERE d.traffic_up_price_micro IS NOT NULL AND d.status IN (?)`,
    [...t.params, at, LIVE_STATUSES],
  );
  return res.affectedRows;
}
