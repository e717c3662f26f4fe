import type { JobParameters } from 'agenda';
import type { DataSource } from 'typeorm';
import type { Clock } from '../clock.js';
import { inTransaction } from '../db/transaction.js';
import { AGENDA_JOBS_TABLE, JOB_COLUMNS, rowToJob, unlockJobs, type JobRow } from './job-rows.repository.js';

/** One scan a claim tries: a WHERE condition of fixed text and its parameters. */
type Scan = [condition: string, params: unknown[]];

/**
 * How a process takes jobs to run: a short transaction, `SELECT … ORDER BY next_run_at,
 * priority DESC LIMIT 1 FOR UPDATE SKIP LOCKED` followed by an UPDATE of `locked_at`, so
 * concurrent workers in any number of processes each get a different row and never wait on each
 * other. Every time it stores comes from the caller (Agenda's own clock), never from the
 * server's NOW(), so lock deadlines compare like with like.
 */
export class JobClaims {
  /** Per job name: when a claim next looks for abandoned jobs first. */
  private readonly abandonedScanAt = new Map<string, number>();
  /** Claims under way, and whether this process has stopped claiming (see stop). */
  private readonly claiming = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly abandonedScanEveryMs: number,
  ) {}

  /** Claims `job` itself, if it is still due at the time the caller read and nobody holds it. */
  lock(job: JobParameters & { nextRunAt: Date }, by: string | null): Promise<JobParameters | undefined> {
    return this.claim(
      [[`id = ? AND name = ? AND locked_at IS NULL AND next_run_at = ? AND disabled = 0`, [String(job._id), job.name, job.nextRunAt]]],
      this.clock.now(),
      by,
    );
  }

  /** Claims the next job of `jobName` due by `nextScanAt`, or one whose lock is older than `lockDeadline`. */
  next(jobName: string, nextScanAt: Date, lockDeadline: Date, lockTime: Date, by: string | null): Promise<JobParameters | undefined> {
    // Two index range scans rather than one OR, which would not use the index order: due jobs
    // nobody holds, and jobs whose lock outlived its deadline (their runner is gone). Each stops
    // at its first free row. Abandoned jobs are rare, so the second scan runs only when the first
    // finds nothing, except that once a second per name it goes first: a standing backlog of due
    // jobs cannot starve an abandoned one, and the common claim stays a single query.
    const due: Scan = ['name = ? AND disabled = 0 AND locked_at IS NULL AND next_run_at <= ?', [jobName, nextScanAt]];
    const abandoned: Scan = ['name = ? AND disabled = 0 AND locked_at <= ?', [jobName, lockDeadline]];
    const nowMs = this.clock.now().getTime();
    const abandonedFirst = nowMs >= (this.abandonedScanAt.get(jobName) ?? 0);
    if (abandonedFirst) this.abandonedScanAt.set(jobName, nowMs + this.abandonedScanEveryMs);
    return this.claim(abandonedFirst ? [abandoned, due] : [due, abandoned], lockTime, by);
  }

  /**
   * Stops this process's claims and waits for those under way: a claim that lands after Agenda's
   * stop() has released its jobs would otherwise leave its job locked until the lock expires.
   * Such a claim releases its job itself and reports none.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled([...this.claiming]);
  }

  /** Claims again (a processor started anew on this repository). */
  resume(): void {
    this.stopped = false;
  }

  private async claim(scans: Scan[], lockTime: Date, by: string | null): Promise<JobParameters | undefined> {
    if (this.stopped) return undefined;
    const claimed = this.claimOnce(scans, lockTime, by);
    this.claiming.add(claimed);
    try {
      const job = await claimed;
      if (job?._id && this.stopped) {
        await unlockJobs(this.ds, [String(job._id)]);
        return undefined;
      }
      return job;
    } finally {
      this.claiming.delete(claimed);
    }
  }

  /** Locks the first free row of the first scan that has one, in one short transaction. */
  private claimOnce(scans: Scan[], lockTime: Date, by: string | null): Promise<JobParameters | undefined> {
    // READ COMMITTED: a locking read under REPEATABLE READ also takes gap locks, which stall the
    // producers inserting due jobs at the end of the very range the workers scan. Row locks
    // plus SKIP LOCKED are all a claim needs.
    return inTransaction(
      this.ds,
      async (m) => {
        let row: JobRow | undefined;
        for (const [condition, params] of scans) {
          const rows: JobRow[] = await m.query(
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
          await m.query(`UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = ?, last_modified_by = ? WHERE id = ?`, [lockTime, by, row.id]);
        }
        if (!job) return undefined;
        return { ...job, lockedAt: lockTime, lastModifiedBy: by ?? undefined };
      },
      'READ COMMITTED',
    );
  }
}
