import { AppError } from '../../../errors/app-error.js';
import type { OfferDto } from '../../inventory/inventory.dto.js';
import { needsOf } from '../../inventory/offer-candidates.js';
import type { Deployment } from '../store/deployment.entity.js';
import type { Order } from '../store/order.entity.js';
import { MAX_CANDIDATES } from '../admission/rental-limits.js';
import { orderGpuMatch } from '../admission/rental-intent.js';
import { enqueueFor, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';
import type { Reversal } from './reversal.js';

/** A rental still waiting for an eligible offer: a GPU intent admitted with a deadline and no candidate yet. */
export function waitsForCapacity(order: Pick<Order, 'waitForCapacityUntil' | 'candidateOfferIds'>): boolean {
  return order.waitForCapacityUntil !== null && (order.candidateOfferIds ?? []).length === 0;
}

/** What the order's machine settings ask of an offer (the same needs admission matched with; the script by its hash). */
function needsOfOrder(o: Order) {
  return needsOf({
    image: o.machineImage,
    startupScript: o.startupScriptSha256,
    ports: o.machinePorts ?? [],
    diskGb: o.machineDiskGb,
  });
}

/**
 * A GPU intent waiting for capacity (PENDING, phase `waiting_for_capacity`, its credit reservation
 * held at the price ceiling): each look asks the live inventory for eligible offers (model, count,
 * ceiling, machine settings, long enough for its lease). Found: they become the rental's
 * candidates and provisioning goes on. At the deadline it fails with NO_CAPACITY; nothing was
 * charged, so failing releases what it held.
 */
export class CapacityWait {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'store' | 'clock' | 'jobs' | 'logger' | 'inventory'>,
    private readonly timing: LifecycleTiming,
    private readonly reversal: Reversal,
  ) {}

  /** True when candidates were assigned (provisioning may go on); false when the rental waits on, or failed. */
  async look(d: Deployment, order: Order): Promise<boolean> {
    const { store, clock } = this.deps;
    const now = clock.now();
    const left = order.waitForCapacityUntil!.getTime() - now.getTime();
    const found = await this.eligible(order, d.leaseSeconds);
    if (found.length > 0) {
      await store.transaction(async (r) => {
        await r.rentals.orders.assignCandidates(
          order.id,
          found.map((o) => o.id),
          found[0].pricePerHourMinor,
          now,
        );
        await r.rentals.deployments.assignFirstCandidate(d.id, found[0], now);
      });
      this.deps.logger.info({ deploymentId: d.id, offerId: found[0].id }, 'capacity appeared for a waiting rental');
      return true;
    }
    if (left <= 0) {
      await this.reversal.fail(
        d.id,
        'NO_CAPACITY',
        'No eligible offer appeared before the rental stopped waiting for capacity (waitForCapacitySeconds); nothing was charged.',
      );
      return false;
    }
    await enqueueFor(this.deps.jobs, 'rental.provision', d.id, Math.min(this.timing.capacityPollMs, left));
    return false;
  }

  private async eligible(order: Order, lease: number | null): Promise<OfferDto[]> {
    try {
      const q = {
        gpuModel: order.gpuModel!,
        // As admitted: the name is not parsed again.
        match: orderGpuMatch(order) ?? undefined,
        gpuCount: order.gpuCount!,
        maxHourlyPriceMinor: order.maxHourlyPriceMinor!,
      };
      const { candidates } = await this.deps.inventory.intentCandidates(q, 20, needsOfOrder(order));
      return candidates.filter((o) => lease === null || o.maximumDurationSeconds >= lease).slice(0, MAX_CANDIDATES);
    } catch (err) {
      if (err instanceof AppError && err.code === 'NO_MATCHING_OFFER') return [];
      throw err;
    }
  }
}
