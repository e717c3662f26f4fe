import type { Pool, PoolConnection } from 'mysql2';
import { DataSource, type EntityManager } from 'typeorm';
import type { MysqlDriver } from 'typeorm/driver/mysql/MysqlDriver.js';
import { statementText } from './statement-text.js';
import { isRetryableTxError, retryingTransaction } from './transaction.js';

interface Queued {
  sql: string;
  resolve(result: unknown): void;
  reject(err: unknown): void;
}

/**
 * A transaction on one of the DataSource pool's connections, driven with plain mysql2 calls: no
 * query runner, no broadcaster, no query builder. The hot paths (admission, authentication) use
 * it; its `query` answers exactly as `EntityManager.query` does (rows for a read, the result
 * header for a write), so the statements they share with the rest take either (see {@link Sql}).
 *
 * Statements issued in the same tick (`Promise.all([...])`, or helpers called without awaiting
 * in between) travel to the server as one multi-statement request and run there in the order
 * they were issued: one round trip instead of several, the same statements, the same locks in
 * the same order. If one fails, the server runs none after it and every one of them rejects.
 */
export class SqlTransaction {
  private open = true;
  private discard = false;
  private queue: Queued[] = [];

  constructor(
    /** The DataSource whose pool and entity metadata this runs on. */
    readonly ds: DataSource,
    private readonly conn: PoolConnection,
  ) {}

  /** True until the transaction has committed or rolled back. */
  get active(): boolean {
    return this.open;
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the same contract as EntityManager.query
  query<T = any>(sql: string, parameters?: unknown[]): Promise<T> {
    // A statement after COMMIT or ROLLBACK would run outside the transaction, in autocommit.
    if (!this.open)
      return Promise.reject(new Error('this transaction has ended; its statements must be issued before it commits'));
    return this.enqueue(sql, parameters);
  }

  /**
   * Ends the transaction with ROLLBACK instead of COMMIT when its function resolves, which still
   * answers the function's value: for work that turned out to change nothing (an idempotent
   * replay) but wrote on the way (a lock's `lock_version`). A rolled-back transaction has no
   * write-set, so on a Galera cluster it cannot fail certification and need not be retried.
   */
  rollBackAtEnd(): void {
    this.discard = true;
  }

  /** @internal True when {@link rollBackAtEnd} was called. */
  get discarding(): boolean {
    return this.discard;
  }

  /** @internal Commits or rolls back, after whatever was issued before. */
  end(verb: 'COMMIT' | 'ROLLBACK'): Promise<void> {
    this.open = false;
    return this.enqueue(verb);
  }

  private enqueue<T>(sql: string, parameters?: unknown[]): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const formatted = parameters === undefined ? sql : statementText(this.conn, sql, parameters);
      this.queue.push({ sql: formatted, resolve: resolve as (r: unknown) => void, reject });
      if (this.queue.length === 1) queueMicrotask(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 1) {
      run(this.conn, batch[0].sql).then(batch[0].resolve, batch[0].reject);
      return;
    }
    run<unknown[]>(this.conn, batch.map((q) => q.sql).join(';\n')).then(
      (results) => batch.forEach((q, i) => q.resolve(results[i])),
      (err) => batch.forEach((q) => q.reject(err)),
    );
  }
}

/** Where a statement runs: a TypeORM transaction's manager, or a {@link SqlTransaction}. */
export type Sql = EntityManager | SqlTransaction;

/** The DataSource behind `sql`, for its entity metadata. */
export function dataSourceOf(sql: Sql | DataSource): DataSource {
  if (sql instanceof DataSource) return sql;
  return sql instanceof SqlTransaction ? sql.ds : sql.connection;
}

/** True when `sql` is inside an open transaction (writes that must commit together check it). */
export function inOpenTransaction(sql: Sql | DataSource): boolean {
  if (sql instanceof DataSource) return false;
  return sql instanceof SqlTransaction ? sql.active : Boolean(sql.queryRunner?.isTransactionActive);
}

function poolOf(ds: DataSource): Pool {
  const pool = (ds.driver as MysqlDriver).pool as Pool | undefined;
  if (!pool) throw new Error('the DataSource is not initialized');
  return pool;
}

function run<T>(conn: Pick<PoolConnection, 'query'>, sql: string, parameters?: unknown[]): Promise<T> {
  return new Promise((resolve, reject) => {
    conn.query(sql, parameters, (err, result) => (err ? reject(err) : resolve(result as T)));
  });
}

/**
 * One statement on a pooled connection, outside any transaction (autocommit), run again through
 * the retry rule when it loses a deadlock or, on a multi-primary cluster, certification: a single
 * statement is a whole transaction, rolled back entirely when it fails so.
 */
export function sqlQuery<T>(ds: DataSource, sql: string, parameters?: unknown[]): Promise<T> {
  const pool = poolOf(ds);
  return retryingTransaction(() => run<T>(pool, sql, parameters));
}

function connection(pool: Pool): Promise<PoolConnection> {
  return new Promise((resolve, reject) => pool.getConnection((err, conn) => (err ? reject(err) : resolve(conn))));
}

/**
 * Runs `fn` in a transaction of plain mysql2 statements: committed when it resolves (rolled back
 * instead when it called {@link SqlTransaction.rollBackAtEnd}), rolled back when it throws, and
 * run again (like `inTransaction`) when InnoDB picks it as a deadlock victim.
 */
export function inPipelinedTransaction<T>(
  ds: DataSource,
  fn: (tx: SqlTransaction) => Promise<T>,
  attempts?: number,
): Promise<T> {
  const pool = poolOf(ds);
  return retryingTransaction(async () => {
    const conn = await connection(pool);
    let broken = false;
    try {
      const tx = new SqlTransaction(ds, conn);
      // Not awaited: it travels with the transaction's first statements.
      const started = tx.query('START TRANSACTION');
      // Its failure fails the statements sent with it, so it is reported through them too.
      started.catch(() => undefined);
      let result: T;
      try {
        result = await fn(tx);
        await started;
      } catch (err) {
        if (tx.active && isDatabaseError(err) && !isRetryableTxError(err) && (await transactionLost(conn))) {
          throw new TransactionLostError(err);
        }
        if (tx.active) {
          await tx.end('ROLLBACK').catch(() => {
            broken = true;
          });
        }
        throw err;
      }
      await tx.end(tx.discarding ? 'ROLLBACK' : 'COMMIT');
      return result;
    } catch (err) {
      // A connection whose state is unknown (lost mid-statement, failed rollback) leaves the pool.
      if ((err as { fatal?: boolean }).fatal === true) broken = true;
      throw err;
    } finally {
      if (broken) conn.destroy();
      else conn.release();
    }
  }, attempts);
}

function isDatabaseError(err: unknown): boolean {
  return typeof (err as { errno?: unknown })?.errno === 'number';
}

/**
 * A transaction the server ended under us. On a multi-primary cluster a transaction can lose to a
 * replicated one between two statements of a batch (a brute-force abort): the server rolls it back,
 * and the statements after run on their own, so the error they report (a foreign key whose parent
 * row was rolled back, say) is not the transaction's. Its work is all undone, so it is retried like
 * a deadlock victim; its code says so to the retry rule.
 */
export class TransactionLostError extends Error {
  readonly code = 'ER_LOCK_DEADLOCK';
  constructor(readonly reported: unknown) {
    super(`the transaction was rolled back by the server (${(reported as Error)?.message ?? String(reported)})`);
  }
}

/**
 * True when the connection is no longer in the transaction it began. `@@in_transaction` answers on
 * MariaDB; MySQL 8 lacks it and is asked through INNODB_TRX (which needs the PROCESS privilege). When
 * neither answers, the error stands as reported.
 */
async function transactionLost(conn: Pick<PoolConnection, 'query'>): Promise<boolean> {
  try {
    const [row] = await run<{ t: number | string }[]>(conn, 'SELECT @@in_transaction AS t');
    return Number(row.t) === 0;
  } catch {
    try {
      const [row] = await run<{ n: number | string }[]>(
        conn,
        'SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()',
      );
      return Number(row.n) === 0;
    } catch {
      return false;
    }
  }
}
