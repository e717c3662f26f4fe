import { billingJobs } from '../modules/billing/billing.jobs.js';
import { inventoryJobs } from '../modules/inventory/inventory.jobs.js';
import { rentalJobs } from '../modules/rentals/rentals.jobs.js';
import type { JobDefinition } from './job-queue.js';

/**
 * Every module's job definitions. Add a module's `<area>.jobs.ts` array here; the worker role
 * registers them all (and every process defines them, so enqueued jobs get their priority).
 */
export const jobDefinitionLists: readonly (readonly JobDefinition<any>[])[] = [inventoryJobs, billingJobs, rentalJobs];

/** {@link jobDefinitionLists} flattened. */
export function allJobDefinitions(): JobDefinition<any>[] {
  return jobDefinitionLists.flat();
}
