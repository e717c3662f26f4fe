import { Initial1763800000000 } from './1763800000000-Initial.js';

/** Every migration, oldest first. Register a new migration here. */
export const migrations = [Initial1763800000000];
