import type { Services } from './container.js';

export interface Worker {
  stop(): Promise<void>;
}

/** Background work of the worker role. */
export async function startWorker(services: Services): Promise<Worker> {
  const { logger, config } = services;
  const refresh = async () => {
    try {
      const results = await services.inventory.refresh();
      logger.debug({ results }, 'inventory refreshed');
    } catch (err) {
      logger.error({ err }, 'inventory refresh failed');
    }
  };
  await refresh();
  const timer = setInterval(refresh, config.inventoryRefreshSeconds * 1000);
  return {
    async stop() {
      clearInterval(timer);
    },
  };
}
