import type { InstanceState } from '../../src/providers/provider.js';

/** Instance statuses as Lambda's `InstanceStatus` enum lists them. */
export type LambdaStatus = 'booting' | 'active' | 'unhealthy' | 'terminating' | 'terminated' | 'preempted';

/**
 * The one table from Lambda's statuses to ours.
 * - `unhealthy` is `pending`: Lambda reports failing health checks on a machine that may recover;
 *   calling it `failed` would destroy a rented machine over a blip, calling it `running` would
 *   hand out a machine Lambda itself distrusts. While it lasts, provisioning waits (and fails
 *   at the host's bound); a running rental is left alone.
 * - `preempted` is `failed`: Lambda took the machine back and it will not run again; the host
 *   terminates it (which Lambda accepts) and fails the rental.
 * - `terminated` is `gone`, as is a 404 `global/object-does-not-exist`.
 */
export const LAMBDA_STATE_TABLE: Readonly<Record<LambdaStatus, InstanceState>> = {
  booting: 'pending',
  active: 'running',
  unhealthy: 'pending',
  terminating: 'terminating',
  terminated: 'gone',
  preempted: 'failed',
};

/** Our state for a status Lambda reported; an unknown status is `pending` (never ready, never gone). */
export function lambdaState(status: string | undefined): InstanceState {
  return status && Object.hasOwn(LAMBDA_STATE_TABLE, status) ? LAMBDA_STATE_TABLE[status as LambdaStatus] : 'pending';
}
