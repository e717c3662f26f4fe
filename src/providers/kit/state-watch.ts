import type { Logger } from '../../logger.js';
import type { InstanceState } from '../provider.js';
import type { DriftRecorder } from './drift.js';
import { ProviderDrift } from './provider-drift.js';

/** How long an instance may sit in a state its plugin's table does not know before it counts as failed. */
export const DEFAULT_UNKNOWN_STATE_BOUND_MS = 10 * 60_000;

/** What a plugin's state table makes of one raw provider state. */
export type StateReading =
  /** A state the table knows. */
  | { kind: 'known'; state: InstanceState }
  /** A state the table does not know: pending for a while, under its own timer, never for ever. */
  | { kind: 'unknown' };

/**
 * Turns raw provider states into ours for one plugin, so that a state the plugin's table has never
 * seen is neither "pending for ever" nor a reason to destroy a machine at once: it is logged once
 * per instance with its raw value, reads as `pending`, and reads as `failed` once the instance has
 * stayed in unknown states for `boundMs` (measured from the first unknown reading this process
 * saw). A known state clears the timer. Every unknown reading is reported to the drift report
 * (`unknown_state`, the raw name kept when it is name-like), so its count says how often it was seen.
 */
export class StateWatch {
  private readonly firstUnknownAt = new Map<string, number>();
  private readonly logged = new Set<string>();
  private readonly drift: ProviderDrift;

  constructor(
    private readonly opts: {
      providerId: string;
      logger: Logger;
      /** The host's recorder (`ProviderDeps.drift`). */
      drift: DriftRecorder;
      /** The field the state table reads, as the drift report names it (default `instance state`). */
      where?: string;
      now?: () => number;
      boundMs?: number;
    },
  ) {
    this.drift = new ProviderDrift(opts.drift, opts.providerId);
  }

  /** Our state for `instanceId`, given what its plugin's table read from `raw`. */
  read(instanceId: string, raw: string, reading: StateReading): InstanceState {
    if (reading.kind === 'known') {
      this.firstUnknownAt.delete(instanceId);
      return reading.state;
    }
    this.drift.unknownState(this.opts.where ?? 'instance state', raw);
    const now = (this.opts.now ?? Date.now)();
    const first = this.firstUnknownAt.get(instanceId) ?? now;
    this.firstUnknownAt.set(instanceId, first);
    const key = `${instanceId}\u0000${raw}`;
    if (!this.logged.has(key)) {
      this.logged.add(key);
      this.opts.logger.warn(
        { provider: this.opts.providerId, instanceId, rawState: raw.slice(0, 200) },
        'provider reported a state this plugin does not know; treating it as pending under its own time limit',
      );
    }
    const bound = this.opts.boundMs ?? DEFAULT_UNKNOWN_STATE_BOUND_MS;
    return now - first >= bound ? 'failed' : 'pending';
  }

  /** Forgets an instance (destroyed, or gone). */
  forget(instanceId: string): void {
    this.firstUnknownAt.delete(instanceId);
    for (const k of this.logged) if (k.startsWith(`${instanceId}\u0000`)) this.logged.delete(k);
  }
}
