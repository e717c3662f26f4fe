import type { EntityManager } from 'typeorm';
import { readMinor } from '../../db/columns.js';
import { insertEntity } from '../../db/entity-rows.js';
import type { Sql } from '../../db/sql.js';
import { Deployment } from './deployment.entity.js';
import { Order } from './order.entity.js';
import { METERED_BILLING_MODELS, RESERVING_STATUSES } from './rental-status.js';

// Rows of one rental read and written in the caller's transaction: admission's order and the
// live metered rentals it reserves against, and the deployment a request has just changed.
// (rental-state.repository.ts writes the deployment row and every status.)

/** Writes a new order row. */
export async function insertOrder(m: Sql, order: Partial<Order>): Promise<void> {
  await insertEntity(m, Order, order);
}

/** The deployment as it stands in the caller's transaction; it must exist. */
export function deploymentIn(m: EntityManager, id: string): Promise<Deployment> {
  return m.getRepository(Deployment).findOneByOrFail({ id });
}

/** What a live metered rental of an account holds in reserve is computed from. */
export interface ReservingRow {
  keyId: string;
  hourlyPriceMinor: number;
  spendCapMinor: number | null;
  usageMinor: number;
}

/** The account's metered rentals in a reserving status, with their keys. One statement. */
export async function reservingRentals(m: Sql, accountId: string): Promise<ReservingRow[]> {
  const rows: { key_id: string; hourly_price_minor: string | number; spend_cap_minor: string | number | null; usage_minor: string | number }[] = await m.query(
    `SELECT hourly_price_minor, spend_cap_minor, usage_minor, key_id FROM deployments
      WHERE account_id = ? AND billing_model IN (?) AND status IN (?)`,
    [accountId, METERED_BILLING_MODELS, RESERVING_STATUSES],
  );
  return rows.map((r) => ({
    keyId: r.key_id,
    hourlyPriceMinor: readMinor(r.hourly_price_minor),
    spendCapMinor: r.spend_cap_minor === null ? null : readMinor(r.spend_cap_minor),
    usageMinor: readMinor(r.usage_minor),
  }));
}
