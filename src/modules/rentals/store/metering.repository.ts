import type { Executor } from '../../../db/mysql-store.js';
import { ACCOUNT_OF_ROW, KEY_AND_ACCOUNT_LIMITS, KEY_OF_ROW } from '../../accounts/account-joins.repository.js';
import { readMinor } from '../../../db/columns.js';
import { derivedTable } from '../../../db/derived-table.js';
import type { Sql } from '../../../db/sql.js';
import type { Deployment } from './deployment.entity.js';
import type { DeploymentBillingModel, RentalStatus } from '../state/rental-status.js';

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
}

/**
 * Locks deployments `ids` FOR UPDATE in id order (so two sweeps never deadlock) and reads their
 * metering. The statement is issued before anything is awaited, so it travels with whatever the
 * caller issues in the same tick.
 */
export async function lockMeteringStates(sql: Sql, ids: readonly string[]): Promise<MeteringState[]> {
  const rows: MeteringRow[] = await sql.query(
    `SELECT id, status, account_id, key_id, order_id, hourly_price_minor, spend_cap_minor, usage_minor, started_at, metered_until, posted_usage_minor,
            posted_until, terminate_requested_at, ends_at
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
    ['id', 'prev_until', 'amount', 'new_until', 'posted', 'posted_until'],
    charges.map((c) => [c.id, c.prevUntil, c.amount, c.newUntil, c.postedUsage, c.postedUntil]),
  );
  const res: { affectedRows: number } = await sql.query(
    `UPDATE deployments d JOIN (${t.sql}) v ON v.id = d.id
            SET d.usage_minor = d.usage_minor + v.amount, d.metered_until = CAST(v.new_until AS DATETIME(3)),
                d.posted_usage_minor = v.posted, d.posted_until = CAST(v.posted_until AS DATETIME(3))
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
    budget_limit_minor: string | number;
    net_spent_minor: string | number;
    balance_minor: string | number;
  }[] = await ds.query(
    `SELECT d.id, d.spend_cap_minor, d.usage_minor, ${KEY_AND_ACCOUNT_LIMITS}
         FROM deployments d ${KEY_OF_ROW} ${ACCOUNT_OF_ROW}
        WHERE d.status = 'ACTIVE' AND d.billing_model IN (?)`,
    [billingModels],
  );
  return rows.map((r) => ({
    id: r.id,
    spendCapMinor: r.spend_cap_minor === null ? null : readMinor(r.spend_cap_minor),
    usageMinor: readMinor(r.usage_minor),
    budgetLimitMinor: readMinor(r.budget_limit_minor),
    netSpentMinor: readMinor(r.net_spent_minor),
    balanceMinor: readMinor(r.balance_minor),
  }));
}
