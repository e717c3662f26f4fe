import { Initial1763800000000 } from './1763800000000-Initial.js';
import { LocalProviderInstances1763800002000 } from './1763800002000-LocalProviderInstances.js';
import { Payments1763800003000 } from './1763800003000-Payments.js';
import { RentalLifecycle1763800004000 } from './1763800004000-RentalLifecycle.js';

/** Every migration, oldest first. Register a new migration here. */
export const migrations = [
  Initial1763800000000, LocalProviderInstances1763800002000, Payments1763800003000,
  RentalLifecycle1763800004000,
];
