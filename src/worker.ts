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
  // The cache is warm before the first poll, as it was before the refresh became a job.
  try {
    const results = await services.inventory.refresh();
    const counts = results.map((r) => (r.ok ? `${r.provider} ${r.offers} offers` : `${r.provider} failed (${r.error})`));
    logger.info({ results }, `inventory loaded: ${counts.join(', ')}`);
  } catch (err) {
    logger.error({ err }, 'inventory refresh failed');
  }
  const jobs = await startJobWorker(services);
  return {
    async stop() {
      await jobs.stop({ timeoutMs: DRAIN_TIMEOUT_MS });
    },
  };
}
