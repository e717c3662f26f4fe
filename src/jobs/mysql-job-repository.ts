import {
  computeJobState,
  toJobId,
  type JobId,
  type JobParameters,
  type JobRepository,
  type JobRepositoryOptions,
  type JobsOverview,
  type JobsQueryOptions,
  type JobsResult,
  type JobsSort,
  type JobWithState,
  type RemoveJobsOptions,
} from 'agenda';
import { systemClock, type Clock } from '../clock.js';
import type { DataSource, QueryRunner } from 'typeorm';
import type { IsolationLevel } from 'typeorm/driver/types/IsolationLevel.js';
import { inOpenTransaction, type Sql } from '../db/sql.js';
import { isRetryableTxError } from '../db/transaction.js';

/** The table created by migrations/1763800001000-AgendaJobs.ts. */
export const AGENDA_JOBS_TABLE = 'agenda_jobs';

/**
 * Every read takes the JSON columns also as plain text: whether mysql2 hands a JSON column back
 * parsed depends on the server's column metadata, and a job's data may itself be a string that
 * looks like JSON, so guessing from the value's type would parse some data twice.
 */
const JOB_COLUMNS = '*, CAST(data AS CHAR) AS data_text, CAST(skip_days AS CHAR) AS skip_days_text';

interface JobRow {
  id: number | string;
  name: string;
  priority: number;
  next_run_at: Date | null;
  type: 'normal' | 'single';
  locked_at: Date | null;
  last_run_at: Date | null;
  last_finished_at: Date | null;
  failed_at: Date | null;
  fail_count: number | null;
  fail_reason: string | null;
  repeat_interval: string | null;
  repeat_timezone: string | null;
  repeat_at: string | null;
  data: unknown;
  data_text: string | null;
  disabled: number;
  progress: number | null;
  fork: number;
  last_modified_by: string | null;
  debounce_started_at: Date | null;
  start_date: Date | null;
  end_date: Date | null;
  skip_days: unknown;
  skip_days_text: string | null;
}

interface WriteResult {
  affectedRows: number;
  insertId: number;
}

/**
 * Columns a `unique()` constraint may name directly. Identifiers cannot be bound as parameters,
 * so caller-supplied keys are checked against this list before they reach the SQL text.
 */
const UNIQUE_COLUMNS = new Set([
  'id', 'name', 'priority', 'next_run_at', 'type', 'locked_at', 'last_run_at', 'last_finished_at',
  'failed_at', 'fail_count', 'fail_reason', 'repeat_interval', 'repeat_timezone', 'repeat_at',
  'disabled', 'progress', 'fork', 'last_modified_by', 'debounce_started_at', 'start_date', 'end_date',
]);

/** Options for {@link MysqlJobRepository}. */
export interface MysqlJobRepositoryOptions {
  /** Attempts of a claim or unique-enqueue transaction when InnoDB reports a deadlock or lock-wait timeout (default 8). */
  claimAttempts?: number;
  /** How often, per job name, a claim looks for abandoned jobs (lock past its deadline) before due ones (default 1000 ms). */
  abandonedScanEveryMs?: number;
  /** Where the repository's own notion of now comes from (debounce windows, scan cadence, job states); tests move it. Default: the system clock. */
  clock?: Clock;
}

/** What {@link MysqlJobRepository.enqueueUnique} did. */
export interface EnqueueUniqueResult {
  job: JobParameters;
  /** False when a waiting job with the same key was updated instead. */
  inserted: boolean;
}

/**
 * Agenda 6 `JobRepository` on MySQL/MariaDB, through a TypeORM DataSource it does not own.
 *
 * Claiming is a short transaction: `SELECT … ORDER BY next_run_at, priority DESC LIMIT 1 FOR
 * UPDATE SKIP LOCKED` followed by an UPDATE of `locked_at`, so concurrent workers in any number of
 * processes each get a different row and never wait on each other. Every time it stores comes
 * from the caller (Agenda's own clock), never from the server's NOW(), so lock deadlines compare
 * like with like.
 */
export class MysqlJobRepository implements JobRepository {
  private readonly claimAttempts: number;
  /** Per job name: when a claim next looks for abandoned jobs first. */
  private readonly abandonedScanAt = new Map<string, number>();
  private readonly abandonedScanEveryMs: number;
  private readonly clock: Clock;
  /** Claims under way, and whether this process has stopped claiming (see stopClaims). */
  private readonly claiming = new Set<Promise<unknown>>();
  private claimsStopped = false;

  constructor(
    private readonly ds: DataSource,
    options: MysqlJobRepositoryOptions = {},
  ) {
    this.claimAttempts = options.claimAttempts ?? 8;
    this.abandonedScanEveryMs = options.abandonedScanEveryMs ?? 1000;
    this.clock = options.clock ?? systemClock;
  }

  async connect(): Promise<void> {
    // The DataSource belongs to the caller, and the schema to migrations: nothing to set up.
  }

  async queryJobs(options: JobsQueryOptions = {}): Promise<JobsResult> {
    const { state, includeDisabled = true, sort, skip = 0, limit = 0 } = options;
    const where = this.filter({ ...options, id: options.id, ids: options.ids });
    if (options.search) {
      // The column's binary collation would make the dashboard's search case-sensitive.
      where.conditions.push('LOWER(name) LIKE LOWER(?)');
      where.params.push(`%${options.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    }
    if (!includeDisabled) where.conditions.push('disabled = 0');
    const sql = `SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE}${whereClause(where.conditions)} ORDER BY ${orderBy(sort)}`;
    const rows: JobRow[] = await this.ds.query(sql, where.params);
    const now = this.clock.now();
    let jobs: JobWithState[] = rows
      .map((row) => {
        const job = rowToJob(row);
        return { ...job, _id: job._id!, state: computeJobState(job, now) };
      })
      .filter((job) => !state || (state === 'paused' ? job.disabled === true : job.state === state));
    const total = jobs.length;
    if (limit > 0) jobs = jobs.slice(skip, skip + limit);
    else if (skip > 0) jobs = jobs.slice(skip);
    return { jobs, total };
  }

  async getJobsOverview(): Promise<JobsOverview[]> {
    const rows: JobRow[] = await this.ds.query(`SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} ORDER BY name`);
    const now = this.clock.now();
    const byName = new Map<string, JobsOverview>();
    for (const row of rows) {
      let o = byName.get(row.name);
      if (!o) {
        o = { name: row.name, total: 0, running: 0, scheduled: 0, queued: 0, completed: 0, failed: 0, repeating: 0, paused: 0 };
        byName.set(row.name, o);
      }
      const job = rowToJob(row);
      o.total++;
      o[computeJobState(job, now)]++;
      if (job.disabled) o.paused++;
    }
    return [...byName.values()];
  }

  async getDistinctJobNames(): Promise<string[]> {
    const rows: { name: string }[] = await this.ds.query(`SELECT DISTINCT name FROM ${AGENDA_JOBS_TABLE} ORDER BY name`);
    return rows.map((r) => r.name);
  }

  async getJobById(id: string): Promise<JobParameters | null> {
    if (!isId(id)) return null;
    const rows: JobRow[] = await this.ds.query(`SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE id = ?`, [id]);
    return rows[0] ? rowToJob(rows[0]) : null;
  }

  async getQueueSize(): Promise<number> {
    const [row] = await this.ds.query(`SELECT COUNT(*) AS n FROM ${AGENDA_JOBS_TABLE} WHERE next_run_at < ?`, [this.clock.now()]);
    return Number(row.n);
  }

  async removeJobs(options: RemoveJobsOptions): Promise<number> {
    const where = this.filter(options);
    if (where.conditions.length === 0) return 0;
    const res: WriteResult = await this.ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE}${whereClause(where.conditions)}`, where.params);
    return res.affectedRows;
  }

  async disableJobs(options: RemoveJobsOptions): Promise<number> {
    return this.setDisabled(options, true);
  }

  async enableJobs(options: RemoveJobsOptions): Promise<number> {
    return this.setDisabled(options, false);
  }

  async purgeAllJobs(): Promise<number> {
    const res: WriteResult = await this.ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE}`);
    return res.affectedRows;
  }

  async saveJob<DATA = unknown>(job: JobParameters<DATA>, options: JobRepositoryOptions | undefined): Promise<JobParameters<DATA>> {
    const { _id, unique, uniqueOpts } = job;
    const by = options?.lastModifiedBy ?? null;
    if (_id) {
      const res: WriteResult = await this.ds.query(
        `UPDATE ${AGENDA_JOBS_TABLE} SET priority = ?, next_run_at = ?, type = ?, repeat_timezone = ?, repeat_interval = ?,
           data = ?, repeat_at = ?, disabled = ?, fork = ?, fail_reason = ?, fail_count = ?, failed_at = ?,
           last_modified_by = ?, start_date = ?, end_date = ?, skip_days = ?
         WHERE id = ? AND name = ?`,
        [...definitionValues(job).slice(1), job.failReason ?? null, job.failCount ?? null, job.failedAt ?? null, by, ...dateConstraintValues(job), String(_id), job.name],
      );
      // A job removed while its handle was held: hand back what we were given, as Agenda expects.
      if (res.affectedRows === 0) return job;
      return (await this.getJobById(String(_id))) as JobParameters<DATA>;
    }
    if (job.type === 'single') return this.upsertSingle(job, by);
    if (unique && Object.keys(unique).length > 0) return this.upsertUnique(job, unique, uniqueOpts, by);
    const id = await this.insert(job, by, null, null);
    return { ...job, _id: toJobId(String(id)) };
  }

  async saveJobState(job: JobParameters, options: JobRepositoryOptions | undefined): Promise<void> {
    if (!job._id) throw new Error('Cannot save job state without job ID');
    const res: WriteResult = await this.ds.query(
      `UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = ?, next_run_at = ?, last_run_at = ?, progress = ?, fail_reason = ?,
         fail_count = ?, failed_at = ?, last_finished_at = ?, last_modified_by = ?
       WHERE id = ? AND name = ?`,
      [
        job.lockedAt ?? null, job.nextRunAt ?? null, job.lastRunAt ?? null, job.progress ?? null, job.failReason ?? null,
        job.failCount ?? null, job.failedAt ?? null, job.lastFinishedAt ?? null, options?.lastModifiedBy ?? null,
        String(job._id), job.name,
      ],
    );
    if (res.affectedRows !== 1) {
      throw new Error(`job ${job._id} (name: ${job.name}) cannot be updated in the database, maybe it does not exist anymore?`);
    }
  }

  async lockJob(job: JobParameters, options: JobRepositoryOptions | undefined): Promise<JobParameters | undefined> {
    if (!job._id || !job.nextRunAt) return undefined;
    return this.claim(
      [[`id = ? AND name = ? AND locked_at IS NULL AND next_run_at = ? AND disabled = 0`, [String(job._id), job.name, job.nextRunAt]]],
      this.clock.now(),
      options?.lastModifiedBy ?? null,
    );
  }

  async unlockJob(job: JobParameters): Promise<void> {
    if (!job._id) return;
    // A job whose next_run_at is NULL is running (or done); its lock is the run's, not ours.
    await this.ds.query(`UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = NULL WHERE id = ? AND next_run_at IS NOT NULL`, [String(job._id)]);
  }

  async unlockJobs(jobIds: (JobId | string)[]): Promise<void> {
    const ids = jobIds.map(String).filter(isId);
    if (ids.length === 0) return;
    await this.ds.query(`UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = NULL WHERE id IN (${ids.map(() => '?').join(', ')})`, ids);
  }

  async getNextJobToRun(
    jobName: string,
    nextScanAt: Date,
    lockDeadline: Date,
    now: Date | undefined,
    options: JobRepositoryOptions | undefined,
  ): Promise<JobParameters | undefined> {
    const lockTime = now ?? this.clock.now();
    const by = options?.lastModifiedBy ?? null;
    // Two index range scans rather than one OR, which would not use the index order: due jobs
    // nobody holds, and jobs whose lock outlived its deadline (their runner is gone). Each stops
    // at its first free row. Abandoned jobs are rare, so the second scan runs only when the first
    // finds nothing, except that once a second per name it goes first: a standing backlog of due
    // jobs cannot starve an abandoned one, and the common claim stays a single query.
    const due: [string, unknown[]] = ['name = ? AND disabled = 0 AND locked_at IS NULL AND next_run_at <= ?', [jobName, nextScanAt]];
    const abandoned: [string, unknown[]] = ['name = ? AND disabled = 0 AND locked_at <= ?', [jobName, lockDeadline]];
    const nowMs = this.clock.now().getTime();
    const abandonedFirst = nowMs >= (this.abandonedScanAt.get(jobName) ?? 0);
    if (abandonedFirst) this.abandonedScanAt.set(jobName, nowMs + this.abandonedScanEveryMs);
    return this.claim(abandonedFirst ? [abandoned, due] : [due, abandoned], lockTime, by);
  }

  /**
   * Inserts a job due at `nextRunAt` unless one of the same name and `uniqueKey` is still
   * waiting (not locked, not finished); then that one keeps its row, takes the new data, and runs
   * at the earlier of the two times. A job already running does not count, so work enqueued while
   * it runs is not lost. Concurrent callers serialize on the key's index range.
   */
  async enqueueUnique(job: JobParameters, uniqueKey: string): Promise<EnqueueUniqueResult> {
    const due = job.nextRunAt;
    if (!due) throw new Error('enqueueUnique needs nextRunAt');
    return this.inRetriedTransaction(undefined, async (runner) => {
      const rows: JobRow[] = await runner.query(
        `SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE name = ? AND unique_key = ? FOR UPDATE`,
        [job.name, uniqueKey],
      );
      const waiting = rows.find((r) => r.locked_at === null && r.next_run_at !== null && !r.disabled);
      let result: EnqueueUniqueResult;
      if (waiting) {
        const nextRunAt = waiting.next_run_at! < due ? waiting.next_run_at! : due;
        await runner.query(`UPDATE ${AGENDA_JOBS_TABLE} SET data = ?, next_run_at = ?, priority = GREATEST(priority, ?) WHERE id = ?`, [
          JSON.stringify(job.data ?? {}), nextRunAt, job.priority, waiting.id,
        ]);
        result = { job: { ...rowToJob(waiting), data: job.data, nextRunAt }, inserted: false };
      } else {
        const id = await this.insert(job, null, null, uniqueKey, runner);
        result = { job: { ...job, _id: toJobId(String(id)) }, inserted: true };
      }
      return result;
    });
  }

  /**
   * Inserts one job row with the caller's EntityManager, so it commits or rolls back with the
   * caller's transaction (see `JobQueue.nowIn`). A plain insert: no row is read or locked.
   */
  async insertIn(tx: Sql, job: JobParameters, uniqueKey: string | null): Promise<JobId> {
    if (!inOpenTransaction(tx)) throw new Error('insertIn must run inside a transaction');
    return toJobId(String(await this.insert(job, null, null, uniqueKey, tx)));
  }

  /** Locks the first free row of the first scan that has one, in one short transaction. */
  /**
   * Stops this process's claims and waits for those under way: a claim that lands after Agenda's
   * stop() has released its jobs would otherwise leave its job locked until the lock expires.
   * Such a claim releases its job itself and reports none.
   */
  async stopClaims(): Promise<void> {
    this.claimsStopped = true;
    await Promise.allSettled([...this.claiming]);
  }

  /** Claims again (a processor started anew on this repository). */
  resumeClaims(): void {
    this.claimsStopped = false;
  }

  private async claim(scans: [condition: string, params: unknown[]][], lockTime: Date, by: string | null): Promise<JobParameters | undefined> {
    if (this.claimsStopped) return undefined;
    const claimed = this.claimOnce(scans, lockTime, by);
    this.claiming.add(claimed);
    try {
      const job = await claimed;
      if (job?._id && this.claimsStopped) {
        await this.unlockJobs([job._id]);
        return undefined;
      }
      return job;
    } finally {
      this.claiming.delete(claimed);
    }
  }

  private async claimOnce(scans: [condition: string, params: unknown[]][], lockTime: Date, by: string | null): Promise<JobParameters | undefined> {
    // READ COMMITTED: a locking read under REPEATABLE READ also takes gap locks, which stall the
    // producers inserting due jobs at the end of the very range the workers scan. Row locks
    // plus SKIP LOCKED are all a claim needs.
    return this.inRetriedTransaction('READ COMMITTED', async (runner) => {
      let row: JobRow | undefined;
      for (const [condition, params] of scans) {
        const rows: JobRow[] = await runner.query(
          `SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE ${condition}
           ORDER BY next_run_at ASC, priority DESC LIMIT 1 FOR UPDATE SKIP LOCKED`,
          params,
        );
        row = rows[0];
        if (row) break;
      }
      // Read before the lock is written: a row that cannot be read must not stay claimed.
      const job = row ? rowToJob(row) : undefined;
      if (row) {
        await runner.query(`UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = ?, last_modified_by = ? WHERE id = ?`, [lockTime, by, row.id]);
      }
      if (!job) return undefined;
      return { ...job, lockedAt: lockTime, lastModifiedBy: by ?? undefined };
    });
  }

  /**
   * Runs `fn` in a transaction on its own connection and runs it again, after a short back-off,
   * when InnoDB picks it as a deadlock victim or a lock wait times out (up to `claimAttempts`).
   */
  private async inRetriedTransaction<T>(isolation: IsolationLevel | undefined, fn: (runner: QueryRunner) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const runner = this.ds.createQueryRunner();
      try {
        await runner.connect();
        await runner.startTransaction(isolation);
        const result = await fn(runner);
        await runner.commitTransaction();
        return result;
      } catch (err) {
        if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
        if (attempt >= this.claimAttempts || !isRetryableTxError(err)) throw err;
        await backoff(attempt);
      } finally {
        await runner.release();
      }
    }
  }

  private async insert(job: JobParameters, by: string | null, debounceStartedAt: Date | null, uniqueKey: string | null, runner?: QueryRunner | Sql): Promise<number> {
    const res: WriteResult = await (runner ?? this.ds).query(
      `INSERT INTO ${AGENDA_JOBS_TABLE} (name, priority, next_run_at, type, repeat_timezone, repeat_interval, data, repeat_at,
         disabled, fork, last_modified_by, debounce_started_at, start_date, end_date, skip_days, unique_key)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [...definitionValues(job), by, debounceStartedAt, ...dateConstraintValues(job), uniqueKey],
    );
    return Number(res.insertId);
  }

  private async upsertSingle<DATA>(job: JobParameters<DATA>, by: string | null): Promise<JobParameters<DATA>> {
    // A repeating job whose next run is already due keeps the time it has: re-declaring it at
    // every worker start must not make it run again at once.
    const protect = job.nextRunAt !== null && job.nextRunAt <= this.clock.now();
    const res: WriteResult = await this.ds.query(
      `INSERT INTO ${AGENDA_JOBS_TABLE} (name, priority, next_run_at, type, repeat_timezone, repeat_interval, data, repeat_at,
         disabled, fork, last_modified_by, debounce_started_at, start_date, end_date, skip_days, unique_key)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, NULL)
       ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id),
         next_run_at = ${protect ? 'COALESCE(next_run_at, VALUES(next_run_at))' : 'VALUES(next_run_at)'},
         priority = VALUES(priority), repeat_timezone = VALUES(repeat_timezone), repeat_interval = VALUES(repeat_interval),
         data = VALUES(data), repeat_at = VALUES(repeat_at), disabled = VALUES(disabled), fork = VALUES(fork),
         last_modified_by = VALUES(last_modified_by), start_date = VALUES(start_date), end_date = VALUES(end_date),
         skip_days = VALUES(skip_days)`,
      [...definitionValues(job), by, ...dateConstraintValues(job)],
    );
    return (await this.getJobById(String(res.insertId))) as JobParameters<DATA>;
  }

  private async upsertUnique<DATA>(
    job: JobParameters<DATA>,
    unique: Record<string, unknown>,
    uniqueOpts: JobParameters['uniqueOpts'],
    by: string | null,
  ): Promise<JobParameters<DATA>> {
    const conditions = ['name = ?'];
    const params: unknown[] = [job.name];
    for (const [key, value] of Object.entries(unique)) {
      if (key.startsWith('data.')) {
        conditions.push('JSON_UNQUOTE(JSON_EXTRACT(data, ?)) = ?');
        params.push(jsonPath(key.slice(5)), value === null ? 'null' : String(value));
      } else {
        const column = key.replace(/([A-Z])/g, '_$1').toLowerCase();
        if (!UNIQUE_COLUMNS.has(column)) throw new Error(`Invalid unique constraint field: "${key}"`);
        conditions.push(value === null ? `${column} IS NULL` : `${column} = ?`);
        if (value !== null) params.push(value);
      }
    }
    const debounce = uniqueOpts?.debounce;
    const now = this.clock.now();
    return this.inRetriedTransaction(undefined, async (runner) => {
      const rows: JobRow[] = await runner.query(
        `SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE ${conditions.join(' AND ')} ORDER BY id LIMIT 1 FOR UPDATE`,
        params,
      );
      let saved: JobParameters<DATA>;
      const existing = rows[0];
      if (existing) {
        if (uniqueOpts?.insertOnly && !debounce) {
          saved = rowToJob(existing) as JobParameters<DATA>;
        } else {
          let nextRunAt = job.nextRunAt ?? null;
          let debounceStartedAt: Date | null = null;
          if (debounce) {
            const started = existing.debounce_started_at ?? now;
            if (debounce.strategy === 'leading') {
              nextRunAt = existing.next_run_at;
              debounceStartedAt = started;
            } else if (debounce.maxWait && now.getTime() - started.getTime() >= debounce.maxWait) {
              nextRunAt = now;
            } else {
              nextRunAt = new Date(now.getTime() + debounce.delay);
              debounceStartedAt = started;
            }
          }
          const values = definitionValues(job);
          await runner.query(
            `UPDATE ${AGENDA_JOBS_TABLE} SET priority = ?, next_run_at = ?, type = ?, repeat_timezone = ?, repeat_interval = ?,
               data = ?, repeat_at = ?, disabled = ?, fork = ?, last_modified_by = ?, debounce_started_at = ?,
               start_date = ?, end_date = ?, skip_days = ?
             WHERE id = ?`,
            [values[1], nextRunAt, ...values.slice(3), by, debounceStartedAt, ...dateConstraintValues(job), existing.id],
          );
          const [row] = await runner.query(`SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE id = ?`, [existing.id]);
          saved = rowToJob(row) as JobParameters<DATA>;
        }
      } else {
        let debounceStartedAt: Date | null = null;
        let toInsert = job;
        if (debounce) {
          debounceStartedAt = now;
          if (debounce.strategy !== 'leading') toInsert = { ...job, nextRunAt: new Date(now.getTime() + debounce.delay) };
        }
        const id = await this.insert(toInsert, by, debounceStartedAt, null, runner);
        saved = { ...toInsert, _id: toJobId(String(id)), debounceStartedAt: debounceStartedAt ?? undefined };
      }
      return saved;
    });
  }

  private async setDisabled(options: RemoveJobsOptions, disabled: boolean): Promise<number> {
    const where = this.filter(options);
    if (where.conditions.length === 0) return 0;
    const res: WriteResult = await this.ds.query(
      `UPDATE ${AGENDA_JOBS_TABLE} SET disabled = ?${whereClause(where.conditions)}`,
      [disabled ? 1 : 0, ...where.params],
    );
    return res.affectedRows;
  }

  private filter(options: RemoveJobsOptions & { names?: string[] }): { conditions: string[]; params: unknown[] } {
    const conditions: string[] = [];
    const params: unknown[] = [];
    if (options.id !== undefined) {
      conditions.push('id = ?');
      params.push(isId(String(options.id)) ? String(options.id) : -1);
    } else if (options.ids && options.ids.length > 0) {
      const ids = options.ids.map(String).filter(isId);
      conditions.push(ids.length ? `id IN (${ids.map(() => '?').join(', ')})` : 'FALSE');
      params.push(...ids);
    }
    if (options.name) {
      conditions.push('name = ?');
      params.push(options.name);
    } else if (options.names && options.names.length > 0) {
      conditions.push(`name IN (${options.names.map(() => '?').join(', ')})`);
      params.push(...options.names);
    } else if (options.notNames && options.notNames.length > 0) {
      conditions.push(`name NOT IN (${options.notNames.map(() => '?').join(', ')})`);
      params.push(...options.notNames);
    }
    if (options.data !== undefined) {
      conditions.push('JSON_CONTAINS(data, ?)');
      params.push(JSON.stringify(options.data));
    }
    return { conditions, params };
  }
}

function whereClause(conditions: string[]): string {
  return conditions.length ? ` WHERE ${conditions.join(' AND ')}` : '';
}

function isId(id: string): boolean {
  return /^[0-9]{1,20}$/.test(id);
}

/** `$."a"."b"` for a dotted key, quoted so no key can change the path's meaning. */
function jsonPath(dotted: string): string {
  return '$' + dotted.split('.').map((p) => `."${p.replace(/["\\]/g, (c) => `\\${c}`)}"`).join('');
}

function backoff(attempt: number): Promise<void> {
  return new Promise((r) => setTimeout(r, 2 * attempt + Math.random() * 10 * attempt));
}

/** name, priority, next_run_at, type, repeat_timezone, repeat_interval, data, repeat_at, disabled, fork */
function definitionValues(job: JobParameters): unknown[] {
  return [
    job.name,
    job.priority ?? 0,
    job.nextRunAt ?? null,
    job.type,
    job.repeatTimezone ?? null,
    job.repeatInterval === undefined || job.repeatInterval === null ? null : String(job.repeatInterval),
    JSON.stringify(job.data === undefined ? null : job.data),
    job.repeatAt ?? null,
    job.disabled ? 1 : 0,
    job.fork ? 1 : 0,
  ];
}

/** start_date, end_date, skip_days */
function dateConstraintValues(job: JobParameters): unknown[] {
  return [job.startDate ?? null, job.endDate ?? null, job.skipDays ? JSON.stringify(job.skipDays) : null];
}

/** The JSON columns' text, parsed exactly once by us (see JOB_COLUMNS). */
function parseJson(text: string | null): unknown {
  return text === null ? null : JSON.parse(text);
}

function rowToJob(row: JobRow): JobParameters {
  const interval = row.repeat_interval;
  return {
    _id: toJobId(String(row.id)),
    name: row.name,
    priority: Number(row.priority),
    nextRunAt: row.next_run_at,
    type: row.type,
    lockedAt: row.locked_at ?? undefined,
    lastRunAt: row.last_run_at ?? undefined,
    lastFinishedAt: row.last_finished_at ?? undefined,
    failedAt: row.failed_at ?? undefined,
    failCount: row.fail_count ?? undefined,
    failReason: row.fail_reason ?? undefined,
    repeatInterval: interval === null ? undefined : /^[0-9]+$/.test(interval) ? Number(interval) : interval,
    repeatTimezone: row.repeat_timezone ?? undefined,
    repeatAt: row.repeat_at ?? undefined,
    data: parseJson(row.data_text),
    disabled: Boolean(row.disabled),
    progress: row.progress ?? undefined,
    fork: Boolean(row.fork),
    lastModifiedBy: row.last_modified_by ?? undefined,
    debounceStartedAt: row.debounce_started_at ?? undefined,
    startDate: row.start_date ?? undefined,
    endDate: row.end_date ?? undefined,
    skipDays: (parseJson(row.skip_days_text) as number[] | null) ?? undefined,
  };
}

function orderBy(sort: JobsSort | undefined): string {
  // MySQL sorts NULL first ascending; `x IS NULL` first keeps NULLs last like the other backends.
  const dir = (d: unknown) => (d === 'asc' || d === 1 ? 'ASC' : 'DESC');
  if (!sort) return 'next_run_at IS NULL, next_run_at DESC, last_run_at IS NULL, last_run_at DESC';
  const parts: string[] = [];
  if (sort.nextRunAt !== undefined) parts.push(`next_run_at IS NULL, next_run_at ${dir(sort.nextRunAt)}`);
  if (sort.lastRunAt !== undefined) parts.push(`last_run_at IS NULL, last_run_at ${dir(sort.lastRunAt)}`);
  if (sort.lastFinishedAt !== undefined) parts.push(`last_finished_at IS NULL, last_finished_at ${dir(sort.lastFinishedAt)}`);
  if (sort.priority !== undefined) parts.push(`priority ${dir(sort.priority)}`);
  if (sort.name !== undefined) parts.push(`name ${dir(sort.name)}`);
  return parts.length ? parts.join(', ') : 'next_run_at IS NULL, next_run_at DESC, last_run_at IS NULL, last_run_at DESC';
}
