import {
  toJobId,
  type JobId,
  type JobParameters,
  type JobRepository,
  type JobRepositoryOptions,
  type JobsOverview,
  type JobsQueryOptions,
  type JobsResult,
  type RemoveJobsOptions,
} from 'agenda';
import type { DataSource } from 'typeorm';
import { systemClock, type Clock } from '../clock.js';
import type { JobClaimMode } from '../config.js';
import { JobDashboardQueries } from './dashboard-queries.repository.js';
import { JobClaims } from './job-claims.repository.js';
import {
  AGENDA_JOBS_TABLE,
  dateConstraintValues,
  definitionValues,
  insertJob,
  jobById,
  unlockJobs,
  type WriteResult,
} from './job-rows.repository.js';
import { enqueueUnique, upsertSingle, upsertUnique, type EnqueueUniqueResult } from './unique-jobs.repository.js';

export { AGENDA_JOBS_TABLE } from './job-rows.repository.js';
export type { EnqueueUniqueResult } from './unique-jobs.repository.js';

/** Options for {@link MysqlJobRepository}. */
export interface MysqlJobRepositoryOptions {
  /** How often, per job name, a claim looks for abandoned jobs (lock past its deadline) before due ones (default 1000 ms). */
  abandonedScanEveryMs?: number;
  /** Where the repository's own notion of now comes from (debounce windows, scan cadence, job states); tests move it. Default: the system clock. */
  clock?: Clock;
  /** How due jobs are claimed (see {@link JobClaims}); the service passes JOBS_CLAIM. Default `skip-locked`. */
  claim?: JobClaimMode;
}

/**
 * Agenda 6 `JobRepository` on MySQL/MariaDB, through a TypeORM DataSource it does not own. The
 * rows and their mapping are in job-rows.repository.ts, claims in job-claims.repository.ts,
 * unique and repeating jobs in unique-jobs.repository.ts, the dashboard's queries in
 * dashboard-queries.repository.ts; this class saves jobs and their state and answers Agenda
 * through those. Transactions that meet a deadlock are retried
 * by the service's one rule (src/db/transaction.ts).
 */
export class MysqlJobRepository implements JobRepository {
  private readonly clock: Clock;
  private readonly claims: JobClaims;
  private readonly dashboard: JobDashboardQueries;

  constructor(
    private readonly ds: DataSource,
    options: MysqlJobRepositoryOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.claims = new JobClaims(ds, this.clock, options.abandonedScanEveryMs ?? 1000, options.claim ?? 'skip-locked');
    this.dashboard = new JobDashboardQueries(ds, this.clock);
  }

  async connect(): Promise<void> {
    // The DataSource belongs to the caller, and the schema to migrations: nothing to set up.
  }

  queryJobs(options?: JobsQueryOptions): Promise<JobsResult> {
    return this.dashboard.queryJobs(options);
  }

  getJobsOverview(): Promise<JobsOverview[]> {
    return this.dashboard.getJobsOverview();
  }

  getDistinctJobNames(): Promise<string[]> {
    return this.dashboard.getDistinctJobNames();
  }

  getJobById(id: string): Promise<JobParameters | null> {
    return jobById(this.ds, id);
  }

  getQueueSize(): Promise<number> {
    return this.dashboard.getQueueSize();
  }

  removeJobs(options: RemoveJobsOptions): Promise<number> {
    return this.dashboard.removeJobs(options);
  }

  disableJobs(options: RemoveJobsOptions): Promise<number> {
    return this.dashboard.setDisabled(options, true);
  }

  enableJobs(options: RemoveJobsOptions): Promise<number> {
    return this.dashboard.setDisabled(options, false);
  }

  purgeAllJobs(): Promise<number> {
    return this.dashboard.purgeAllJobs();
  }

  async saveJob<DATA = unknown>(
    job: JobParameters<DATA>,
    options: JobRepositoryOptions | undefined,
  ): Promise<JobParameters<DATA>> {
    const { _id, unique, uniqueOpts } = job;
    const by = options?.lastModifiedBy ?? null;
    if (_id) {
      const res: WriteResult = await this.ds.query(
        `UPDATE ${AGENDA_JOBS_TABLE} SET priority = ?, next_run_at = ?, type = ?, repeat_timezone = ?, repeat_interval = ?,
           data = ?, repeat_at = ?, disabled = ?, fork = ?, fail_reason = ?, fail_count = ?, failed_at = ?,
           last_modified_by = ?, start_date = ?, end_date = ?, skip_days = ?
         WHERE id = ? AND name = ?`,
        [
          ...definitionValues(job).slice(1),
          job.failReason ?? null,
          job.failCount ?? null,
          job.failedAt ?? null,
          by,
          ...dateConstraintValues(job),
          String(_id),
          job.name,
        ],
      );
      // A job removed while its handle was held: hand back what we were given, as Agenda expects.
      if (res.affectedRows === 0) return job;
      return (await this.getJobById(String(_id))) as JobParameters<DATA>;
    }
    if (job.type === 'single') return upsertSingle(this.ds, this.clock, job, by);
    if (unique && Object.keys(unique).length > 0) return upsertUnique(this.ds, this.clock, job, unique, uniqueOpts, by);
    const id = await insertJob(this.ds, job, by, null, null);
    return { ...job, _id: toJobId(String(id)) };
  }

  async saveJobState(job: JobParameters, options: JobRepositoryOptions | undefined): Promise<void> {
    if (!job._id) throw new Error('Cannot save job state without job ID');
    const res: WriteResult = await this.ds.query(
      `UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = ?, next_run_at = ?, last_run_at = ?, progress = ?, fail_reason = ?,
         fail_count = ?, failed_at = ?, last_finished_at = ?, last_modified_by = ?
       WHERE id = ? AND name = ?`,
      [
        job.lockedAt ?? null,
        job.nextRunAt ?? null,
        job.lastRunAt ?? null,
        job.progress ?? null,
        job.failReason ?? null,
        job.failCount ?? null,
        job.failedAt ?? null,
        job.lastFinishedAt ?? null,
        options?.lastModifiedBy ?? null,
        String(job._id),
        job.name,
      ],
    );
    if (res.affectedRows !== 1) {
      throw new Error(
        `job ${job._id} (name: ${job.name}) cannot be updated in the database, maybe it does not exist anymore?`,
      );
    }
  }

  async lockJob(job: JobParameters, options: JobRepositoryOptions | undefined): Promise<JobParameters | undefined> {
    if (!job._id || !job.nextRunAt) return undefined;
    return this.claims.lock({ ...job, nextRunAt: job.nextRunAt }, options?.lastModifiedBy ?? null);
  }

  async unlockJob(job: JobParameters): Promise<void> {
    if (!job._id) return;
    // A job whose next_run_at is NULL is running (or done); its lock is the run's, not ours.
    await this.ds.query(`UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = NULL WHERE id = ? AND next_run_at IS NOT NULL`, [
      String(job._id),
    ]);
  }

  async unlockJobs(jobIds: (JobId | string)[]): Promise<void> {
    await unlockJobs(this.ds, jobIds.map(String));
  }

  async getNextJobToRun(
    jobName: string,
    nextScanAt: Date,
    lockDeadline: Date,
    now: Date | undefined,
    options: JobRepositoryOptions | undefined,
  ): Promise<JobParameters | undefined> {
    return this.claims.next(
      jobName,
      nextScanAt,
      lockDeadline,
      now ?? this.clock.now(),
      options?.lastModifiedBy ?? null,
    );
  }

  /** See {@link enqueueUnique}. */
  enqueueUnique(job: JobParameters, uniqueKey: string): Promise<EnqueueUniqueResult> {
    return enqueueUnique(this.ds, job, uniqueKey);
  }

  /** See {@link JobClaims.stop}. */
  stopClaims(): Promise<void> {
    return this.claims.stop();
  }

  /** Claims again (a processor started anew on this repository). */
  resumeClaims(): void {
    this.claims.resume();
  }
}
