import type { DataSource } from 'typeorm';
import type { RentalStatus } from './rental-status.js';

/** One line of an owner's rentals list (the Telegram bot's /rentals). */
export interface OwnerRentalRow {
  id: string;
  status: RentalStatus;
  created_at: Date;
  hourly_price_minor: string | number;
  gpu_model: string | null;
  deployment_id: string | null;
  deployment_status: RentalStatus | null;
  offer_name: string | null;
  key_name: string | null;
  key_prefix: string | null;
  failure_reason: string | null;
}

/** The account's most recent rentals, newest first, with what the owner needs to recognise them. */
export function recentRentalsOf(ds: DataSource, accountId: string, limit: number): Promise<OwnerRentalRow[]> {
  return ds.query(
    `SELECT o.id, o.status, o.created_at, o.hourly_price_minor, o.gpu_model, o.failure_reason,
            d.id AS deployment_id, d.status AS deployment_status, f.name AS offer_name,
            k.name AS key_name, k.prefix AS key_prefix
       FROM orders o
       LEFT JOIN deployments d ON d.order_id = o.id
       LEFT JOIN offers f ON f.id = COALESCE(d.offer_id, o.offer_id)
       LEFT JOIN api_keys k ON k.id = o.key_id
      WHERE o.account_id = ?
      ORDER BY o.created_at DESC, o.id DESC
      LIMIT ?`,
    [accountId, limit],
  );
}

/** A deployment's status and rental id, if it belongs to the account. */
export async function deploymentOfAccount(ds: DataSource, deploymentId: string, accountId: string): Promise<{ status: RentalStatus; order_id: string } | null> {
  const rows: { status: RentalStatus; order_id: string }[] = await ds.query('SELECT status, order_id FROM deployments WHERE id = ? AND account_id = ?', [deploymentId, accountId]);
  return rows[0] ?? null;
}
