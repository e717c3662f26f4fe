import type { Store } from '../../../db/store.js';
import type { Repositories } from '../../../repositories.js';
import { AppError } from '../../../errors/app-error.js';
import type { EventHub } from '../../events/event-hub.js';
import type { StoredEvent } from '../../events/events.repository.js';
import { unauthenticated } from '../../keys/keys.service.js';
import type { Principal } from '../../keys/principal.js';
import { RENTAL_STATUSES, type RentalStatus } from '../state/rental-status.js';
import { decodeCursor, encodeCursor, toDeploymentDto, toRentalDto } from '../wire/rental-dto.js';
import type { DeploymentDto, RentalDto } from '../wire/rentals.dto.js';
import type { RentalReadsRepository, RentalRows } from '../store/rentals.repository.js';

/**
 * The customer's reads of rentals and deployments, apart from admission so that neither grows
 * with the other. Which rows a key sees and which offer names a machine are the repository's
 * rules (rental-reads.repository.ts), shared with the owner bot and its notifications.
 */
export class RentalReadsService {
  constructor(
    private readonly store: Store<Pick<Repositories, 'rentals'>>,
    private readonly hub?: EventHub,
  ) {}

  /** The reads, outside any transaction. */
  private reads<T>(fn: (reads: RentalReadsRepository) => Promise<T>): Promise<T> {
    return this.store.read((r) => fn(r.rentals.reads));
  }

  /**
   * One rental, by its id or its deployment's (an agent holds either, and terminate and reveal
   * take either); agent keys see only their own, owner keys every rental of their account. With
   * `wait`, answered once its status is one of `wait.statuses`, or when the wait ends (as it is then).
   */
  async get(principal: Principal, id: string, wait?: Wait): Promise<RentalDto> {
    const read = async () => {
      const found = await this.reads(
        async (reads) => (await reads.visibleRental(principal, id)) ?? (await reads.visibleDeployment(principal, id)),
      );
      if (!found) throw notFound('rental');
      return (await this.describe([found]))[0];
    };
    return wait ? this.waiting(principal, wait, read) : read();
  }

  /** The caller's rentals, newest first, a page at a time (see rental-dto.ts for the cursor). */
  async list(
    principal: Principal,
    limit: number,
    cursor: string | undefined,
  ): Promise<{ rentals: RentalDto[]; nextCursor: string | null }> {
    const after = cursor === undefined ? undefined : decodeCursor(cursor);
    const { rows, more } = await this.reads((reads) => reads.page(principal, limit, after));
    return { rentals: await this.describe(rows), nextCursor: more ? encodeCursor(rows[rows.length - 1].order) : null };
  }

  /**
   * A rental by id with no visibility check, for answering a replay of the request that
   * created it (the idempotency record already tied it to the caller's key).
   */
  async rental(rentalId: string): Promise<RentalDto> {
    return (await this.describe([await this.reads((reads) => reads.rental(rentalId))]))[0];
  }

  /** The caller's deployments, newest first. */
  async listDeployments(principal: Principal, limit: number): Promise<DeploymentDto[]> {
    return this.describeDeployments(await this.reads((reads) => reads.visibleDeployments(principal, limit)));
  }

  /** One deployment, waiting as {@link get} does when `wait` is given. */
  async getDeployment(principal: Principal, deploymentId: string, wait?: Wait): Promise<DeploymentDto> {
    const read = async () => {
      const found = await this.reads((reads) => reads.visibleDeployment(principal, deploymentId));
      if (!found) throw notFound('deployment');
      return (await this.describeDeployments([found]))[0];
    };
    return wait ? this.waiting(principal, wait, read) : read();
  }

  /**
   * Reads until the status is one the caller waits for or the time is up. Between reads it sleeps
   * on the event hub (no query of its own): only an event of this rental bringing a wanted status
   * wakes it for another read, and one last read answers when the wait ends. The wait holds one of
   * its key's places (429 past the key's bound), and a key revoked meanwhile, in any process, ends
   * it within the hub's tail period with the uniform 401.
   */
  private async waiting<T extends { rentalId: string; status: RentalStatus }>(
    principal: Principal,
    wait: Wait,
    read: () => Promise<T>,
  ): Promise<T> {
    if (!this.hub) return read();
    const deadline = Date.now() + wait.seconds * 1000;
    // Listening before the first read, so a change right after it is not missed.
    const sub = await this.hub.subscribe((e) => e.accountId === principal.accountId && e.rentalId !== null, {
      keyId: principal.keyId,
    });
    try {
      let found = await read();
      while (!wait.statuses.includes(found.status) && !sub.closed) {
        const e = await sub.next(deadline - Date.now());
        if (sub.revoked) break;
        if (!e) return await read();
        if (e.rentalId === found.rentalId && bringsWanted(e, wait)) found = await read();
      }
      if (sub.revoked) throw unauthenticated();
      return found;
    } finally {
      sub.stop();
    }
  }

  private async describe(rentals: RentalRows[]): Promise<RentalDto[]> {
    const machines = await this.reads((reads) => reads.machines(rentals));
    return rentals.map((r, i) => toRentalDto(r.order, r.deployment, machines[i]));
  }

  /** Deployments as the API shows them: funding from their orders, the machine by the one rule. */
  private async describeDeployments(rentals: RentalRows[]): Promise<DeploymentDto[]> {
    const machines = await this.reads((reads) => reads.machines(rentals));
    return rentals.map((r, i) => toDeploymentDto(r.deployment!, r.order.funding, machines[i]));
  }
}

/** A read that waits: for one of `statuses`, at most `seconds`. */
export interface Wait {
  statuses: RentalStatus[];
  seconds: number;
}

/** How long a waiting read without `waitSeconds` waits (its bounds, 1 to 30, are the routes'). */
export const WAIT_SECONDS = { default: 25 };

/**
 * `waitFor` and `waitSeconds` as the route took them: no wait when neither is given, else the
 * statuses (a comma list of known ones) and the seconds. 422 VALIDATION_FAILED names what is wrong.
 */
export function parseWait(waitFor: string | undefined, waitSeconds: number | undefined): Wait | undefined {
  if (waitFor === undefined) {
    if (waitSeconds !== undefined)
      throw new AppError(
        'VALIDATION_FAILED',
        'Invalid request: waitSeconds needs waitFor, the statuses to wait for (e.g. waitFor=ACTIVE,FAILED).',
      );
    return undefined;
  }
  const statuses = waitFor.split(',').map((s) => s.trim().toUpperCase());
  const unknown = statuses.filter((s) => !(RENTAL_STATUSES as readonly string[]).includes(s));
  if (!waitFor.trim() || unknown.length) {
    throw new AppError(
      'VALIDATION_FAILED',
      `Invalid request: waitFor is a comma list of statuses among ${RENTAL_STATUSES.join(', ')}${unknown.length && waitFor.trim() ? `; unknown: ${unknown.join(', ')}` : ''}.`,
    );
  }
  // waitSeconds's bounds are the route's (@isInt, @minimum, @maximum), checked once where the query is read.
  return { statuses: statuses as RentalStatus[], seconds: waitSeconds ?? WAIT_SECONDS.default };
}

/** Whether a rental event may bring a status the waiter wants (one without a status may: read again). */
function bringsWanted(e: StoredEvent, wait: Wait): boolean {
  const status = (e.data as { status?: unknown } | null)?.status;
  return typeof status !== 'string' || wait.statuses.includes(status as RentalStatus);
}

/** What a caller sees for a row it may not see or that does not exist: the same answer. */
export function notFound(what: 'rental' | 'deployment'): AppError {
  return new AppError('NOT_FOUND', `No such ${what} for this key.`);
}
