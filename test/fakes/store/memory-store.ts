import type { Store, TransactionControl, TransactionOptions } from '../../../src/db/store.js';

/*
 * The in-memory store of the unit tier: the same port as the MySQL store (src/db/mysql-store.ts),
 * with tables as maps. Transactions run one at a time, each on a copy of the tables taken when it
 * begins; the copy replaces the tables when the transaction commits and is dropped when it throws
 * or asks to roll back, so a failed transaction leaves nothing behind, as on the server. Reads run
 * on the committed tables. Each aggregate's memory repository (beside this file) keeps its rows in
 * tables named like the real ones, and must look its table up on every call (`tables.table(name)`),
 * never keep it: a commit swaps the maps underneath.
 */

/** A copy of a column value: dates and JSON values are copied, so a caller's change never reaches a stored row. */
function copyValue(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (v instanceof Date) return new Date(v.getTime());
  return structuredClone(v);
}

/** A copy of a row that keeps its class (an entity stays an entity). */
export function copyRow<T extends object>(row: T): T {
  const out = Object.create(Object.getPrototypeOf(row) as object | null) as Record<string, unknown>;
  for (const [k, v] of Object.entries(row)) out[k] = copyValue(v);
  return out as T;
}

/** The rows of one table by key, and the table's auto-increment counter. Every row in or out is a copy. */
export class MemoryTable<T extends object> {
  constructor(
    private readonly rows = new Map<string, T>(),
    private counter = 0,
  ) {}

  /** The next auto-increment id, as the driver gives BIGINT ids: a decimal string. */
  nextId(): string {
    return String(++this.counter);
  }

  get size(): number {
    return this.rows.size;
  }

  has(key: string): boolean {
    return this.rows.has(key);
  }

  get(key: string): T | undefined {
    const row = this.rows.get(key);
    return row === undefined ? undefined : copyRow(row);
  }

  /** Adds a row; false (and nothing written) when its key is taken, as INSERT IGNORE does. */
  insert(key: string, row: T): boolean {
    if (this.rows.has(key)) return false;
    this.rows.set(key, copyRow(row));
    return true;
  }

  /** Writes the row whatever was there. */
  put(key: string, row: T): void {
    this.rows.set(key, copyRow(row));
  }

  /** Changes the named fields of the row; false when there is none. */
  update(key: string, patch: Partial<T>): boolean {
    const row = this.rows.get(key);
    if (row === undefined) return false;
    this.rows.set(key, copyRow(Object.assign(copyRow(row), patch)));
    return true;
  }

  delete(key: string): boolean {
    return this.rows.delete(key);
  }

  /** Every row, in insertion order. */
  all(): T[] {
    return [...this.rows.values()].map(copyRow);
  }

  where(pred: (row: T) => boolean): T[] {
    return [...this.rows.values()].filter(pred).map(copyRow);
  }

  first(pred: (row: T) => boolean): T | undefined {
    for (const row of this.rows.values()) if (pred(row)) return copyRow(row);
    return undefined;
  }

  /** Every key whose row matches. */
  keysWhere(pred: (row: T) => boolean): string[] {
    return [...this.rows.entries()].filter(([, row]) => pred(row)).map(([k]) => k);
  }

  /** @internal A copy of the whole table, for a transaction to work on. */
  copy(): MemoryTable<T> {
    return new MemoryTable(new Map([...this.rows].map(([k, row]) => [k, copyRow(row)])), this.counter);
  }
}

/** The tables of one memory store, by name, made on first use. */
export class MemoryTables {
  private tables = new Map<string, MemoryTable<object>>();

  table<T extends object>(name: string): MemoryTable<T> {
    let t = this.tables.get(name);
    if (!t) this.tables.set(name, (t = new MemoryTable()));
    return t as MemoryTable<T>;
  }

  /** @internal */
  copy(): MemoryTables {
    const out = new MemoryTables();
    out.tables = new Map([...this.tables].map(([name, t]) => [name, t.copy()]));
    return out;
  }

  /** @internal Takes over the tables of `other` (a transaction's copy, at commit). */
  adopt(other: MemoryTables): void {
    this.tables = other.tables;
  }
}

/** The error a lost transaction is reported with, as the MySQL store's retry rule knows it. */
export class MemoryDeadlock extends Error {
  readonly code = 'ER_LOCK_DEADLOCK';
  constructor() {
    super('Deadlock found when trying to get lock; try restarting transaction (memory store)');
  }
}

/** Tries of one transaction before a lost one is thrown, as in the MySQL store. */
const ATTEMPTS = 8;

export class MemoryStore<R> implements Store<R> {
  /** The committed tables; tests may read them to see what a service wrote. */
  readonly tables = new MemoryTables();
  private readonly outside: R;
  private turn: Promise<unknown> = Promise.resolve();
  private toLose = 0;
  /** Transactions begun, attempts included (a test of a retry counts them). */
  attempts = 0;

  constructor(private readonly bind: (tables: MemoryTables) => R) {
    this.outside = bind(this.tables);
  }

  /**
   * The next `count` transactions lose at their commit, as a deadlock victim or a cluster's
   * certification loser does, and are run again from the start: for tests that a service's
   * transaction is safe to run twice.
   */
  loseNextCommits(count = 1): void {
    this.toLose += count;
  }

  read<T>(fn: (repos: R) => Promise<T>): Promise<T> {
    return fn(this.outside);
  }

  transaction<T>(fn: (repos: R, tx: TransactionControl) => Promise<T>, _options?: TransactionOptions): Promise<T> {
    const run = this.turn.then(() => this.attempt(fn));
    this.turn = run.catch(() => undefined);
    return run;
  }

  pipelined<T>(fn: (repos: R, tx: TransactionControl) => Promise<T>): Promise<T> {
    return this.transaction(fn);
  }

  private async attempt<T>(fn: (repos: R, tx: TransactionControl) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      this.attempts++;
      const work = this.tables.copy();
      let discard = false;
      const value = await fn(this.bind(work), { rollBackAtEnd: () => void (discard = true) });
      if (discard) return value;
      if (this.toLose > 0) {
        this.toLose--;
        if (attempt >= ATTEMPTS) throw new MemoryDeadlock();
        continue;
      }
      this.tables.adopt(work);
      return value;
    }
  }
}
