import type { InstanceState } from '../../src/providers/provider.js';

/**
 * Vast's `actual_status` in our terms. A destroyed instance is no longer listed and reads as
 * `{"instances":null}`; that is `gone` and never appears here.
 */
export const VAST_STATE_TABLE: Readonly<Record<string, InstanceState>> = {
  loading: 'pending',
  running: 'running',
  stopped: 'stopped',
  frozen: 'stopped',
  exited: 'failed',
  unknown: 'failed',
  offline: 'failed',
};

/**
 * Our state for an `actual_status`. Null means Vast has not scheduled the container yet. A name
 * Vast adds later reads as `pending` rather than `failed`: failing destroys a machine the
 * customer may be using, while pending is bounded by the host's provisioning timeout.
 */
export function vastState(actualStatus: string | null | undefined): InstanceState {
  if (actualStatus === null || actualStatus === undefined || actualStatus === '') return 'pending';
  return VAST_STATE_TABLE[actualStatus] ?? 'pending';
}
