import {
  computeJobState,
  type JobsOverview,
  type JobsQueryOptions,
  type JobsResult,
  type JobsSort,
  type JobWithState,
  type RemoveJobsOptions,
} from 'agenda';
import type { DataSource } from 'typeorm';
import type { Clock } from '../clock.js';
import {
  AGENDA_JOBS_TABLE,
  isId,
  JOB_COLUMNS,
  rowToJob,
  whereClause,
  type JobRow,
  type WriteResult,
} from './job-rows.repository.js';

/**
 * What the dashboard (agendash) and Agenda's management calls ask of the job table: lists with
 * each job's state, per-name counts, and removing, disabling or enabling jobs by a filter.
 * States are computed at the given clock's now, like Agenda's other backends do.
 */
export class JobDashboardQueries {
  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
  ) {}

  async queryJobs(options: JobsQueryOptions = {}): Promise<JobsResult> {
    const { state, includeDisabled = true, sort, skip = 0, limit = 0 } = options;
    const where = filter({ ...options, id: options.id, ids: options.ids });
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
        o = {
          name: row.name,
          total: 0,
          running: 0,
          scheduled: 0,
          queued: 0,
          completed: 0,
          failed: 0,
          repeating: 0,
          paused: 0,
        };
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
    const rows: { name: string }[] = await this.ds.query(
      `SELECT DISTINCT name FROM ${AGENDA_JOBS_TABLE} ORDER BY name`,
    );
    return rows.map((r) => r.name);
  }

  async getQueueSize(): Promise<number> {
    const [row] = await this.ds.query(`SELECT COUNT(*) AS n FROM ${AGENDA_JOBS_TABLE} WHERE next_run_at < ?`, [
      this.clock.now(),
    ]);
    return Number(row.n);
  }

  /** Deletes the jobs the filter names; an empty filter deletes nothing. */
  async removeJobs(options: RemoveJobsOptions): Promise<number> {
    const where = filter(options);
    if (where.conditions.length === 0) return 0;
    const res: WriteResult = await this.ds.query(
      `DELETE FROM ${AGENDA_JOBS_TABLE}${whereClause(where.conditions)}`,
      where.params,
    );
    return res.affectedRows;
  }

  /** Disables or enables the jobs the filter names; an empty filter changes nothing. */
  async setDisabled(options: RemoveJobsOptions, disabled: boolean): Promise<number> {
    const where = filter(options);
    if (where.conditions.length === 0) return 0;
    const res: WriteResult = await this.ds.query(
      `UPDATE ${AGENDA_JOBS_TABLE} SET disabled = ?${whereClause(where.conditions)}`,
      [disabled ? 1 : 0, ...where.params],
    );
    return res.affectedRows;
  }

  async purgeAllJobs(): Promise<number> {
    const res: WriteResult = await this.ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE}`);
    return res.affectedRows;
  }
}

function filter(options: RemoveJobsOptions & { names?: string[] }): { conditions: string[]; params: unknown[] } {
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

function orderBy(sort: JobsSort | undefined): string {
  // MySQL sorts NULL first ascending; `x IS NULL` first keeps NULLs last like the other backends.
  const dir = (d: unknown) => (d === 'asc' || d === 1 ? 'ASC' : 'DESC');
  if (!sort) return 'next_run_at IS NULL, next_run_at DESC, last_run_at IS NULL, last_run_at DESC';
  const parts: string[] = [];
  if (sort.nextRunAt !== undefined) parts.push(`next_run_at IS NULL, next_run_at ${dir(sort.nextRunAt)}`);
  if (sort.lastRunAt !== undefined) parts.push(`last_run_at IS NULL, last_run_at ${dir(sort.lastRunAt)}`);
  if (sort.lastFinishedAt !== undefined)
    parts.push(`last_finished_at IS NULL, last_finished_at ${dir(sort.lastFinishedAt)}`);
  if (sort.priority !== undefined) parts.push(`priority ${dir(sort.priority)}`);
  if (sort.name !== undefined) parts.push(`name ${dir(sort.name)}`);
  return parts.length
    ? parts.join(', ')
    : 'next_run_at IS NULL, next_run_at DESC, last_run_at IS NULL, last_run_at DESC';
}
