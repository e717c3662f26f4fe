import type { StateReading } from '../../src/providers/kit/state-watch.js';
import type { InstanceState } from '../../src/providers/provider.js';

/** The status fields of a Vast instance (show-instance or a v1 list item) that decide its state. */
export interface VastStatusFields {
  actual_status?: string | null;
  intended_status?: string | null;
  cur_state?: string | null;
  status_msg?: string | null;
}

/**
 * Vast's `actual_status` in our terms, for the values Vast documents or has been seen to send.
 * `created` is a container that was made and not yet started: on a healthy start only for a moment,
 * and for good when it can never start, which Vast says with the reason in `status_msg` (an OCI
 * runtime failure, an image manifest that does not exist; see `readVastState`). `exited`, `offline`, `unknown` and
 * `error` cannot become a usable machine either. `destroyed` and `terminated` are what Vast's own
 * CLI treats as final. `rebooting` is a restart in progress.
 */
export const VAST_STATE_TABLE: Readonly<Record<string, InstanceState>> = {
  loading: 'pending',
  rebooting: 'pending',
  running: 'running',
  stopped: 'stopped',
  frozen: 'stopped',
  created: 'pending',
  exited: 'failed',
  unknown: 'failed',
  offline: 'failed',
  error: 'failed',
  destroyed: 'gone',
  terminated: 'gone',
};

/** What the status fields say, with the reason for a failure when there is one. */
export type VastReading = StateReading & { why?: string };

const text = (v: unknown): string => (typeof v === 'string' ? v.trim() : '');

/**
 * Reads `actual_status` together with `intended_status` and `status_msg`. A start Vast has given
 * up on still reads `loading` (or has no `actual_status` yet) but with `intended_status:
 * "stopped"`: this plugin never stops instances, so that is a failed start, not a pause. A value
 * the table does not know is `unknown`: the caller bounds it with the kit's `StateWatch` rather
 * than failing a machine at once or waiting for ever.
 */
export function readVastState(f: VastStatusFields): VastReading {
  const actual = text(f.actual_status);
  const intended = text(f.intended_status);
  const msg = text(f.status_msg);
  if ((actual === '' || actual === 'loading') && intended === 'stopped') {
    return { kind: 'known', state: 'failed', why: msg || 'Vast gave up starting the container' };
  }
  if (actual === '') return { kind: 'known', state: 'pending' };
  // A container Vast made and then could not start carries the reason; without one it is starting.
  if (actual === 'created' && msg) return { kind: 'known', state: 'failed', why: msg };
  const state = Object.hasOwn(VAST_STATE_TABLE, actual) ? VAST_STATE_TABLE[actual] : undefined;
  if (state === undefined) return { kind: 'unknown' };
  if (state === 'failed' && msg) return { kind: 'known', state, why: msg };
  return { kind: 'known', state };
}

/**
 * A short description of the status fields for logs (`providerState`): `actual_status`, with
 * `intended_status` when Vast intends something other than running it, and `cur_state` when it
 * differs from both.
 */
export function describeVastStatus(f: VastStatusFields): string {
  const actual = f.actual_status ?? 'null';
  const intended = text(f.intended_status);
  const cur = text(f.cur_state);
  const parts = [actual];
  if (intended && intended !== actual && intended !== 'running') parts.push(`intended ${intended}`);
  if (cur && cur !== actual && cur !== intended && cur !== 'running' && cur !== 'stopped') parts.push(`cur ${cur}`);
  return parts.join(', ');
}

/** True for an instance Vast has destroyed but still shows: it no longer counts as ours. */
export function isFinalVastStatus(f: VastStatusFields): boolean {
  const actual = text(f.actual_status);
  return VAST_STATE_TABLE[actual] === 'gone' && Object.hasOwn(VAST_STATE_TABLE, actual);
}
