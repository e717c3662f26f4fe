import { toJobId, type JobParameters } from 'agenda';
import type { DataSource, QueryRunner } from 'typeorm';
import type { Sql } from '../db/sql.js';

/** The table created by migrations/1763800001000-AgendaJobs.ts. */
export const AGENDA_JOBS_TABLE = 'agenda_jobs';

/**
 * Every read takes the JSON columns also as plain text: whether mysql2 hands a JSON column back
 * parsed depends on the server's column metadata, and a job's data may itself be a string that
 * looks like JSON, so guessing from the value's type would parse some data twice.
 */
export const JOB_COLUMNS = '*, CAST(data AS CHAR) AS data_text, CAST(skip_days AS CHAR) AS skip_days_text';

/** One `agenda_jobs` row as read with {@link JOB_COLUMNS}. */
export interface JobRow {
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

/** What mysql2 answers for a write. */
export interface WriteResult {
  affectedRows: number;
  insertId: number;
}

/** Where a job statement runs: the pool (autocommit), a query runner, or a caller's transaction. */
export type JobSql = DataSource | QueryRunner | Sql;

/** Inserts one job row and returns its id. */
export async function insertJob(
  sql: JobSql,
  job: JobParameters,
  by: string | null,
  debounceStartedAt: Date | null,
  uniqueKey: string | null,
): Promise<number> {
  const res: WriteResult = await sql.query(
    `INSERT INTO ${AGENDA_JOBS_TABLE} (name, priority, next_run_at, type, repeat_timezone, repeat_interval, data, repeat_at,
       disabled, fork, last_modified_by, debounce_started_at, start_date, end_date, skip_days, unique_key)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [...definitionValues(job), by, debounceStartedAt, ...dateConstraintValues(job), uniqueKey],
  );
  return Number(res.insertId);
}

/** Reads one job by id, or null when there is none (or `id` is not one of ours). */
export async function jobById(sql: JobSql, id: string): Promise<JobParameters | null> {
  if (!isId(id)) return null;
  const rows: JobRow[] = await sql.query(`SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE id = ?`, [id]);
  return rows[0] ? rowToJob(rows[0]) : null;
}

/** Releases the locks of the given jobs (ids that are not ours are skipped). */
export async function unlockJobs(sql: JobSql, jobIds: readonly string[]): Promise<void> {
  const ids = jobIds.filter(isId);
  if (ids.length === 0) return;
  await sql.query(
    `UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = NULL WHERE id IN (${ids.map(() => '?').join(', ')})`,
    ids,
  );
}

export function whereClause(conditions: string[]): string {
  return conditions.length ? ` WHERE ${conditions.join(' AND ')}` : '';
}

/** True for an id of this table; anything else names no job (Agenda ids are strings). */
export function isId(id: string): boolean {
  return /^[0-9]{1,20}$/.test(id);
}

/** name, priority, next_run_at, type, repeat_timezone, repeat_interval, data, repeat_at, disabled, fork */
export function definitionValues(job: JobParameters): unknown[] {
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
export function dateConstraintValues(job: JobParameters): unknown[] {
  return [job.startDate ?? null, job.endDate ?? null, job.skipDays ? JSON.stringify(job.skipDays) : null];
}

/** The JSON columns' text, parsed exactly once by us (see JOB_COLUMNS). */
function parseJson(text: string | null): unknown {
  return text === null ? null : JSON.parse(text);
}

/** An `agenda_jobs` row as Agenda's job parameters. */
export function rowToJob(row: JobRow): JobParameters {
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
