import type { DataSource } from 'typeorm';
import type { JobQueue } from '../../../jobs/job-queue.js';
import type { RentalHandoff } from '../../billing/rental-handoff.js';
import { Deployment } from '../deployment.entity.js';
import { RENTAL_JOBS } from '../rental-jobs.names.js';

/** A paid card order enters the same provisioning path as a credits rental. */
export class CardRentalHandoff implements RentalHandoff {
  constructor(
    private readonly ds: DataSource,
    private readonly jobs: JobQueue,
  ) {}

  async cardOrderPaid(orderId: string): Promise<void> {
    const d = await this.ds.getRepository(Deployment).findOneBy({ orderId });
    // Enqueueing is deduplicated by deployment id, and provisioning ignores anything not PENDING/PROVISIONING.
    if (d && (d.status === 'PENDING' || d.status === 'PROVISIONING')) {
      await this.jobs.now(RENTAL_JOBS.provision, { deploymentId: d.id }, { uniqueKey: d.id });
    }
  }
}
