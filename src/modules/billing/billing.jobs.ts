import type { Services } from '../../container.js';
import type { JobDefinition } from '../../jobs/job-queue.js';

/** How often the worker looks for payments whose webhook never arrived. */
export const RECONCILE_PAYMENTS_EVERY_MS = 5 * 60 * 1000;

/**
 * Job handler: settles checkouts left OPEN well past their expiry (lost or misconfigured webhooks)
 * by asking the payment provider. Safe to run twice or in several workers at once: every
 * settlement goes through the same locked, once-per-checkout path as a webhook.
 */
export async function reconcilePayments(services: Pick<Services, 'payments' | 'logger'>): Promise<number> {
  const settled = await services.payments.events.reconcile();
  if (settled) services.logger.info({ settled }, 'payments reconciled');
  return settled;
}

/** Billing's background jobs, listed in src/jobs/job-definitions.ts. */
export const billingJobs: JobDefinition[] = [
  {
    name: 'payments.reconcile',
    everyMs: RECONCILE_PAYMENTS_EVERY_MS,
    concurrency: 1,
    async handler(_data, services) {
      await reconcilePayments(services);
    },
  },
];
