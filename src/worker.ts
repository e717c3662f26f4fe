import type { Services } from './container.js';
import { startJobWorker } from './jobs/agenda.js';

export interface Worker {
  stop(): Promise<void>;
}

/** How long SIGTERM waits for running jobs before leaving them to lock expiry (main.ts forces exit at 30 s). */
const DRAIN_TIMEOUT_MS = 25_000;

/**
 * Background work of the worker role: every job defined by createServices runs on Agenda (MySQL
 * backend), including the periodic inventory refresh and payment reconciliation. `stop()` drains
 * running jobs.
 */
export async function startWorker(services: Services): Promise<Worker> {
  const { logger } = services;
  // Not awaited: the api serves the offers MySQL already holds, and jobs start at once instead
  // of after the slowest provider's answer (or its timeout).
  const warmUp = services.inventory.refresh().then(
    (results) => {
      const counts = results.map((r) =>
        r.ok ? `${r.provider} ${r.offers} offers` : `${r.provider} failed (${r.error})`,
      );
      logger.info({ results }, `inventory loaded: ${counts.join(', ')}`);
    },
    (err: unknown) => logger.error({ err }, 'inventory refresh failed'),
  );
  const jobs = await startJobWorker(services);
  return {
    async stop() {
      let timer: NodeJS.Timeout | undefined;
      const drainBound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, DRAIN_TIMEOUT_MS);
      });
      // The start-up refresh is drained like a job: its writes end before the pool closes.
      await Promise.all([jobs.stop({ timeoutMs: DRAIN_TIMEOUT_MS }), Promise.race([warmUp, drainBound])]);
      clearTimeout(timer);
      // The machines see the idle sweep's kept connections end with a goodbye, not a reset.
      services.lifecycle.idleSessions.close();
    },
  };
}
