/** Names of the rental lifecycle jobs, shared by the API (which enqueues) and the worker (which runs them). */
export const RENTAL_JOBS = {
  provision: 'rental.provision',
  terminate: 'rental.terminate',
  expire: 'rental.expire',
  meter: 'rental.meter',
  reconcile: 'rental.reconcile',
} as const;
