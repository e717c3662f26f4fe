import type { Clock } from '../../../clock.js';
import type { Store } from '../../../db/store.js';
import type { JobQueue } from '../../../jobs/job-queue.js';
import type { Logger } from '../../../logger.js';
import type { ProviderRegistry } from '../../../providers/provider-registry.js';
import type { Repositories } from '../../../repositories.js';
import type { CheckoutsRepository } from '../../billing/checkouts.repository.js';
import type { LedgerService } from '../../billing/ledger.service.js';
import type { SecretBox } from '../../credentials/secret-box.js';
import type { InventoryService } from '../../inventory/inventory.service.js';
import type { TeardownReceipts } from '../../receipts/teardown-receipts.js';

/** Timing of the lifecycle; tests shorten it. */
export interface LifecycleTiming {
  /** Delay between provisioning polls. */
  pollMs: number;
  /** Delay between looks at the inventory for a rental waiting for capacity (at most one inventory refresh). */
  capacityPollMs: number;
  /** How long an ambiguous create is looked for by label before the rental fails. */
  adoptBoundMs: number;
  /** How long an instance may take to become reachable (and a throttled create may wait) before the rental fails. */
  activeBoundMs: number;
  /** First delay between destruction verifications; doubles up to `verifyMaxDelayMs`. */
  verifyBaseDelayMs: number;
  verifyMaxDelayMs: number;
  /** Failed verifications after which every further one logs an alert. */
  verifyAlertAfter: number;
  /** A deployment left this long in PENDING/PROVISIONING/TERMINATING is re-driven by the reconciler. */
  stuckAfterMs: number;
  sshTimeoutMs: number;
  /** Rentals per metering transaction (whole accounts at a time): short enough that admissions never wait long on it. */
  meterChunkRentals: number;
  /**
   * Metering transactions in flight at once, on as many pooled connections: one chunk's locks and
   * writes run in the database while the next chunk is read and priced here.
   */
  meterConcurrency: number;
  /** The metering sweep's period (METERING_EVERY_MS): a sweep ends within {@link METER_BUDGET_SHARE} of it. */
  meterPeriodMs: number;
  /**
   * The share of a sweep's time its chunks may take (1: back to back). The sweep pauses after
   * each chunk so the rest of the time is left to admissions, as long as it still ends within its
   * budget of the period at the pace seen so far.
   */
  meterBusyShare: number;
  /** How long a rental warned as idle may stay idle before it ends (IDLE_GRACE_SECONDS). */
  idleGraceMs: number;
}

export const DEFAULT_TIMING: LifecycleTiming = {
  pollMs: 1000,
  capacityPollMs: 15_000,
  adoptBoundMs: 60_000,
  activeBoundMs: 15 * 60_000,
  verifyBaseDelayMs: 1000,
  verifyMaxDelayMs: 60_000,
  verifyAlertAfter: 5,
  stuckAfterMs: 5 * 60_000,
  sshTimeoutMs: 3000,
  meterChunkRentals: 300,
  meterConcurrency: 2,
  meterPeriodMs: 15_000,
  meterBusyShare: 0.25,
  idleGraceMs: 600_000,
};

/** The share of its period a paced metering sweep may last, so it has ended before the next is due. */
export const METER_BUDGET_SHARE = 0.7;

/**
 * The pause after a metering chunk: enough that chunks take `busyShare` of the sweep's time, cut
 * to what keeps the sweep within `budgetMs` at the pace seen so far (`busyMs` of chunk work for
 * `done` of `total` rentals, `lanes` chunks at a time). Nothing after the last chunk, nothing when
 * `busyShare` is 1.
 */
export function meterPauseMs(p: {
  chunkMs: number;
  busyShare: number;
  elapsedMs: number;
  busyMs: number;
  done: number;
  total: number;
  budgetMs: number;
  lanes: number;
  chunkRentals: number;
}): number {
  if (p.busyShare >= 1 || p.done >= p.total || p.done <= 0) return 0;
  const wanted = p.chunkMs * (1 / p.busyShare - 1);
  const left = p.total - p.done;
  // Wall time the remaining chunks take at the pace seen, and the pauses between them left to share.
  const workLeftMs = ((p.busyMs / p.done) * left) / p.lanes;
  const pausesLeft = Math.max(1, Math.ceil(left / p.chunkRentals / p.lanes));
  const slack = p.budgetMs - p.elapsedMs - workLeftMs;
  return Math.max(0, Math.min(wanted, slack / pausesLeft));
}

/** Refunds a card-funded order's payment (billing's checkout sessions do it). */
export interface CardRefunds {
  refundOrder(orderId: string): Promise<unknown>;
  /**
   * Records in the caller's transaction that a card order's payment is owed back, so the refund
   * is retried by the payments job even if this process stops before making it. False when the
   * order has no paid checkout.
   */
  markOrderRefundDue(checkouts: CheckoutsRepository, orderId: string): Promise<boolean>;
}

/**
 * The aggregates the lifecycle reads and writes: the rentals and the events their state changes
 * write, the ledger and account locks of the usage and reversals it posts, the card checkouts a
 * refund is owed on, and the offer cache and provider errors of provisioning.
 */
export type LifecycleRepos = Pick<
  Repositories,
  'rentals' | 'events' | 'ledger' | 'accounts' | 'checkouts' | 'inventory' | 'receipts'
>;

/** Everything any lifecycle part may use; each part takes the subset it needs. */
export interface LifecycleDeps {
  store: Store<LifecycleRepos>;
  clock: Clock;
  logger: Logger;
  providers: ProviderRegistry;
  jobs: JobQueue;
  ledger: LedgerService;
  box: SecretBox;
  refunds: CardRefunds;
  /** The offer snapshot a rental waiting for capacity is matched from, as admission matches. */
  inventory: Pick<InventoryService, 'intentCandidates'>;
  /** Signs a verified destruction's teardown receipt with its TERMINATED; without it, none is issued. */
  receipts?: TeardownReceipts;
}

/** Queues a deployment job now or after `delayMs`, deduplicated by deployment. */
export async function enqueueFor(
  jobs: JobQueue,
  name: 'rental.provision' | 'rental.terminate' | 'rental.expire' | 'rental.expiring',
  deploymentId: string,
  delayMs = 0,
): Promise<void> {
  if (delayMs <= 0) await jobs.now(name, { deploymentId }, { uniqueKey: deploymentId });
  // Agenda runs on wall time; the delay is relative to it, not to the injected clock.
  else await jobs.schedule(new Date(Date.now() + delayMs), name, { deploymentId }, { uniqueKey: deploymentId });
}
