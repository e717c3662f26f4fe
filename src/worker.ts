import type { Services } from './container.js';
import { reconcilePayments, RECONCILE_PAYMENTS_EVERY_MS } from './modules/billing/billing.jobs.js';

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
  const paymentsTimer = setInterval(() => {
    reconcilePayments(services).catch((err) => logger.error({ err }, 'payment reconciliation failed'));
  }, RECONCILE_PAYMENTS_EVERY_MS);
  return {
    async stop() {
      clearInterval(timer);
      clearInterval(paymentsTimer);
    },
  };
}
