import { In, type DataSource, type EntityManager } from 'typeorm';
import type { Executor } from '../../../db/mysql-store.js';
import { ApiKey } from '../../keys/api-key.entity.js';
import { visibleRows, type Viewer } from '../../keys/visibility.js';
import { Offer } from '../../inventory/offer.entity.js';
import { Deployment } from './deployment.entity.js';
import { Order } from './order.entity.js';
import { TERMINAL_STATUSES, type RentalStatus } from '../state/rental-status.js';

// The reads of rentals (orders with their deployments) that the API, the owner bot and the owner
// notifications share, each written once: which rows a viewer sees, which offer names a rental's
// machine, and the newest-first page of an account's or a key's rentals.

/** What a customer reads about the machine behind a rental, from the cached offer it runs (or will try first). */
export interface MachineFacts {
  gpuName: string | null;
  gpuCount: number | null;
  provider: string | null;
}

export const NO_MACHINE: MachineFacts = { gpuName: null, gpuCount: null, provider: null };

/** A rental as its reads load it: the order and, once admission has written it, its deployment. */
export interface RentalRows {
  order: Order;
  deployment: Deployment | null;
}

/**
 * The one rule for the offer that names a rental's machine: the offer its deployment runs or
 * tries now, else the order's offer, else the first candidate admission chose (an intent's
 * deployment that has not been given an offer yet). The API, the bot's /rentals and the owner
 * notifications all name the machine by this rule, so they never name different GPUs.
 */
export function machineOfferId(
  o: Pick<Order, 'offerId' | 'candidateOfferIds'>,
  d: Pick<Deployment, 'offerId'> | null,
): string | null {
  return d?.offerId ?? o.offerId ?? o.candidateOfferIds?.[0] ?? null;
}

/** Where a page of rentals starts: after the row with this (createdAt, id), the list's sort key. */
export interface RentalPosition {
  createdAt: Date;
  id: string;
}

/** The rentals' reads on one DataSource or manager; the rentals aggregate's `reads` part runs them (rental-state-reads.repository.ts). */
export class RentalReads {
  /** On a DataSource, or on a transaction's manager (reads inside it must not wait for a second pooled connection). */
  constructor(private readonly ds: DataSource | EntityManager) {}

  /** The machine of each rental, in order, named by {@link machineOfferId} from the offer cache (rows are never deleted). */
  async machines(rentals: readonly RentalRows[]): Promise<MachineFacts[]> {
    const offerIds = rentals.map((r) => machineOfferId(r.order, r.deployment));
    const ids = [...new Set(offerIds.filter((x): x is string => x !== null))];
    const offers = ids.length
      ? await this.ds
          .getRepository(Offer)
          .find({ select: { id: true, name: true, gpuCount: true, provider: true }, where: { id: In(ids) } })
      : [];
    const byId = new Map(offers.map((o) => [o.id, { gpuName: o.name, gpuCount: o.gpuCount, provider: o.provider }]));
    return offerIds.map((id) => (id !== null && byId.get(id)) || NO_MACHINE);
  }

  /** The machine of each deployment's rental, by deployment id; deployments unknown are left out. */
  async machinesOfDeployments(deploymentIds: readonly string[]): Promise<Map<string, MachineFacts>> {
    if (deploymentIds.length === 0) return new Map();
    const deployments = await this.ds.getRepository(Deployment).findBy({ id: In([...deploymentIds]) });
    const rentals = await this.withOrders(deployments);
    const machines = await this.machines(rentals);
    return new Map(rentals.map((r, i) => [r.deployment!.id, machines[i]]));
  }

  /** Rental `id` with its deployment, if `viewer` may see it. */
  async visibleRental(viewer: Viewer, id: string): Promise<RentalRows | null> {
    const order = await this.ds.getRepository(Order).findOneBy({ ...visibleRows(viewer), id });
    return order ? this.withDeployment(order) : null;
  }

  /** Rental `id` with its deployment, whoever asks: for a replay the idempotency record already tied to its key. */
  async rental(id: string): Promise<RentalRows> {
    return this.withDeployment(await this.ds.getRepository(Order).findOneByOrFail({ id }));
  }

  /**
   * `order` with its deployment, on one side of any status change. A transition mirrors the
   * deployment's status onto its order in one transaction, but these are two reads: an order read
   * before its commit and a deployment read after it disagree (FAILED with no failure code, say),
   * so the order is read again when they do.
   */
  private async withDeployment(order: Order): Promise<RentalRows> {
    const deployment = await this.ds.getRepository(Deployment).findOneBy({ orderId: order.id });
    if (!deployment || deployment.status === order.status) return { order, deployment };
    return { order: (await this.ds.getRepository(Order).findOneBy({ id: order.id })) ?? order, deployment };
  }

  /**
   * The rentals `viewer` sees, newest first, `limit` of them after `after` (from the start
   * without it), with their deployments; `more` tells whether older rows follow. The API's list
   * and the bot's /rentals both read this page.
   */
  async page(viewer: Viewer, limit: number, after?: RentalPosition): Promise<{ rows: RentalRows[]; more: boolean }> {
    const qb = this.ds.getRepository(Order).createQueryBuilder('o').where(visibleRows(viewer));
    if (after)
      qb.andWhere('(o.created_at < :at OR (o.created_at = :at AND o.id < :id))', { at: after.createdAt, id: after.id });
    const orders = await qb
      .orderBy('o.created_at', 'DESC')
      .addOrderBy('o.id', 'DESC')
      .take(limit + 1)
      .getMany();
    const page = orders.slice(0, limit);
    const deployments = page.length
      ? await this.ds.getRepository(Deployment).findBy({ orderId: In(page.map((o) => o.id)) })
      : [];
    const byOrder = new Map(deployments.map((d) => [d.orderId, d]));
    return {
      rows: page.map((order) => ({ order, deployment: byOrder.get(order.id) ?? null })),
      more: orders.length > limit,
    };
  }

  /** Name and prefix of each key id given (the key that started a rental), by id. */
  async keyLabels(keyIds: readonly string[]): Promise<Map<string, { name: string; prefix: string }>> {
    const ids = [...new Set(keyIds)];
    if (ids.length === 0) return new Map();
    const keys = await this.ds
      .getRepository(ApiKey)
      .find({ select: { id: true, name: true, prefix: true }, where: { id: In(ids) } });
    return new Map(keys.map((k) => [k.id, { name: k.name, prefix: k.prefix }]));
  }

  /** The deployments `viewer` sees, newest first, with their orders. */
  async visibleDeployments(viewer: Viewer, limit: number): Promise<RentalRows[]> {
    const deployments = await this.ds
      .getRepository(Deployment)
      .find({ where: visibleRows(viewer), order: { createdAt: 'DESC', id: 'ASC' }, take: limit });
    return this.withOrders(deployments);
  }

  /** Deployment `id` with its order, if `viewer` may see it. */
  async visibleDeployment(viewer: Viewer, id: string): Promise<RentalRows | null> {
    const d = await this.ds.getRepository(Deployment).findOneBy({ ...visibleRows(viewer), id });
    return d ? (await this.withOrders([d]))[0] : null;
  }

  /** Each deployment with its order, in the order given (every deployment has one). */
  private async withOrders(deployments: Deployment[]): Promise<RentalRows[]> {
    if (deployments.length === 0) return [];
    const orders = await this.ds.getRepository(Order).findBy({ id: In(deployments.map((d) => d.orderId)) });
    const byId = new Map(orders.map((o) => [o.id, o]));
    return deployments.map((d) => ({ order: byId.get(d.orderId)!, deployment: d }));
  }
}

/**
 * Deployment `id` as `viewer` may see it, locked FOR UPDATE until the caller's transaction ends;
 * null when it does not exist for this viewer. (FOR UPDATE rather than a shared lock: TypeORM
 * spells that FOR SHARE, which MariaDB lacks.)
 */
export function lockDeploymentFor(m: EntityManager, viewer: Viewer, id: string): Promise<Deployment | null> {
  return m
    .getRepository(Deployment)
    .findOne({ where: { ...visibleRows(viewer), id }, lock: { mode: 'pessimistic_write' } });
}

/**
 * Like {@link lockDeploymentFor}, but `id` may also be the rental (order) id: a rental has one
 * deployment, and callers that kept only the rental id act on it under the same access rules.
 */
export async function lockDeploymentOrRentalFor(
  m: EntityManager,
  viewer: Viewer,
  id: string,
): Promise<Deployment | null> {
  return (
    (await lockDeploymentFor(m, viewer, id)) ??
    m
      .getRepository(Deployment)
      .findOne({ where: { ...visibleRows(viewer), orderId: id }, lock: { mode: 'pessimistic_write' } })
  );
}

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
export async function unfinishedRentalsOfKeys(
  ds: Executor,
  accountId: string,
  keyIds: readonly string[],
): Promise<KeyRentalRow[]> {
  const rows: { id: string; order_id: string; key_id: string; status: RentalStatus }[] = await ds.query(
    `SELECT id, order_id, key_id, status FROM deployments WHERE account_id = ? AND key_id IN (?) AND status NOT IN (?) ORDER BY created_at, id`,
    [accountId, keyIds, TERMINAL_STATUSES],
  );
  return rows.map((r) => ({ deploymentId: r.id, orderId: r.order_id, keyId: r.key_id, status: r.status }));
}
