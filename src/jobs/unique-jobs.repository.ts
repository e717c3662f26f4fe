import { toJobId, type JobParameters } from 'agenda';
import type { DataSource } from 'typeorm';
import type { Clock } from '../clock.js';
import { inTransaction } from '../db/transaction.js';
import {
  AGENDA_JOBS_TABLE,
  dateConstraintValues,
  definitionValues,
  insertJob,
  JOB_COLUMNS,
  jobById,
  rowToJob,
  type JobRow,
  type WriteResult,
} from './job-rows.repository.js';

/**
 * Columns a `unique()` constraint may name directly. Identifiers cannot be bound as parameters,
 * so caller-supplied keys are checked against this list before they reach the SQL text.
 */
const UNIQUE_COLUMNS = new Set([
  'id',
  'name',
  'priority',
  'next_run_at',
  'type',
  'locked_at',
  'last_run_at',
  'last_finished_at',
  'failed_at',
  'fail_count',
  'fail_reason',
  'repeat_interval',
  'repeat_timezone',
  'repeat_at',
  'disabled',
  'progress',
  'fork',
  'last_modified_by',
  'debounce_started_at',
  'start_date',
  'end_date',
]);

/** What {@link enqueueUnique} did. */
export interface EnqueueUniqueResult {
  job: JobParameters;
  /** False when a waiting job with the same key was updated instead. */
  inserted: boolean;
}

/**
 * Inserts a job due at `nextRunAt` unless one of the same name and `uniqueKey` is still
 * waiting (not locked, not finished); then that one keeps its row, takes the new data, and runs
 * at the earlier of the two times. A job already running does not count, so work enqueued while
 * it runs is not lost. Concurrent callers serialize on the key's index range.
 */
export async function enqueueUnique(
  ds: DataSource,
  job: JobParameters,
  uniqueKey: string,
): Promise<EnqueueUniqueResult> {
  const due = job.nextRunAt;
  if (!due) throw new Error('enqueueUnique needs nextRunAt');
  return inTransaction(ds, async (m) => {
    const rows: JobRow[] = await m.query(
      `SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE name = ? AND unique_key = ? FOR UPDATE`,
      [job.name, uniqueKey],
    );
    const waiting = rows.find((r) => r.locked_at === null && r.next_run_at !== null && !r.disabled);
    if (waiting) {
      const nextRunAt = waiting.next_run_at! < due ? waiting.next_run_at! : due;
      await m.query(
        `UPDATE ${AGENDA_JOBS_TABLE} SET data = ?, next_run_at = ?, priority = GREATEST(priority, ?) WHERE id = ?`,
        [JSON.stringify(job.data ?? {}), nextRunAt, job.priority, waiting.id],
      );
      return { job: { ...rowToJob(waiting), data: job.data, nextRunAt }, inserted: false };
    }
    const id = await insertJob(m, job, null, null, uniqueKey);
    return { job: { ...job, _id: toJobId(String(id)) }, inserted: true };
  });
}

/**
 * Saves a `single` job (Agenda's `every`): one row per name, inserted or updated in place.
 * A repeating job whose next run is already due keeps the time it has: re-declaring it at
 * every worker start must not make it run again at once.
 */
export async function upsertSingle<DATA>(
  ds: DataSource,
  clock: Clock,
  job: JobParameters<DATA>,
  by: string | null,
): Promise<JobParameters<DATA>> {
  const protect = job.nextRunAt !== null && job.nextRunAt <= clock.now();
  const res: WriteResult = await ds.query(
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
  return (await jobById(ds, String(res.insertId))) as JobParameters<DATA>;
}

/**
 * Saves a job carrying Agenda's `unique()` constraint: the first row matching it is updated
 * (or kept, with `insertOnly`), with Agenda's debounce rules; a new row is inserted otherwise.
 */
export async function upsertUnique<DATA>(
  ds: DataSource,
  clock: Clock,
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
  const now = clock.now();
  return inTransaction(ds, async (m) => {
    const rows: JobRow[] = await m.query(
      `SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE ${conditions.join(' AND ')} ORDER BY id LIMIT 1 FOR UPDATE`,
      params,
    );
    const existing = rows[0];
    if (existing) {
      if (uniqueOpts?.insertOnly && !debounce) return rowToJob(existing) as JobParameters<DATA>;
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
      await m.query(
        `UPDATE ${AGENDA_JOBS_TABLE} SET priority = ?, next_run_at = ?, type = ?, repeat_timezone = ?, repeat_interval = ?,
           data = ?, repeat_at = ?, disabled = ?, fork = ?, last_modified_by = ?, debounce_started_at = ?,
           start_date = ?, end_date = ?, skip_days = ?
         WHERE id = ?`,
        [values[1], nextRunAt, ...values.slice(3), by, debounceStartedAt, ...dateConstraintValues(job), existing.id],
      );
      const [row] = await m.query(`SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE id = ?`, [existing.id]);
      return rowToJob(row) as JobParameters<DATA>;
    }
    let debounceStartedAt: Date | null = null;
    let toInsert = job;
    if (debounce) {
      debounceStartedAt = now;
      if (debounce.strategy !== 'leading') toInsert = { ...job, nextRunAt: new Date(now.getTime() + debounce.delay) };
    }
    const id = await insertJob(m, toInsert, by, debounceStartedAt, null);
    return { ...toInsert, _id: toJobId(String(id)), debounceStartedAt: debounceStartedAt ?? undefined };
  });
}

/** `$."a"."b"` for a dotted key, quoted so no key can change the path's meaning. */
function jsonPath(dotted: string): string {
  return (
    '$' +
    dotted
      .split('.')
      .map((p) => `."${p.replace(/["\\]/g, (c) => `\\${c}`)}"`)
      .join('')
  );
}
