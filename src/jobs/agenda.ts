import { hostname } from 'node:os';
import { Agenda, constant, type Job } from 'agenda';
import type { DataSource } from 'typeorm';
import type { JobsConfig } from '../config.js';
import type { Logger } from '../logger.js';
import { AgendaJobQueue } from './agenda-job-queue.js';
import { MAX_JOB_LOCK_LIFETIME_MS, type JobDefinition, type JobQueue } from './job-queue.js';
import { MysqlBackend, type MysqlBackendOptions } from './mysql-backend.js';

/** Options for {@link createAgenda}. */
export interface CreateAgendaOptions extends MysqlBackendOptions {
  /** How often the processor polls MySQL for due jobs (default: config JOBS_PROCESS_EVERY_MS, 1 s). */
  processEveryMs?: number;
  /** Lock lifetime of jobs whose definition sets none (default {@link MAX_JOB_LOCK_LIFETIME_MS}; Agenda's own would be 10 minutes). */
  defaultLockLifetimeMs?: number;
  /** Jobs run at once by this process, all names together (Agenda's default: 20). */
  maxConcurrency?: number;
  /**
   * Jobs of one name a process holds locked at once, running or queued locally (default 10).
   * Without a limit the first worker to poll takes every due job and the others idle.
   */
  defaultLockLimit?: number;
  /** Recorded as `last_modified_by` on rows this process touches (default host:pid). */
  name?: string;
}

/**
 * Creates this process's Agenda on the MySQL backend and the JobQueue over it. Nothing runs
 * until `agenda.start()`; enqueuing works at once, so api and bot processes simply never start it.
 *
 * Usage:
 * ```ts
 * const { agenda, queue } = createAgenda(ds, config);          // createServices does this
 * defineJobs(agenda, definitions);                              // so does createServices, once
 * await services.jobs.now('rental.provision', { deploymentId }, { uniqueKey: deploymentId });
 * // worker role (src/worker.ts): upsert the `every` rows, start
 * const worker = await startJobWorker(services);   // ...later: await worker.stop() drains
 * ```
 * Job names and payloads are declared in {@link JobPayloads} (job-queue.ts); src/container.ts
 * builds a handler for each. Handlers must be safe to run twice and run on wall-clock Agenda time
 * (a test's ManualClock does not move jobs). In tests use test/helpers/jobs.ts `startTestWorker(ctx)`.
 */
export function createAgenda(
  ds: DataSource,
  config: { jobs: Pick<JobsConfig, 'processEveryMs' | 'claim'> },
  options: CreateAgendaOptions = {},
): { agenda: Agenda; queue: AgendaJobQueue; backend: MysqlBackend } {
  const backend = new MysqlBackend(ds, { claim: config.jobs.claim, ...options });
  const agenda = new Agenda({
    backend,
    name: options.name ?? `${hostname()}:${process.pid}`,
    processEvery: options.processEveryMs ?? config.jobs.processEveryMs,
    defaultLockLifetime: options.defaultLockLifetimeMs ?? MAX_JOB_LOCK_LIFETIME_MS,
    ...(options.maxConcurrency ? { maxConcurrency: options.maxConcurrency } : {}),
    defaultLockLimit: options.defaultLockLimit ?? 10,
  });
  return { agenda, queue: new AgendaJobQueue(agenda, backend), backend };
}

/** The Agenda queue behind a Services' JobQueue, for the processes that run jobs. */
export function agendaQueueOf(jobs: JobQueue): AgendaJobQueue {
  if (!(jobs instanceof AgendaJobQueue))
    throw new Error('services.jobs is not an AgendaJobQueue, so it cannot run jobs');
  return jobs;
}

/** The Agenda behind a Services' JobQueue. */
export function agendaOf(jobs: JobQueue): Agenda {
  return agendaQueueOf(jobs).agenda;
}

/**
 * Registers job definitions on `agenda` (any process may: defining starts nothing, and it gives
 * enqueued jobs their defined priority). Handlers receive the job data.
 */
export function defineJobs(agenda: Agenda, definitions: readonly JobDefinition[]): void {
  for (const def of definitions) {
    agenda.define(
      def.name,
      async (job: Job) => {
        await def.handler((job.attrs.data ?? {}) as object);
      },
      {
        ...(def.concurrency ? { concurrency: def.concurrency } : {}),
        ...(def.lockLifetimeMs ? { lockLifetime: def.lockLifetimeMs } : {}),
        ...(def.priority !== undefined ? { priority: def.priority } : {}),
        ...(def.retry ? { backoff: constant({ delay: def.retry.delayMs, maxRetries: def.retry.attempts - 1 }) } : {}),
      },
    );
  }
}

/** A running job processor; `stop()` stops claiming and waits for running jobs to finish. */
export interface JobWorker {
  agenda: Agenda;
  stop(options?: { timeoutMs?: number }): Promise<void>;
}

export interface StartJobWorkerOptions {
  /** Further definitions to register before starting (tests); the service's own are defined already. */
  definitions?: readonly JobDefinition[];
  /** Upsert the `every` row of each repeating definition (default true). */
  scheduleRepeating?: boolean;
}

/** What a job worker runs on: the process's queue and the definitions registered on it. */
export interface JobWorkerDeps {
  jobs: JobQueue;
  logger: Logger;
  /** Every definition already registered on the queue's Agenda (src/container.ts does it). */
  jobDefinitions: readonly JobDefinition[];
}

/**
 * Starts processing on the Agenda behind `deps.jobs`: registers any extra `definitions`, upserts
 * one row per repeating job, then polls every `processEvery` (and wakes at once for jobs enqueued
 * in this process). `stop()` drains: no new claims, running jobs finish (up to `timeoutMs`), locks
 * of jobs claimed but not started are released.
 */
export async function startJobWorker(deps: JobWorkerDeps, options: StartJobWorkerOptions = {}): Promise<JobWorker> {
  const queue = agendaQueueOf(deps.jobs);
  const extra = options.definitions ?? [];
  defineJobs(queue.agenda, extra);
  const repeating =
    (options.scheduleRepeating ?? true)
      ? [...deps.jobDefinitions, ...extra].flatMap((def) =>
          def.everyMs ? [{ name: def.name, everyMs: def.everyMs }] : [],
        )
      : [];
  return startAgendaProcessing(queue, deps.logger, repeating);
}

/**
 * The processing half of {@link startJobWorker} for jobs already defined on `queue.agenda`:
 * starts Agenda, then upserts one `every` row per entry of `repeating`.
 */
export async function startAgendaProcessing(
  queue: AgendaJobQueue,
  logger: Logger,
  repeating: ReadonlyArray<{ name: string; everyMs: number }> = [],
): Promise<JobWorker> {
  const { agenda } = queue;
  const channel = queue.backend.notificationChannel;
  const onComplete = (job: Job) => {
    // A freed slot looks for more work of that name at once: with a lock limit, waiting for the
    // next poll would cap a worker at lockLimit jobs per processEvery.
    if (channel?.state === 'connected' && job.attrs._id) {
      void channel
        .publish({
          jobId: job.attrs._id,
          jobName: job.attrs.name,
          nextRunAt: new Date(),
          priority: job.attrs.priority,
          timestamp: new Date(),
        })
        .catch(() => undefined);
    }
  };
  const onError = (err: Error) => logger.error({ err }, 'job processing error');
  const onFail = (err: Error, job: Job) =>
    logger.warn({ err, job: job.attrs.name, jobId: String(job.attrs._id) }, 'job failed');
  agenda.on('complete', onComplete);
  agenda.on('error', onError);
  agenda.on('fail', onFail);
  queue.backend.repository.resumeClaims();
  await agenda.start();
  for (const { name, everyMs } of repeating) await agenda.every(everyMs, name, {});
  let stopped: Promise<void> | undefined;
  return {
    agenda,
    stop({ timeoutMs } = {}) {
      stopped ??= (async () => {
        // Agenda's stop() ends claiming and releases jobs claimed but not started; running jobs
        // keep their locks and are awaited here, which is what drain() alone would not release.
        // Agenda's own running list counts a job from before its 'start' event (its state is
        // saved first), so a job caught in that gap is awaited too.
        const runningJobs = runningJobsOf(agenda);
        // Claims still under way would land after stop() has released what it knows of.
        await queue.backend.repository.stopClaims();
        await agenda.stop(false);
        if (runningJobs.length > 0) {
          const done = new Promise<void>((resolve) => {
            const check = () => {
              if (runningJobs.length > 0) return;
              agenda.off('complete', onAnyComplete);
              resolve();
            };
            // Agenda removes a job from the list just after emitting 'complete'.
            const onAnyComplete = () => setImmediate(check);
            agenda.on('complete', onAnyComplete);
            check();
          });
          const timedOut =
            timeoutMs === undefined
              ? undefined
              : new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs).unref());
          if ((await Promise.race([done, ...(timedOut ? [timedOut] : [])])) === 'timeout') {
            logger.warn(
              { running: runningJobs.length },
              'jobs still running at shutdown; their locks expire for another worker',
            );
          }
        }
        agenda.off('complete', onComplete);
        agenda.off('error', onError);
        agenda.off('fail', onFail);
      })();
      return stopped;
    },
  };
}

/**
 * The live list of jobs Agenda has begun and not finished. Agenda keeps it on its job processor,
 * which it drops on stop(), so it is taken beforehand. agenda is pinned to one version
 * (package.json), and the drain tests in test/jobs fail if this reach into it stops holding.
 */
function runningJobsOf(agenda: Agenda): readonly unknown[] {
  const processor = (agenda as unknown as { jobProcessor?: { runningJobs?: unknown[] } }).jobProcessor;
  return processor?.runningJobs ?? [];
}
