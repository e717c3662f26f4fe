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
