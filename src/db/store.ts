/**
 * The database as the services see it: a port that hands out one repository object per aggregate
 * (accounts and their keys, rentals, the ledger, …) for a read, a transaction or a pipelined
 * transaction. Services receive a `Store` and never a connection, so they can be built on the
 * MySQL store (src/db/mysql-store.ts) in production and on an in-memory one in the unit tier.
 *
 * `R` is the set of repositories a caller needs. A store of every repository is assignable to a
 * store of fewer, so each service names only the aggregates it uses.
 */
export interface Store<R> {
  /** Statements outside a transaction: each commits on its own (reads, and writes that stand alone). */
  read<T>(fn: (repos: R) => Promise<T>): Promise<T>;
  /**
   * One transaction: committed when `fn` resolves, rolled back when it throws, and run again from the
   * start when the database picks it as a deadlock victim (or a cluster rolls it back), so `fn` must
   * be safe to run twice and keep its side effects outside the database until it has resolved.
   */
  transaction<T>(fn: (repos: R, tx: TransactionControl) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * A transaction like {@link transaction} whose statements issued together (in one tick, without an
   * await between them) travel to the server as one request: the hot paths' round trips. Repository
   * calls issued together keep their order.
   */
  pipelined<T>(fn: (repos: R, tx: TransactionControl) => Promise<T>): Promise<T>;
}

/** What a transaction's function may ask of the transaction itself. */
export interface TransactionControl {
  /**
   * End with ROLLBACK instead of COMMIT, still answering the function's value: for work that turned
   * out to change nothing (an idempotent replay) but wrote on the way (a lock's version). A
   * rolled-back transaction cannot fail a cluster's certification, so it is never run again.
   */
  rollBackAtEnd(): void;
}

export interface TransactionOptions {
  /** This transaction's isolation level (the server's default otherwise). */
  isolation?: 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE';
}
