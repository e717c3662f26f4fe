import type { DataSource } from 'typeorm';
import { inPipelinedTransaction, type Sql } from './sql.js';
import type { Store, TransactionControl, TransactionOptions } from './store.js';
import { inTransaction } from './transaction.js';

/**
 * Where a MySQL repository runs its statements: the DataSource (each statement on its own), a
 * TypeORM transaction's manager, or a pipelined transaction. Only repositories and this layer see it.
 */
export type Executor = Sql | DataSource;

/** A transaction's function answered, but asked to end with ROLLBACK: carries its value past TypeORM's COMMIT. */
class RolledBackAtEnd {
  constructor(readonly value: unknown) {}
}

/**
 * The store on MySQL (MariaDB, MySQL 8, a Galera cluster): the one implementation of {@link Store}
 * that knows the DataSource, TypeORM's EntityManager and the pipelined transaction. `bind` makes
 * the repositories of one executor; the composition root gives it (src/repositories.ts).
 */
export class MysqlStore<R> implements Store<R> {
  private readonly outside: R;

  constructor(
    readonly ds: DataSource,
    private readonly bind: (sql: Executor) => R,
  ) {
    this.outside = bind(ds);
  }

  read<T>(fn: (repos: R) => Promise<T>): Promise<T> {
    return fn(this.outside);
  }

  async transaction<T>(fn: (repos: R, tx: TransactionControl) => Promise<T>, options?: TransactionOptions): Promise<T> {
    try {
      return await inTransaction(
        this.ds,
        async (manager) => {
          let discard = false;
          const value = await fn(this.bind(manager), { rollBackAtEnd: () => void (discard = true) });
          if (discard) throw new RolledBackAtEnd(value);
          return value;
        },
        options?.isolation,
      );
    } catch (err) {
      if (err instanceof RolledBackAtEnd) return err.value as T;
      throw err;
    }
  }

  pipelined<T>(fn: (repos: R, tx: TransactionControl) => Promise<T>): Promise<T> {
    return inPipelinedTransaction(this.ds, (tx) => fn(this.bind(tx), tx));
  }
}
