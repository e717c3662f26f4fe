import type { StateReading } from '../../src/providers/kit/state-watch.js';
import type { InstanceState } from '../../src/providers/provider.js';

/** RunPod's pod statuses (`PodStatus` in the v2 API). */
export type PodStatus = 'PROVISIONING' | 'STARTING' | 'RUNNING' | 'EXITED' | 'ERROR' | 'TERMINATED';

/**
 * The one state table. `RUNNING` is reported before `ssh.direct` exists (and earlier revisions of
 * the API sent no `ssh` object at all until then), so the provider reports an SSH endpoint only
 * once `ssh.direct` appears; "running" alone does not make a pod ready.
 */
export const POD_STATES: Record<PodStatus, InstanceState> = {
  PROVISIONING: 'pending',
  STARTING: 'pending',
  RUNNING: 'running',
  // The container stopped; RunPod keeps the pod (and bills its volume) until it is terminated.
  EXITED: 'stopped',
  ERROR: 'failed',
  TERMINATED: 'gone',
};

/**
 * What the table makes of a RunPod status. A status it does not know is `unknown`: the provider's
 * `StateWatch` reads it as pending, logs it once and fails the pod after its own bound, so a new
 * status RunPod introduces can neither keep a billed pod waiting for ever nor destroy one at once.
 */
export function podReading(status: string): StateReading {
  const state = (POD_STATES as Record<string, InstanceState | undefined>)[status];
  return state === undefined ? { kind: 'unknown' } : { kind: 'known', state };
}

/** The table's state for a status on first sight: an unknown status reads as pending (the watch bounds it). */
export function podState(status: string): InstanceState {
  const reading = podReading(status);
  return reading.kind === 'known' ? reading.state : 'pending';
}
