import type { Store } from '../../../db/store.js';
import type { Repositories } from '../../../repositories.js';
import type { RentalStatus } from '../state/rental-status.js';

/** What the owner's reads of rentals run on. */
export type OwnerRentalStore = Store<Pick<Repositories, 'rentals'>>;

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

/**
 * The account's most recent rentals, newest first, with what the owner needs to recognise them:
 * the page the API lists for an owner key, the machine named by the one rule.
 */
export async function recentRentalsOf(
  store: OwnerRentalStore,
  accountId: string,
  limit: number,
): Promise<OwnerRentalRow[]> {
  const { rows, machines, keys } = await store.read(async ({ rentals: { reads } }) => {
    const { rows } = await reads.page({ kind: 'OWNER', accountId }, limit);
    const [machines, keys] = await Promise.all([reads.machines(rows), reads.keyLabels(rows.map((r) => r.order.keyId))]);
    return { rows, machines, keys };
  });
  return rows.map(({ order: o, deployment: d }, i) => ({
    id: o.id,
    status: o.status,
    created_at: o.createdAt,
    hourly_price_minor: o.hourlyPriceMinor,
    gpu_model: o.gpuModel,
    deployment_id: d?.id ?? null,
    deployment_status: d?.status ?? null,
    offer_name: machines[i].gpuName,
    key_name: keys.get(o.keyId)?.name ?? null,
    key_prefix: keys.get(o.keyId)?.prefix ?? null,
    failure_reason: o.failureReason,
  }));
}

/** A deployment's status and rental id, if it belongs to the account. */
export async function deploymentOfAccount(
  store: OwnerRentalStore,
  deploymentId: string,
  accountId: string,
): Promise<{ status: RentalStatus; order_id: string } | null> {
  const found = await store.read((r) => r.rentals.reads.visibleDeployment({ kind: 'OWNER', accountId }, deploymentId));
  return found ? { status: found.deployment!.status, order_id: found.order.id } : null;
}
