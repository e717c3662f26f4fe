/**
 * How services ask for background work without knowing about Agenda. Every process (api, worker,
 * bot) gets one: enqueuing only writes a job row, and whichever worker process is running picks it
 * up. Handlers must be safe to run twice; a job may also be lost to nothing but a crash before
 * commit, which the reconciler covers.
 */
export interface JobQueue {
  /**
   * Run `name` with `data` as soon as a worker is free.
   * With `uniqueKey`, at most one pending job per (name, uniqueKey) exists: enqueuing again while
   * one is waiting does not add a second (it may move the waiting one earlier).
   */
  now<T extends object>(name: string, data: T, options?: EnqueueOptions): Promise<void>;
  /** Run `name` with `data` at `when` (or at once if `when` is past). Same `uniqueKey` rule. */
  schedule<T extends object>(when: Date, name: string, data: T, options?: EnqueueOptions): Promise<void>;
}

export interface EnqueueOptions {
  /** Deduplicates waiting jobs of the same name, e.g. the deployment id. */
  uniqueKey?: string;
}

/**
 * One kind of background job. Modules export arrays of these from `src/modules/<area>/<area>.jobs.ts`
 * and src/jobs/job-definitions.ts lists them all; the worker registers every one with Agenda.
 * `handler` is a plain function that tests call directly: it reads state from MySQL, acts and
 * writes state back, so a run repeated or resumed after a crash converges on the same result.
 */
export interface JobDefinition<T extends object = Record<string, unknown>> {
  name: string;
  handler(data: T, services: import('../container.js').Services): Promise<void>;
  /** Repeat on this interval as a single job row (Agenda `every`), for periodic sweeps. */
  everyMs?: number;
  /**
   * Like `everyMs` but read from configuration when the worker starts (e.g. the inventory refresh
   * period); takes precedence over `everyMs`.
   */
  everyMsFromConfig?(config: import('../config.js').Config): number;
  /** Parallel runs of this job per worker process (Agenda default otherwise). */
  concurrency?: number;
  /** How long a claimed run may go without finishing before another worker may take it over. */
  lockLifetimeMs?: number;
  /** Higher runs first when several are due. */
  priority?: number;
}
