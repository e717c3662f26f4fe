import type { JobParameters } from 'agenda';
import type { DataSource } from 'typeorm';
import type { Clock } from '../clock.js';
import type { JobClaimMode } from '../config.js';
import { inTransaction, retryingTransaction } from '../db/transaction.js';
import { observeJobLag } from '../metrics/outcomes.js';
import {
  AGENDA_JOBS_TABLE,
  JOB_COLUMNS,
  rowToJob,
  unlockJobs,
  type JobRow,
  type WriteResult,
} from './job-rows.repository.js';

/** One scan a claim tries: a WHERE condition of fixed text and its parameters. */
type Scan = [condition: string, params: unknown[]];

/** The order jobs are claimed in: earliest due first, then the higher priority (ix_agenda_jobs_claim's order). */
const CLAIM_ORDER = 'ORDER BY next_run_at ASC, priority DESC';

/**
 * Candidates an `update` claim reads at once. Racing workers read the same head of the queue and
 * each takes the first it can, so a few more than the workers that race keep a loser from
 * reading again; more would only read rows that are gone by the time they are tried.
 */
const UPDATE_CANDIDATES = 8;

/**
 * Reads of candidates per scan before an `update` claim gives up until the next poll. Each read
 * after the first follows a full set of lost races, which means other workers are taking jobs,
 * so the bound only keeps a claim from spinning on the database when they all keep winning.
 */
const UPDATE_ROUNDS = 16;

/**
 * How a process takes jobs to run. Which rows are due, and in which order, is one rule (the scans
 * of {@link JobClaims.next} and {@link JobClaims.lock}, and {@link CLAIM_ORDER}); the
 * {@link JobClaimMode} decides only how a row is taken:
 *
 * - `skip-locked`: a short transaction, `SELECT … LIMIT 1 FOR UPDATE SKIP LOCKED` then an UPDATE
 *   of `locked_at`, so concurrent workers each get a different row and never wait on each other.
 * - `update`: a plain SELECT of the first few candidate ids, then, in order, an
 *   `UPDATE … WHERE id = ? AND <the scan's condition>` until one matches (the condition is
 *   checked again on the row's latest version, so of racing workers exactly one wins it), then
 *   a read of the row this worker won. No lock outlives a statement and nothing needs SKIP
 *   LOCKED, which TiDB ignores, Vitess refuses and Galera applies per node only.
 *
 * Every time it stores comes from the caller (Agenda's own clock), never from the server's NOW(),
 * so lock deadlines compare like with like.
 */
export class JobClaims {
  /** Per job name: when a claim next looks for abandoned jobs first. */
  private readonly abandonedScanAt = new Map<string, number>();
  /** Claims under way, and whether this process has stopped claiming (see stop). */
  private readonly claiming = new Set<Promise<unknown>>();
  /** Per job name: the places of this process's `update` claims under way (see takeByUpdate). */
  private readonly updatePlaces = new Map<string, Set<number>>();
  private stopped = false;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly abandonedScanEveryMs: number,
    private readonly mode: JobClaimMode,
  ) {}

  /** Claims `job` itself, if it is still due at the time the caller read and nobody holds it. */
  lock(job: JobParameters & { nextRunAt: Date }, by: string | null): Promise<JobParameters | undefined> {
    return this.claim(
      job.name,
      [
        [
          `id = ? AND name = ? AND locked_at IS NULL AND next_run_at = ? AND disabled = 0`,
          [String(job._id), job.name, job.nextRunAt],
        ],
      ],
      this.clock.now(),
      by,
    );
  }

  /** Claims the next job of `jobName` due by `nextScanAt`, or one whose lock is older than `lockDeadline`. */
  next(
    jobName: string,
    nextScanAt: Date,
    lockDeadline: Date,
    lockTime: Date,
    by: string | null,
  ): Promise<JobParameters | undefined> {
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
    return this.claim(jobName, abandonedFirst ? [abandoned, due] : [due, abandoned], lockTime, by);
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

  private async claim(
    jobName: string,
    scans: Scan[],
    lockTime: Date,
    by: string | null,
  ): Promise<JobParameters | undefined> {
    if (this.stopped) return undefined;
    const claimed = this.claimOnce(jobName, scans, lockTime, by);
    this.claiming.add(claimed);
    try {
      const job = await claimed;
      if (job?._id && this.stopped) {
        await unlockJobs(this.ds, [String(job._id)]);
        return undefined;
      }
      if (job) observeJobLag(job.name, job.nextRunAt, lockTime);
      return job;
    } finally {
      this.claiming.delete(claimed);
    }
  }

  /** Takes the first free row of the first scan that has one, the way {@link mode} says. */
  private claimOnce(
    jobName: string,
    scans: Scan[],
    lockTime: Date,
    by: string | null,
  ): Promise<JobParameters | undefined> {
    return this.mode === 'update'
      ? this.takeByUpdate(jobName, scans, lockTime, by)
      : this.takeSkippingLocked(scans, lockTime, by);
  }

  /** `skip-locked`: locks the first free row in one short transaction. */
  private takeSkippingLocked(scans: Scan[], lockTime: Date, by: string | null): Promise<JobParameters | undefined> {
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
             ${CLAIM_ORDER} LIMIT 1 FOR UPDATE SKIP LOCKED`,
            params,
          );
          row = rows[0];
          if (row) break;
        }
        // Read before the lock is written: a row that cannot be read must not stay claimed.
        const job = row ? rowToJob(row) : undefined;
        if (row) {
          await m.query(`UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = ?, last_modified_by = ? WHERE id = ?`, [
            lockTime,
            by,
            row.id,
          ]);
        }
        if (!job) return undefined;
        return { ...job, lockedAt: lockTime, lastModifiedBy: by ?? undefined };
      },
      'READ COMMITTED',
    );
  }

  /** `update`: takes the first free row by a conditional UPDATE, with no lock held between statements. */
  private async takeByUpdate(
    jobName: string,
    scans: Scan[],
    lockTime: Date,
    by: string | null,
  ): Promise<JobParameters | undefined> {
    // Agenda starts a claim at every poll and every finished job without waiting for the claims
    // under way, so several claims of one name run at once in a process. As SKIP LOCKED hands
    // them the first, second, … free row, each starts at the candidate of its place among them:
    // they race only other processes' claims, not each other down the same list.
    const places = this.updatePlaces.get(jobName) ?? new Set<number>();
    this.updatePlaces.set(jobName, places);
    let place = 0;
    while (places.has(place)) place++;
    places.add(place);
    try {
      for (const [condition, params] of scans) {
        for (let round = 0; round < UPDATE_ROUNDS; round++) {
          const candidates: Array<{ id: number | string }> = await this.ds.query(
            `SELECT id FROM ${AGENDA_JOBS_TABLE} WHERE ${condition} ${CLAIM_ORDER} LIMIT ?`,
            [...params, place + UPDATE_CANDIDATES],
          );
          for (const { id } of [...candidates.slice(place), ...candidates.slice(0, place)]) {
            const job = await this.takeOne(String(id), condition, params, lockTime, by);
            if (job) return job;
          }
          // Every candidate went to other claims: more may wait behind them, unless the scan had no more.
          if (candidates.length < place + UPDATE_CANDIDATES) break;
        }
      }
      return undefined;
    } finally {
      places.delete(place);
      if (places.size === 0) this.updatePlaces.delete(jobName);
    }
  }

  /** One conditional UPDATE of candidate `id`; the job when this claim won it. */
  private async takeOne(
    id: string,
    condition: string,
    params: unknown[],
    lockTime: Date,
    by: string | null,
  ): Promise<JobParameters | undefined> {
    // FORCE INDEX: left to itself MariaDB may walk ix_agenda_jobs_locked_at's whole NULL range
    // for this UPDATE, locking every free job and the gaps producers insert into, where the
    // primary key locks one row. The one retry rule covers the rest: on Galera a claim that
    // loses certification to another node's comes back as a deadlock.
    const res: WriteResult = await retryingTransaction(() =>
      this.ds.query(
        `UPDATE ${AGENDA_JOBS_TABLE} FORCE INDEX (PRIMARY) SET locked_at = ?, last_modified_by = ? WHERE id = ? AND ${condition}`,
        [lockTime, by, id, ...params],
      ),
    );
    if (res.affectedRows !== 1) return undefined;
    const job = await this.readWon(id, lockTime);
    return job && { ...job, lockedAt: lockTime, lastModifiedBy: by ?? undefined };
  }

  /**
   * The row an `update` claim won, read after the claim so it carries what was written up to then.
   * Undefined when it no longer carries this claim's lock (removed, or its lock already taken over).
   */
  private async readWon(id: string, lockTime: Date): Promise<JobParameters | undefined> {
    try {
      const rows: JobRow[] = await this.ds.query(
        `SELECT ${JOB_COLUMNS} FROM ${AGENDA_JOBS_TABLE} WHERE id = ? AND locked_at = ?`,
        [id, lockTime],
      );
      return rows[0] ? rowToJob(rows[0]) : undefined;
    } catch (err) {
      // A job won but not handed over (unreadable row, lost connection) must not stay claimed until
      // its lock expires: a skip-locked claim's rollback leaves it free. Best effort: if the
      // database is unreachable too, the lock's lifetime frees it, as it frees a dead worker's.
      await this.ds
        .query(
          `UPDATE ${AGENDA_JOBS_TABLE} FORCE INDEX (PRIMARY) SET locked_at = NULL WHERE id = ? AND locked_at = ?`,
          [id, lockTime],
        )
        .catch(() => undefined);
      throw err;
    }
  }
}
