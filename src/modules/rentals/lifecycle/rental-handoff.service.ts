import type { Store } from '../../../db/store.js';
import { RENTAL_JOBS, type JobQueue } from '../../../jobs/job-queue.js';
import type { Repositories } from '../../../repositories.js';
import type { RentalHandoff } from '../../billing/rental-handoff.js';
import { isOneOf, PROVISIONING_STATUSES } from '../state/rental-status.js';

/** A paid card order enters the same provisioning path as a credits rental. */
export class CardRentalHandoff implements RentalHandoff {
  constructor(
    private readonly store: Store<Pick<Repositories, 'rentals'>>,
    private readonly jobs: JobQueue,
  ) {}

  async cardOrderPaid(orderId: string): Promise<void> {
    const d = await this.store.read((r) => r.rentals.deployments.ofOrder(orderId));
    // Enqueueing is deduplicated by deployment id, and provisioning ignores anything not PENDING/PROVISIONING.
    if (d && isOneOf(PROVISIONING_STATUSES, d.status)) {
      await this.jobs.now(RENTAL_JOBS.provision, { deploymentId: d.id }, { uniqueKey: d.id });
    }
  }
}
