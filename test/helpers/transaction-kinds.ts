import mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import { inPipelinedTransaction } from '../../src/db/sql.js';
import { inTransaction, retryingTransaction } from '../../src/db/transaction.js';

/** Runs one statement inside the transaction under test. */
export type Run = (sql: string, parameters?: unknown[]) => Promise<unknown>;

/** One way the service runs a write transaction, each through the one retry helper. */
export interface TransactionKind {
  name: string;
  run<T>(ds: DataSource, body: (q: Run) => Promise<T>): Promise<T>;
}

/** Every kind of transaction helper the service has: TypeORM's, TypeORM's at an isolation level, the pipelined one, and a plain mysql2 one. */
export const transactionKinds: TransactionKind[] = [
  { name: 'inTransaction', run: (ds, body) => inTransaction(ds, (m) => body((s, p) => m.query(s, p))) },
  {
    name: 'inTransaction (READ COMMITTED)',
    run: (ds, body) => inTransaction(ds, (m) => body((s, p) => m.query(s, p)), 'READ COMMITTED'),
  },
  {
    name: 'inPipelinedTransaction',
    run: (ds, body) => inPipelinedTransaction(ds, (tx) => body((s, p) => tx.query(s, p))),
  },
  {
    name: 'retryingTransaction (plain mysql2)',
    run: (ds, body) => {
      const o = ds.options as { host: string; port: number; database: string };
      return retryingTransaction(async () => {
        const conn = await mysql.createConnection({ host: o.host, port: o.port, user: 'root', database: o.database });
        try {
          await conn.query('START TRANSACTION');
          const out = await body(async (s, p) => (await conn.query(s, p))[0]);
          await conn.query('COMMIT');
          return out;
        } finally {
          await conn.end().catch(() => undefined);
        }
      });
    },
  },
];
