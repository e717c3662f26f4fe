import type { DataSource } from 'typeorm';
import { TERMINAL_STATUSES, type RentalStatus } from '../rentals/rental-status.js';

// What a key revocation reports back: the deployments the revoked keys started that have not
// ended, which run on after the keys are gone unless their owner terminates them.

/** An unfinished deployment of a revoked key. */
export interface KeyRentalRow {
  deploymentId: string;
  orderId: string;
  keyId: string;
  status: RentalStatus;
}

/** The deployments of account `accountId` that the keys given started and that have not ended (terminated or failed), oldest first. */
export async function unfinishedRentalsOfKeys(ds: DataSource, accountId: string, keyIds: readonly string[]): Promise<KeyRentalRow[]> {
  const rows: { id: string; order_id: string; key_id: string; status: RentalStatus }[] = await ds.query(
    `SELECT id, order_id, key_id, status FROM deployments WHERE account_id = ? AND key_id IN (?) AND status NOT IN (?) ORDER BY created_at, id`,
    [accountId, keyIds, TERMINAL_STATUSES],
  );
  return rows.map((r) => ({ deploymentId: r.id, orderId: r.order_id, keyId: r.key_id, status: r.status }));
}
