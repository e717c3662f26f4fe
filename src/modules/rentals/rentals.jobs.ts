import type { JobDefinition } from '../../jobs/job-queue.js';
import { RentalLifecycle } from './lifecycle/rental-lifecycle.js';
import { RENTAL_JOBS } from './rental-jobs.names.js';

interface DeploymentJob {
  deploymentId: string;
}

/** The rental lifecycle jobs; each reads state from MySQL, so a repeated run converges. */
export const rentalJobs: JobDefinition<any>[] = [
  {
    name: RENTAL_JOBS.provision,
    handler: (data: DeploymentJob, s) => new RentalLifecycle(s).provision(data.deploymentId),
    concurrency: 8,
    lockLifetimeMs: 120_000,
  },
  {
    name: RENTAL_JOBS.terminate,
    handler: (data: DeploymentJob, s) => new RentalLifecycle(s).terminate(data.deploymentId),
    concurrency: 8,
    lockLifetimeMs: 120_000,
    priority: 10,
  },
  {
    name: RENTAL_JOBS.expire,
    handler: (data: DeploymentJob, s) => new RentalLifecycle(s).expire(data.deploymentId),
  },
  {
    name: RENTAL_JOBS.meter,
    handler: async (_data, s) => {
      await new RentalLifecycle(s).meter();
    },
    everyMsFromConfig: (c) => c.meteringEveryMs,
    concurrency: 1,
  },
  {
    name: RENTAL_JOBS.reconcile,
    handler: async (_data, s) => {
      await new RentalLifecycle(s).reconcile();
    },
    everyMs: 60_000,
    concurrency: 1,
  },
];
