import type { DataSource } from 'typeorm';
import { MysqlStore, type Executor } from './db/mysql-store.js';
import type { Store } from './db/store.js';
import { MysqlJobOutboxRepository, type JobOutboxRepository } from './jobs/job-outbox.repository.js';
import {
  MysqlIdempotencyRepository,
  type IdempotencyRepository,
} from './modules/idempotency/idempotency.repository.js';

/**
 * Every aggregate's repository, as one transaction (or a read) hands them out. Each is the only
 * code that names its tables (test/unit/architecture.test.ts holds the map); a service names the
 * ones it uses in its own `Store<…>` type, and this whole set is assignable to it.
 */
export interface Repositories {
  idempotency: IdempotencyRepository;
  /** The job outbox: jobs written with the state they act on. */
  jobs: JobOutboxRepository;
}

/** The store every service of a process shares. */
export type AppStore = Store<Repositories>;

/**
 * The MySQL repositories of one executor, each made on first use: a transaction builds only the
 * ones it touches (admission's round trips and statements stay as they were).
 */
class MysqlRepositories implements Repositories {
  private idem?: IdempotencyRepository;

  constructor(private readonly sql: Executor) {}

  get idempotency(): IdempotencyRepository {
    return (this.idem ??= new MysqlIdempotencyRepository(this.sql));
  }

  private outbox?: JobOutboxRepository;
  get jobs(): JobOutboxRepository {
    return (this.outbox ??= new MysqlJobOutboxRepository(this.sql));
  }
}

/** The MySQL store of the DataSource: the one way the services reach the database. */
export function createStore(ds: DataSource): AppStore {
  return new MysqlStore(ds, (sql) => new MysqlRepositories(sql));
}
