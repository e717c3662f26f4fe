import type { Executor } from '../../../db/mysql-store.js';
import { orderNotificationFacts, type OrderNotificationFacts } from './orders.repository.js';
import {
  MysqlDeploymentAttemptsRepository,
  MysqlDeploymentsRepository,
  type DeploymentAttemptsRepository,
  type DeploymentsRepository,
} from './rental-deployments.repository.js';
import {
  MysqlExpiringNoticesRepository,
  MysqlIdleWatchesRepository,
  MysqlMeteringRepository,
  MysqlOrdersRepository,
  MysqlRentalCountsRepository,
  type ExpiringNoticesRepository,
  type IdleWatchesRepository,
  type MeteringRepository,
  type OrdersRepository,
  type RentalCountsRepository,
} from './rental-parts.repository.js';
import {
  MysqlRentalReadsRepository,
  MysqlRentalStateRepository,
  type RentalReadsRepository,
  type RentalStateRepository,
} from './rental-state-reads.repository.js';
import { MysqlRentalSealedColumnsRepository, type RentalSealedColumnsRepository } from './sealed-columns.repository.js';

export type { DeploymentAttemptsRepository, DeploymentsRepository } from './rental-deployments.repository.js';
export type {
  ExpiringNoticesRepository,
  IdleWatchesRepository,
  MeteringRepository,
  OrdersRepository,
  RentalCountsRepository,
} from './rental-parts.repository.js';
export type { RentalReadsRepository, RentalStateRepository } from './rental-state-reads.repository.js';
export type { AttemptAssignment, CardOrderRow, ReservingRow } from './deployments.repository.js';
export type { EndingRental, IdleWatchState, WatchedRental } from './idle-watches.repository.js';
export type { MeteredLimits, MeteringState, SweptDeployment, UsageCharge } from './metering.repository.js';
export type { KeyRentalRow, MachineFacts, RentalPosition, RentalRows } from './rental-reads.repository.js';
export type { RentalRead } from '../state/rental-state.repository.js';

/**
 * The rentals aggregate: `orders`, their `deployments`, the deployments' create attempts
 * (`deployment_attempts`) and idle watches (`idle_watches`), one part per concern. Statuses are
 * written only through {@link RentalStateRepository} (whose rules are rental-state.ts). Every
 * method issues its statement at the call, before it awaits anything, so calls issued together in
 * a pipelined transaction travel together. TypeORM entity reads and writes (the methods the parts
 * mark so) do not run in a pipelined transaction; locks run only inside a transaction.
 */
export interface RentalsRepository {
  readonly orders: OrdersRepository;
  readonly deployments: DeploymentsRepository;
  readonly attempts: DeploymentAttemptsRepository;
  readonly idleWatches: IdleWatchesRepository;
  /** The one `rental.expiring` moment of a rental with an end. */
  readonly expiring: ExpiringNoticesRepository;
  readonly metering: MeteringRepository;
  readonly state: RentalStateRepository;
  readonly reads: RentalReadsRepository;
  readonly counts: RentalCountsRepository;
  /** The sealed columns of orders and deployments, as re-sealing after a SECRETS_KEY rotation walks them. */
  readonly sealed: RentalSealedColumnsRepository;
  // What owners' Telegram notifications read of their rentals (notifications.service.ts).
  /** The GPU model, reversal status and starting key of each of `orderIds` that exists, as they stand now. */
  notificationFacts(orderIds: readonly string[]): Promise<Map<string, OrderNotificationFacts>>;
}

/** The rentals aggregate on MySQL; each part is made on first use (a transaction builds only what it touches). */
export class MysqlRentalsRepository implements RentalsRepository {
  private ord?: OrdersRepository;
  private dep?: DeploymentsRepository;
  private att?: DeploymentAttemptsRepository;
  private idle?: IdleWatchesRepository;
  private exp?: ExpiringNoticesRepository;
  private met?: MeteringRepository;
  private st?: RentalStateRepository;
  private rd?: RentalReadsRepository;
  private cnt?: RentalCountsRepository;

  constructor(private readonly sql: Executor) {}

  get orders(): OrdersRepository {
    return (this.ord ??= new MysqlOrdersRepository(this.sql));
  }

  get deployments(): DeploymentsRepository {
    return (this.dep ??= new MysqlDeploymentsRepository(this.sql));
  }

  get attempts(): DeploymentAttemptsRepository {
    return (this.att ??= new MysqlDeploymentAttemptsRepository(this.sql));
  }

  get idleWatches(): IdleWatchesRepository {
    return (this.idle ??= new MysqlIdleWatchesRepository(this.sql));
  }

  get expiring(): ExpiringNoticesRepository {
    return (this.exp ??= new MysqlExpiringNoticesRepository(this.sql));
  }

  get metering(): MeteringRepository {
    return (this.met ??= new MysqlMeteringRepository(this.sql));
  }

  get state(): RentalStateRepository {
    return (this.st ??= new MysqlRentalStateRepository(this.sql));
  }

  get reads(): RentalReadsRepository {
    return (this.rd ??= new MysqlRentalReadsRepository(this.sql));
  }

  get counts(): RentalCountsRepository {
    return (this.cnt ??= new MysqlRentalCountsRepository(this.sql));
  }

  private sealedColumns?: RentalSealedColumnsRepository;
  get sealed(): RentalSealedColumnsRepository {
    return (this.sealedColumns ??= new MysqlRentalSealedColumnsRepository(this.sql));
  }

  notificationFacts(orderIds: readonly string[]): Promise<Map<string, OrderNotificationFacts>> {
    return orderNotificationFacts(this.sql, orderIds);
  }
}
