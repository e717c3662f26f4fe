import type { DataSource } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import { Deployment } from './deployment.entity.js';
import { Order } from './order.entity.js';
import { factsOf, machineFacts, machineOfferId, rentalPage, toDeploymentDto, toRentalDto } from './rental-views.js';
import type { DeploymentDto, RentalDto } from './rentals.dto.js';

/**
 * The customer's reads of rentals and deployments, apart from admission so that neither grows
 * with the other. Agent keys see only their own rows, owner keys every row of their account.
 */
export class RentalReadsService {
  constructor(private readonly ds: DataSource) {}

  /** One rental; agent keys see only their own, owner keys every rental of their account. */
  async get(principal: Principal, rentalId: string): Promise<RentalDto> {
    const order = await this.ds.getRepository(Order).findOneBy(visibleTo(principal, { id: rentalId.toLowerCase() }));
    if (!order) throw notFound('rental');
    const deployment = await this.ds.getRepository(Deployment).findOneBy({ orderId: order.id });
    return this.describe(order, deployment);
  }

  /** The caller's rentals, newest first, a page at a time (see rental-views.ts for the cursor). */
  async list(principal: Principal, limit: number, cursor: string | undefined): Promise<{ rentals: RentalDto[]; nextCursor: string | null }> {
    const { rows, nextCursor } = await rentalPage(this.ds, principal, limit, cursor);
    const facts = await machineFacts(this.ds, rows.map((r) => machineOfferId(r.order, r.deployment)));
    return { rentals: rows.map((r) => toRentalDto(r.order, r.deployment, factsOf(facts, machineOfferId(r.order, r.deployment)))), nextCursor };
  }

  /**
   * A rental by id with no visibility check, for answering a replay of the request that
   * created it (the idempotency record already tied it to the caller's key).
   */
  async rental(rentalId: string): Promise<RentalDto> {
    const order = await this.ds.getRepository(Order).findOneByOrFail({ id: rentalId });
    return this.describe(order, await this.ds.getRepository(Deployment).findOneBy({ orderId: rentalId }));
  }

  /** The caller's deployments, newest first. */
  async listDeployments(principal: Principal, limit: number): Promise<DeploymentDto[]> {
    const deployments = await this.ds.getRepository(Deployment).find({
      where: visibleTo(principal, {}),
      order: { createdAt: 'DESC', id: 'ASC' },
      take: limit,
    });
    return this.describeDeployments(deployments);
  }

  async getDeployment(principal: Principal, deploymentId: string): Promise<DeploymentDto> {
    const d = await this.ds.getRepository(Deployment).findOneBy(visibleTo(principal, { id: deploymentId.toLowerCase() }));
    if (!d) throw notFound('deployment');
    return (await this.describeDeployments([d]))[0];
  }

  private async describe(order: Order, deployment: Deployment | null): Promise<RentalDto> {
    const facts = await machineFacts(this.ds, [machineOfferId(order, deployment)]);
    return toRentalDto(order, deployment, factsOf(facts, machineOfferId(order, deployment)));
  }

  /** Deployments as the API shows them: funding from their orders, the machine from the offer cache. */
  private async describeDeployments(deployments: Deployment[]): Promise<DeploymentDto[]> {
    if (deployments.length === 0) return [];
    const rows: { id: string; funding: 'CREDITS' | 'CARD'; offer_id: string | null }[] = await this.ds.query(
      `SELECT id, funding, offer_id FROM orders WHERE id IN (?)`,
      [deployments.map((d) => d.orderId)],
    );
    const orders = new Map(rows.map((r) => [r.id, r]));
    // An unpaid card order's deployment has no offer yet; its order names the one it will run.
    const offerOf = (d: Deployment) => d.offerId ?? orders.get(d.orderId)?.offer_id ?? null;
    const facts = await machineFacts(this.ds, deployments.map(offerOf));
    return deployments.map((d) => toDeploymentDto(d, orders.get(d.orderId)?.funding ?? 'CREDITS', factsOf(facts, offerOf(d))));
  }
}

/** Row filter: agent keys see their own rows, owner keys their account's. */
function visibleTo<T extends object>(principal: Principal, where: T): T & ({ keyId: string } | { accountId: string }) {
  return principal.kind === 'AGENT' ? { ...where, keyId: principal.keyId } : { ...where, accountId: principal.accountId };
}

/** What a caller sees for a row it may not see or that does not exist: the same answer. */
export function notFound(what: 'rental' | 'deployment'): AppError {
  return new AppError('NOT_FOUND', `No such ${what} for this key.`);
}
