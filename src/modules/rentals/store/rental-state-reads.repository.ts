import type { Executor } from '../../../db/mysql-store.js';
import type { Viewer } from '../../keys/visibility.js';
import {
  adjustActiveDeployments,
  insertDeploymentRow,
  mirrorOntoOrder,
  moveDeployment,
  readRentalRows,
  stampTerminationRequest,
  type RentalRead,
} from '../state/rental-state.repository.js';
import type { RentalStatus, TerminationReason } from '../state/rental-status.js';
import type { Deployment } from './deployment.entity.js';
import type { Order } from './order.entity.js';
import {
  lockDeploymentFor,
  lockDeploymentOrRentalFor,
  RentalReads,
  unfinishedRentalsOfKeys,
  type KeyRentalRow,
  type MachineFacts,
  type RentalPosition,
  type RentalRows,
} from './rental-reads.repository.js';
import { lockingManagerOf, managerOf, sqlOf } from './rentals-executor.repository.js';

// The state machine's statements and the reads parts of the rentals aggregate (rentals.repository.ts),
// over state/rental-state.repository.ts and rental-reads.repository.ts.

/** The statements of the rental state machine (its rules: rental-state.ts): the only writer of statuses. */
export interface RentalStateRepository {
  /**
   * The rental of `ref` (its deployment's id, or its card order's id) with the machine its event
   * names; with `lock`, its deployment and order rows locked. Entity read.
   */
  read(ref: string | { orderId: string }, lock: boolean): Promise<RentalRead | null>;
  /** Moves the deployment to `patch.status` only while it is in one of `from`; whether it moved. Entity write. */
  move(
    id: string,
    from: readonly RentalStatus[],
    patch: Partial<Deployment> & { status: RentalStatus },
  ): Promise<boolean>;
  /** Mirrors the deployment's new status onto its order. Entity write. */
  mirrorOntoOrder(orderId: string, patch: Partial<Order> & { status: RentalStatus }): Promise<void>;
  /** Moves the key's `active_deployments` counter by `delta` (no statement for 0). */
  adjustActiveDeployments(keyId: string, delta: number): Promise<void>;
  /** Writes a new deployment row. */
  insertDeployment(d: Partial<Deployment>): Promise<void>;
  /** Records the first termination request's time and reason; a later request never overwrites them. Entity write. */
  stampTerminationRequest(deploymentId: string, reason: TerminationReason, at: Date): Promise<void>;
}

/** The customer's, the owner bot's and the notifications' reads of rentals. Entity reads, none pipelined. */
export interface RentalReadsRepository {
  /** The machine of each rental, in order, named by rental-reads.repository.ts machineOfferId. */
  machines(rentals: readonly RentalRows[]): Promise<MachineFacts[]>;
  /** The machine of each deployment's rental, by deployment id; deployments unknown are left out. */
  machinesOfDeployments(deploymentIds: readonly string[]): Promise<Map<string, MachineFacts>>;
  /** Rental `id` with its deployment, if `viewer` may see it. */
  visibleRental(viewer: Viewer, id: string): Promise<RentalRows | null>;
  /** Rental `id` with its deployment, whoever asks; rejects when there is none. */
  rental(id: string): Promise<RentalRows>;
  /** The rentals `viewer` sees, newest first, `limit` of them after `after`; `more` tells whether older rows follow. */
  page(viewer: Viewer, limit: number, after?: RentalPosition): Promise<{ rows: RentalRows[]; more: boolean }>;
  /** Name and prefix of each key id given, by id. */
  keyLabels(keyIds: readonly string[]): Promise<Map<string, { name: string; prefix: string }>>;
  /** The deployments `viewer` sees, newest first, with their orders. */
  visibleDeployments(viewer: Viewer, limit: number): Promise<RentalRows[]>;
  /** Deployment `id` with its order, if `viewer` may see it. */
  visibleDeployment(viewer: Viewer, id: string): Promise<RentalRows | null>;
  /** Deployment `id` as `viewer` may see it, locked FOR UPDATE; null when not visible. In a transaction only. */
  lockDeployment(viewer: Viewer, id: string): Promise<Deployment | null>;
  /** As {@link lockDeployment}, `id` being the deployment's or its rental's (order's). In a transaction only. */
  lockDeploymentOrRental(viewer: Viewer, id: string): Promise<Deployment | null>;
  /** The account's deployments that the keys given started and that have not ended, oldest first. */
  unfinishedOfKeys(accountId: string, keyIds: readonly string[]): Promise<KeyRentalRow[]>;
}

export class MysqlRentalStateRepository implements RentalStateRepository {
  constructor(private readonly sql: Executor) {}

  async read(ref: string | { orderId: string }, lock: boolean): Promise<RentalRead | null> {
    return readRentalRows(lock ? lockingManagerOf(this.sql) : managerOf(this.sql), ref, lock);
  }

  async move(
    id: string,
    from: readonly RentalStatus[],
    patch: Partial<Deployment> & { status: RentalStatus },
  ): Promise<boolean> {
    return moveDeployment(managerOf(this.sql), id, from, patch);
  }

  async mirrorOntoOrder(orderId: string, patch: Partial<Order> & { status: RentalStatus }): Promise<void> {
    return mirrorOntoOrder(managerOf(this.sql), orderId, patch);
  }

  async adjustActiveDeployments(keyId: string, delta: number): Promise<void> {
    return adjustActiveDeployments(sqlOf(this.sql), keyId, delta);
  }

  async insertDeployment(d: Partial<Deployment>): Promise<void> {
    return insertDeploymentRow(sqlOf(this.sql), d);
  }

  async stampTerminationRequest(deploymentId: string, reason: TerminationReason, at: Date): Promise<void> {
    return stampTerminationRequest(managerOf(this.sql), deploymentId, reason, at);
  }
}

/** The reads class of rental-reads.repository.ts, made on each call on the executor's manager. */
export class MysqlRentalReadsRepository implements RentalReadsRepository {
  constructor(private readonly sql: Executor) {}

  private get on(): RentalReads {
    return new RentalReads(managerOf(this.sql));
  }

  async machines(rentals: readonly RentalRows[]): Promise<MachineFacts[]> {
    return this.on.machines(rentals);
  }

  async machinesOfDeployments(deploymentIds: readonly string[]): Promise<Map<string, MachineFacts>> {
    return this.on.machinesOfDeployments(deploymentIds);
  }

  async visibleRental(viewer: Viewer, id: string): Promise<RentalRows | null> {
    return this.on.visibleRental(viewer, id);
  }

  async rental(id: string): Promise<RentalRows> {
    return this.on.rental(id);
  }

  async page(viewer: Viewer, limit: number, after?: RentalPosition): Promise<{ rows: RentalRows[]; more: boolean }> {
    return this.on.page(viewer, limit, after);
  }

  async keyLabels(keyIds: readonly string[]): Promise<Map<string, { name: string; prefix: string }>> {
    return this.on.keyLabels(keyIds);
  }

  async visibleDeployments(viewer: Viewer, limit: number): Promise<RentalRows[]> {
    return this.on.visibleDeployments(viewer, limit);
  }

  async visibleDeployment(viewer: Viewer, id: string): Promise<RentalRows | null> {
    return this.on.visibleDeployment(viewer, id);
  }

  async lockDeployment(viewer: Viewer, id: string): Promise<Deployment | null> {
    return lockDeploymentFor(lockingManagerOf(this.sql), viewer, id);
  }

  async lockDeploymentOrRental(viewer: Viewer, id: string): Promise<Deployment | null> {
    return lockDeploymentOrRentalFor(lockingManagerOf(this.sql), viewer, id);
  }

  async unfinishedOfKeys(accountId: string, keyIds: readonly string[]): Promise<KeyRentalRow[]> {
    return unfinishedRentalsOfKeys(this.sql, accountId, keyIds);
  }
}
