import { DataSource, EntityManager } from 'typeorm';
import type { Executor } from '../../../db/mysql-store.js';
import type { Sql } from '../../../db/sql.js';

// What each part of the rentals aggregate (rentals.repository.ts) runs its statements on, given the
// store's executor: the DataSource outside a transaction, a TypeORM transaction's manager, or a
// pipelined transaction, which has no manager for TypeORM's entity calls.

/** TypeORM's entity calls run on the DataSource's manager or a transaction's, not in a pipelined transaction. */
export function managerOf(sql: Executor): EntityManager {
  if (sql instanceof DataSource) return sql.manager;
  if (sql instanceof EntityManager) return sql;
  throw new Error('rentals entity reads and writes do not run in a pipelined transaction');
}

/** A lock outside a transaction would end with its statement. */
export function transactionOf(sql: Executor): Sql {
  if (sql instanceof DataSource) throw new Error('rentals rows are locked only inside a transaction');
  return sql;
}

/** An entity lock: a TypeORM transaction's manager. */
export function lockingManagerOf(sql: Executor): EntityManager {
  return managerOf(transactionOf(sql));
}

/** The plain statements' executor: the DataSource's manager outside a transaction. */
export function sqlOf(sql: Executor): Sql {
  return sql instanceof DataSource ? sql.manager : sql;
}
