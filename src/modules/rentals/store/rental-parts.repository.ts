import type { Executor } from '../../../db/mysql-store.js';
import type { DeploymentBillingModel, RentalStatus } from '../state/rental-status.js';
import {
  claimExpiringNotice,
  endingWithoutNotice,
  forgetFinishedWatches,
  saveIdleWatch,
  watchedRentals,
  type EndingRental,
  type IdleWatchState,
  type WatchedRental,
} from './idle-watches.repository.js';
import {
  activeMeteredLimits,
  chargeUsage,
  lockMeteringStates,
  meteredDeployments,
  recordTrafficReadings,
  type TrafficReading,
  type MeteredLimits,
  type MeteringState,
  type SweptDeployment,
  type UsageCharge,
} from './metering.repository.js';
import type { Order } from './order.entity.js';
import {
  assignCandidates,
  getOrder,
  insertOrder,
  markReversalPending,
  markReversalSettled,
  orderTerms,
  setOrderHourlyPrice,
} from './orders.repository.js';
import { unfinishedRentalCounts } from './rental-counts.repository.js';
import { managerOf, sqlOf, transactionOf } from './rentals-executor.repository.js';

// The orders, idle watches, expiring notices, metering and counts parts of the rentals aggregate
// (rentals.repository.ts), over the statements of their *.repository.ts files.

/** `orders` rows, statuses aside. */
export interface OrdersRepository {
  /** Writes a new order row (admission's, issued at once so it travels with the rest of the transaction). */
  insert(order: Partial<Order>): Promise<void>;
  /** Order `id`; rejects when there is none (every deployment has its order). Entity read. */
  get(id: string): Promise<Order>;
  /** The order's status and purchased seconds, or null when there is no such order. Entity read. */
  terms(orderId: string): Promise<Pick<Order, 'status' | 'durationSeconds'> | null>;
  /** Sets the hourly price the rental is billed at. Entity write. */
  setHourlyPrice(orderId: string, hourlyPriceMinor: number): Promise<void>;
  /** Marks the order's PENDING reversal settled; one already settled is left as it is. Entity write. */
  markReversalSettled(orderId: string, at: Date): Promise<void>;
  /** Marks the order's reversal PENDING (and, given, says why in its failure reason). Entity write. */
  markReversalPending(orderId: string, at: Date, failureReason?: string): Promise<void>;
  /** The offers provisioning tries for a rental that waited for capacity, and the price of the first. Entity write. */
  assignCandidates(orderId: string, candidateIds: string[], hourlyPriceMinor: number, at: Date): Promise<void>;
}

/** `idle_watches`: per watched rental, how its GPU samples stand. */
export interface IdleWatchesRepository {
  /** ACTIVE rentals not being ended whose key ends idle machines and whose machine has an SSH address, with their watches. */
  watched(): Promise<WatchedRental[]>;
  /** Stores a watch after a sample only if it is still the one read before (`prevSampledAt`); true when stored. */
  save(deploymentId: string, prevSampledAt: Date | null, next: IdleWatchState): Promise<boolean>;
  /** Drops the watches of rentals no longer ACTIVE. */
  forgetFinished(): Promise<void>;
}

/** `deployments.expiring_event_at`: the one `rental.expiring` of a rental with an end. */
export interface ExpiringNoticesRepository {
  /** ACTIVE rentals without their `rental.expiring` whose end lies after `now` and at or before `horizon`. */
  unnoticed(now: Date, horizon: Date): Promise<EndingRental[]>;
  /** Claims the rental's one `rental.expiring`: true only for the first caller while ACTIVE. In a transaction only. */
  claim(deploymentId: string, at: Date): Promise<boolean>;
}

/** The metering sweep's statements (test/rentals/metering-round-trips.test.ts counts their round trips). */
export interface MeteringRepository {
  /** The started deployments of `billingModels` in `statuses`, by account then id; a plain read of one index. */
  deployments(
    billingModels: readonly DeploymentBillingModel[],
    statuses: readonly RentalStatus[],
  ): Promise<SweptDeployment[]>;
  /** Locks deployments `ids` FOR UPDATE in id order and reads their metering. In a transaction only. */
  lock(ids: readonly string[]): Promise<MeteringState[]>;
  /** Adds each charge's usage where the metering moment is still the one read; answers the number charged. One statement. */
  charge(charges: readonly UsageCharge[]): Promise<number>;
  /** The ACTIVE deployments of `billingModels` with their limits' counters. A plain read, no locks. */
  activeLimits(billingModels: readonly DeploymentBillingModel[]): Promise<MeteredLimits[]>;
  /**
   * Keeps the highest traffic counters read from instances, by label, for running deployments whose
   * offer bills traffic; answers how many took a reading. One statement; no money moves.
   */
  recordTraffic(readings: readonly TrafficReading[], at: Date): Promise<number>;
}

/** The metrics scrape's counts. */
export interface RentalCountsRepository {
  /** Deployments per unfinished status, every such status listed (zeros included). */
  unfinished(): Promise<Record<string, number>>;
}

export class MysqlOrdersRepository implements OrdersRepository {
  constructor(private readonly sql: Executor) {}

  async insert(order: Partial<Order>): Promise<void> {
    return insertOrder(sqlOf(this.sql), order);
  }

  async get(id: string): Promise<Order> {
    return getOrder(managerOf(this.sql), id);
  }

  async terms(orderId: string): Promise<Pick<Order, 'status' | 'durationSeconds'> | null> {
    return orderTerms(managerOf(this.sql), orderId);
  }

  async setHourlyPrice(orderId: string, hourlyPriceMinor: number): Promise<void> {
    return setOrderHourlyPrice(managerOf(this.sql), orderId, hourlyPriceMinor);
  }

  async markReversalSettled(orderId: string, at: Date): Promise<void> {
    return markReversalSettled(managerOf(this.sql), orderId, at);
  }

  async markReversalPending(orderId: string, at: Date, failureReason?: string): Promise<void> {
    return markReversalPending(managerOf(this.sql), orderId, at, failureReason);
  }

  async assignCandidates(orderId: string, candidateIds: string[], hourlyPriceMinor: number, at: Date): Promise<void> {
    return assignCandidates(managerOf(this.sql), orderId, candidateIds, hourlyPriceMinor, at);
  }
}

export class MysqlIdleWatchesRepository implements IdleWatchesRepository {
  constructor(private readonly sql: Executor) {}

  async watched(): Promise<WatchedRental[]> {
    return watchedRentals(this.sql);
  }

  async save(deploymentId: string, prevSampledAt: Date | null, next: IdleWatchState): Promise<boolean> {
    return saveIdleWatch(this.sql, deploymentId, prevSampledAt, next);
  }

  async forgetFinished(): Promise<void> {
    return forgetFinishedWatches(this.sql);
  }
}

export class MysqlExpiringNoticesRepository implements ExpiringNoticesRepository {
  constructor(private readonly sql: Executor) {}

  async unnoticed(now: Date, horizon: Date): Promise<EndingRental[]> {
    return endingWithoutNotice(this.sql, now, horizon);
  }

  async claim(deploymentId: string, at: Date): Promise<boolean> {
    return claimExpiringNotice(transactionOf(this.sql), deploymentId, at);
  }
}

export class MysqlMeteringRepository implements MeteringRepository {
  constructor(private readonly sql: Executor) {}

  async deployments(
    billingModels: readonly DeploymentBillingModel[],
    statuses: readonly RentalStatus[],
  ): Promise<SweptDeployment[]> {
    return meteredDeployments(this.sql, billingModels, statuses);
  }

  async lock(ids: readonly string[]): Promise<MeteringState[]> {
    return lockMeteringStates(transactionOf(this.sql), ids);
  }

  async charge(charges: readonly UsageCharge[]): Promise<number> {
    return chargeUsage(sqlOf(this.sql), charges);
  }

  async activeLimits(billingModels: readonly DeploymentBillingModel[]): Promise<MeteredLimits[]> {
    return activeMeteredLimits(this.sql, billingModels);
  }

  async recordTraffic(readings: readonly TrafficReading[], at: Date): Promise<number> {
    return recordTrafficReadings(this.sql, readings, at);
  }
}

export class MysqlRentalCountsRepository implements RentalCountsRepository {
  constructor(private readonly sql: Executor) {}

  async unfinished(): Promise<Record<string, number>> {
    return unfinishedRentalCounts(this.sql);
  }
}
