import type { InstanceState } from '../../src/providers/provider.js';

/** RunPod's pod statuses (`PodStatus` in the v2 API). */
export type PodStatus = 'PROVISIONING' | 'STARTING' | 'RUNNING' | 'EXITED' | 'ERROR' | 'TERMINATED';

/**
 * The one state table. `RUNNING` is reported before `ssh.direct` exists, so the provider reports
 * an SSH endpoint only once `ssh.direct` appears; "running" alone does not make a pod ready.
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

/** Our state for a RunPod status; a status this table does not know yet is still pending. */
export function podState(status: string): InstanceState {
  return (POD_STATES as Record<string, InstanceState | undefined>)[status] ?? 'pending';
}
