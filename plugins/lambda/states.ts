import type { StateReading } from '../../src/providers/kit/state-watch.js';
import type { InstanceState } from '../../src/providers/provider.js';

/** Instance statuses as Lambda's `InstanceStatus` enum lists them (unchanged from 1.8.3 to 1.9.3). */
export type LambdaStatus = 'booting' | 'active' | 'unhealthy' | 'terminating' | 'terminated' | 'preempted';

/**
 * The one table from Lambda's statuses to ours.
 * - `unhealthy` is `pending`: Lambda reports failing health checks on a machine that may recover;
 *   calling it `failed` would destroy a machine over a blip, calling it `running` would hand out a
 *   machine Lambda itself distrusts. The host reads states only while provisioning, so an
 *   instance that stays unhealthy fails at the host's provisioning bound and is destroyed; a
 *   rental already running is left alone.
 * - `preempted` is `failed`: Lambda took the machine back and it will not run again; the host
 *   terminates it (which Lambda accepts) and fails the rental at once.
 * - `terminated` is `gone`, as is a 404 `global/object-does-not-exist`.
 * A status not in this table goes through the kit's `StateWatch` (see {@link lambdaStateReading}).
 */
export const LAMBDA_STATE_TABLE: Readonly<Record<LambdaStatus, InstanceState>> = {
  booting: 'pending',
  active: 'running',
  unhealthy: 'pending',
  terminating: 'terminating',
  terminated: 'gone',
  preempted: 'failed',
};

/** What the table makes of a raw status: known, or unknown (bounded by the provider's `StateWatch`). */
export function lambdaStateReading(status: string | undefined): StateReading {
  return status && Object.hasOwn(LAMBDA_STATE_TABLE, status)
    ? { kind: 'known', state: LAMBDA_STATE_TABLE[status as LambdaStatus] }
    : { kind: 'unknown' };
}

/**
 * Our state for a status, without a timer: an unknown status is `pending` (never ready, never
 * gone). For decisions that must not wait on a bound, such as whether a terminate already took.
 */
export function lambdaState(status: string | undefined): InstanceState {
  const r = lambdaStateReading(status);
  return r.kind === 'known' ? r.state : 'pending';
}
