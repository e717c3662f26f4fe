import type { JobDefinition } from '../../jobs/job-queue.js';

/** Re-reads every provider's offers into the cache, on INVENTORY_REFRESH_SECONDS. */
export const inventoryJobs: JobDefinition[] = [
  {
    name: 'inventory.refresh',
    everyMsFromConfig: (config) => config.inventoryRefreshSeconds * 1000,
    // A provider that hangs should not hold the sweep for Agenda's default ten minutes.
    lockLifetimeMs: 5 * 60 * 1000,
    concurrency: 1,
    async handler(_data, services) {
      const results = await services.inventory.refresh();
      services.logger.debug({ results }, 'inventory refreshed');
    },
  },
];
