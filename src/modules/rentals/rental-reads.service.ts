import type { DataSource } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import type { Principal } from '../keys/principal.js';
import { decodeCursor, encodeCursor, toDeploymentDto, toRentalDto } from './rental-views.js';
import type { DeploymentDto, RentalDto } from './rentals.dto.js';
import { RentalsRepository, type RentalRows } from './rentals.repository.js';

/**
 * The customer's reads of rentals and deployments, apart from admission so that neither grows
 * with the other. Which rows a key sees and which offer names a machine are the repository's
 * rules (rentals.repository.ts), shared with the owner bot and its notifications.
 */
export class RentalReadsService {
  private readonly repo: RentalsRepository;

  constructor(ds: DataSource) {
    this.repo = new RentalsRepository(ds);
  }

  /** One rental; agent keys see only their own, owner keys every rental of their account. */
  async get(principal: Principal, rentalId: string): Promise<RentalDto> {
    const found = await this.repo.visibleRental(principal, rentalId.toLowerCase());
    if (!found) throw notFound('rental');
    return (await this.describe([found]))[0];
  }

  /** The caller's rentals, newest first, a page at a time (see rental-views.ts for the cursor). */
  async list(principal: Principal, limit: number, cursor: string | undefined): Promise<{ rentals: RentalDto[]; nextCursor: string | null }> {
    const { rows, more } = await this.repo.page(principal, limit, cursor === undefined ? undefined : decodeCursor(cursor));
    return { rentals: await this.describe(rows), nextCursor: more ? encodeCursor(rows[rows.length - 1].order) : null };
  }

  /**
   * A rental by id with no visibility check, for answering a replay of the request that
   * created it (the idempotency record already tied it to the caller's key).
   */
  async rental(rentalId: string): Promise<RentalDto> {
    return (await this.describe([await this.repo.rental(rentalId)]))[0];
  }

  /** The caller's deployments, newest first. */
  async listDeployments(principal: Principal, limit: number): Promise<DeploymentDto[]> {
    return this.describeDeployments(await this.repo.visibleDeployments(principal, limit));
  }

  async getDeployment(principal: Principal, deploymentId: string): Promise<DeploymentDto> {
    const found = await this.repo.visibleDeployment(principal, deploymentId.toLowerCase());
    if (!found) throw notFound('deployment');
    return (await this.describeDeployments([found]))[0];
  }

  private async describe(rentals: RentalRows[]): Promise<RentalDto[]> {
    const machines = await this.repo.machines(rentals);
    return rentals.map((r, i) => toRentalDto(r.order, r.deployment, machines[i]));
  }

  /** Deployments as the API shows them: funding from their orders, the machine by the one rule. */
  private async describeDeployments(rentals: RentalRows[]): Promise<DeploymentDto[]> {
    const machines = await this.repo.machines(rentals);
    return rentals.map((r, i) => toDeploymentDto(r.deployment!, r.order.funding, machines[i]));
  }
}

/** What a caller sees for a row it may not see or that does not exist: the same answer. */
export function notFound(what: 'rental' | 'deployment'): AppError {
  return new AppError('NOT_FOUND', `No such ${what} for this key.`);
}
