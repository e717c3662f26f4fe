import type { SshSessions } from '../../../providers/ssh-sessions.js';
import { DestructionVerifier } from '../../../providers/destruction-verifier.js';
import type { FailureCode, TerminationReason } from '../state/rental-status.js';
import { CapacityWait } from './capacity-wait.js';
import { DEFAULT_TIMING, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';
import { Expiring } from './expiring.js';
import { IdleWatch } from './idle.js';
import { Metering, type SweepResult } from './metering.js';
import { Provisioning } from './provisioning.js';
import { Reconciler } from './reconciler.js';
import { Reversal } from './reversal.js';
import { Termination } from './termination.js';

export { LABEL_PREFIX, instanceLabel } from './labels.js';
export { DEFAULT_TIMING, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';

/**
 * The rental lifecycle, assembled once from its parts (one file each): provisioning, reversal,
 * termination with destruction verification, metering and the reconciler. Every method reads
 * the deployment from MySQL, acts, and writes the outcome back with a status-conditional update,
 * so a run repeated or resumed after a crash converges on the same state.
 */
export interface RentalLifecycle {
  provision(deploymentId: string): Promise<void>;
  terminate(deploymentId: string): Promise<void>;
  expire(deploymentId: string): Promise<void>;
  requestTermination(deploymentId: string, reason: TerminationReason): Promise<void>;
  /** Fails a PENDING/PROVISIONING rental and settles its reversal; a FAILED one only settles. */
  fail(deploymentId: string, code: FailureCode, reason: string): Promise<void>;
  meter(): Promise<SweepResult>;
  reconcile(): Promise<{ destroyed: string[]; redriven: string[] }>;
  /** Writes `rental.expiring` when due (the one-off job queued at ACTIVE). */
  noticeExpiring(deploymentId: string): Promise<void>;
  /** One idle sweep: samples the watched rentals' GPUs, warns and ends idle ones; answers the rentals sampled. */
  watchIdle(): Promise<string[]>;
  /** The SSH connections the idle sweep keeps between a rental's samples (their sockets keep no process up). */
  readonly idleSessions: SshSessions;
}

export function createRentalLifecycle(deps: LifecycleDeps, timing: Partial<LifecycleTiming> = {}): RentalLifecycle {
  const t: LifecycleTiming = { ...DEFAULT_TIMING, ...timing };
  const reversal = new Reversal(deps);
  const expiring = new Expiring(deps);
  const provisioning = new Provisioning(deps, t, reversal, new CapacityWait(deps, t, reversal), expiring);
  // Metering ends rentals through termination, and termination settles usage through metering.
  const request = (id: string, reason: TerminationReason): Promise<void> => termination.request(id, reason);
  const metering: Metering = new Metering(deps, request, t);
  const termination: Termination = new Termination(
    deps,
    t,
    new DestructionVerifier({ sshTimeoutMs: t.sshTimeoutMs }),
    metering,
    reversal,
  );
  const reconciler = new Reconciler(deps, t, request);
  const idle = new IdleWatch(deps, t, request);
  return {
    provision: (id) => provisioning.provision(id),
    terminate: (id) => termination.terminate(id),
    expire: (id) => termination.expire(id),
    requestTermination: request,
    fail: (id, code, reason) => reversal.failOrSettle(id, code, reason),
    meter: () => metering.meter(),
    async reconcile() {
      const done = await reconciler.reconcile();
      // Backstop of the one-off notice job, as the reconciler is of the expiry job.
      await expiring.backstop();
      return done;
    },
    noticeExpiring: (id) => expiring.notice(id),
    watchIdle: () => idle.sweep(),
    idleSessions: idle.sessions,
  };
}
