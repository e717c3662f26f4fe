/*
 * Running real Agenda jobs in a test (MySQL backend on the run's test database):
 *
 *   const ctx = await createTestContext();
 *   const worker = await startTestWorker(ctx);             // runs every definition in job-definitions.ts
 *   await ctx.services.jobs.now('rental.provision', { deploymentId }, { uniqueKey: deploymentId });
 *   await worker.settle();                                 // until no due one-off job is left or running
 *   ... assert on MySQL state ...
 *   await worker.stop();                                   // in afterEach/finally: drains running jobs
 *
 * Repeating (`every`) jobs are not scheduled unless `scheduleRepeating: true`; jobs run on wall-clock
 * time, not the context's ManualClock (schedule with real Dates). Extra test-only definitions go in
 * `definitions` (enqueue them through `agendaQueueOf(ctx.services.jobs)`, which takes any name).
 * The service's handlers can also be called directly: `ctx.services.lifecycle.provision(id)`.
 */
import type { Agenda } from 'agenda';
import type { Services } from '../../src/container.js';
import { agendaOf, startJobWorker } from '../../src/jobs/agenda.js';
import type { JobDefinition } from '../../src/jobs/job-queue.js';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { waitFor } from './wait.js';

export interface TestWorker {
  agenda: Agenda;
  /**
   * Resolves once no one-off job is due, claimed or running (repeating rows are ignored);
   * rejects after `timeoutMs` (default 10 s). Jobs enqueued by handlers are waited for too.
   */
  settle(timeoutMs?: number): Promise<void>;
  /** Stops claiming and waits for running jobs (up to `timeoutMs`, default 10 s). */
  stop(timeoutMs?: number): Promise<void>;
}

export interface TestWorkerOptions {
  /** Poll interval of the worker (default 50 ms; same-process enqueues are picked up at once anyway). */
  processEveryMs?: number;
  /** Test-only definitions, registered in addition to the service's own. */
  definitions?: JobDefinition[];
  /** Upsert the `every` rows of repeating definitions (default false). */
  scheduleRepeating?: boolean;
}

/** Starts an in-process Agenda worker on `ctx.services.jobs` (see the note at the top of this file). */
export async function startTestWorker(ctx: { services: Services }, opts: TestWorkerOptions = {}): Promise<TestWorker> {
  const agenda = agendaOf(ctx.services.jobs);
  agenda.processEvery(opts.processEveryMs ?? 50);
  const worker = await startJobWorker(ctx.services, {
    definitions: opts.definitions ?? [],
    scheduleRepeating: opts.scheduleRepeating ?? false,
  });
  return {
    agenda,
    async settle(timeoutMs = 10_000) {
      const names = Object.keys(agenda.definitions);
      if (names.length === 0) return;
      let left = 0;
      await waitFor(
        async () => {
          const [row] = await ctx.services.ds.query(
            `SELECT COUNT(*) AS n FROM ${AGENDA_JOBS_TABLE}
             WHERE type = 'normal' AND disabled = 0 AND name IN (${names.map(() => '?').join(', ')})
               AND (locked_at IS NOT NULL OR next_run_at <= ?)`,
            [...names, new Date()],
          );
          left = Number(row.n);
          return left === 0;
        },
        { timeoutMs, intervalMs: 20, what: () => `jobs to settle (${left} due or running)` },
      );
    },
    stop(timeoutMs = 10_000) {
      return worker.stop({ timeoutMs });
    },
  };
}
