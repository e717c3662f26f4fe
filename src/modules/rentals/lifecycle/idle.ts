import { inTransaction } from '../../../db/transaction.js';
import { sshExec } from '../../../providers/ssh-probe.js';
import { lockDeployment } from '../deployments.repository.js';
import { forgetFinishedWatches, saveIdleWatch, watchedRentals, type IdleWatchState, type WatchedRental } from '../idle-watches.repository.js';
import { recordRentalEvent } from '../rental-events.js';
import type { TerminationReason } from '../rental-status.js';
import type { LifecycleDeps, LifecycleTiming } from './lifecycle-deps.js';

/** A GPU at or above this utilisation (percent) is working; a rental whose GPUs all stay under it is idle. */
export const IDLE_UTILIZATION_PERCENT = 5;
/** Samples a window must hold before a rental is called idle. */
export const MIN_SAMPLES_PER_WINDOW = 3;
/** Longest gap between two samples of one rental, whatever its window. */
const MAX_SAMPLE_GAP_MS = 5 * 60_000;
/** Period of the idle sweep: shorter than the shortest gap between samples (15 s, a quarter of a one-minute window), so a one-minute window holds at least three. */
export const IDLE_SWEEP_EVERY_MS = 10_000;
/** Rentals sampled at once by one sweep. */
const PARALLEL_SAMPLES = 8;

/** One login with the rental's own key: every GPU's utilisation, one line each (bounded where `timeout` exists). */
export const UTILIZATION_COMMAND =
  'if command -v timeout >/dev/null 2>&1; then timeout 20 nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits; else nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits; fi';

/** What one sample says: `unknown` when the machine could not be asked or its answer could not be read. */
export type IdleSample = 'idle' | 'busy' | 'unknown';

/** Reads the utilisation query's output: idle only when every GPU answered, and every one under the threshold. */
export function readUtilization(stdout: string, code: number | null): IdleSample {
  if (code !== 0) return 'unknown';
  const lines = stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  if (lines.length === 0 || !lines.every((l) => /^\d{1,3}(\.\d+)?$/.test(l))) return 'unknown';
  return lines.some((l) => Number(l) >= IDLE_UTILIZATION_PERCENT) ? 'busy' : 'idle';
}

/** The longest wait between a rental's samples: a quarter of its window (so a window holds four or five), at most five minutes. */
export function sampleEveryMs(windowMs: number): number {
  return Math.min(Math.floor(windowMs / 4), MAX_SAMPLE_GAP_MS);
}

/** What follows one sample: the watch to store, and whether to warn now or end the rental. */
export interface IdleStep {
  watch: IdleWatchState;
  action: 'none' | 'warn' | 'end';
}

/**
 * The idle rule. A busy or unreadable sample starts over (a machine that cannot be asked is never
 * called idle). Idle samples spanning a whole window, at least {@link MIN_SAMPLES_PER_WINDOW} of
 * them, warn once; still idle `graceMs` after the warning, the rental ends.
 */
export function idleStep(prev: IdleWatchState | null, sample: IdleSample, now: Date, windowMs: number, graceMs: number): IdleStep {
  if (sample !== 'idle') return { watch: { sampledAt: now, idleSince: null, idleSamples: 0, warnedAt: null }, action: 'none' };
  const idleSince = prev?.idleSince ?? now;
  const idleSamples = (prev?.idleSince ? prev.idleSamples : 0) + 1;
  const warnedAt = prev?.idleSince ? prev.warnedAt : null;
  const watch = { sampledAt: now, idleSince, idleSamples, warnedAt };
  if (warnedAt) return { watch, action: now.getTime() - warnedAt.getTime() >= graceMs ? 'end' : 'none' };
  if (idleSamples >= MIN_SAMPLES_PER_WINDOW && now.getTime() - idleSince.getTime() >= windowMs) return { watch: { ...watch, warnedAt: now }, action: 'warn' };
  return { watch, action: 'none' };
}

/**
 * The idle sweep: samples the GPUs of every ACTIVE rental whose key carries
 * `idleTerminateMinutes` (each at most every {@link sampleEveryMs} of its window), over SSH with
 * the rental's own key, and keeps where each stands in the database, so whichever worker sweeps
 * next continues it. An idle rental gets `rental.idle_warning`, then ends with reason IDLE.
 */
export class IdleWatch {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'ds' | 'clock' | 'logger' | 'box'>,
    private readonly timing: Pick<LifecycleTiming, 'sshTimeoutMs' | 'idleGraceMs'>,
    private readonly requestTermination: (deploymentId: string, reason: TerminationReason) => Promise<void>,
  ) {}

  /** One sweep; answers the rentals sampled. */
  async sweep(): Promise<string[]> {
    const { ds, clock } = this.deps;
    await forgetFinishedWatches(ds);
    const now = clock.now().getTime();
    const due = (await watchedRentals(ds)).filter((r) => !r.watch || now - r.watch.sampledAt.getTime() >= sampleEveryMs(windowMs(r)));
    for (let i = 0; i < due.length; i += PARALLEL_SAMPLES) await Promise.all(due.slice(i, i + PARALLEL_SAMPLES).map((r) => this.watchOne(r)));
    return due.map((r) => r.id);
  }

  private async watchOne(r: WatchedRental): Promise<void> {
    const sample = await this.sample(r);
    const now = this.deps.clock.now();
    const step = idleStep(r.watch, sample, now, windowMs(r), this.timing.idleGraceMs);
    const stored = await inTransaction(this.deps.ds, async (m) => {
      if (step.action === 'warn' && (await lockDeployment(m, r.id))?.status !== 'ACTIVE') return false;
      if (!(await saveIdleWatch(m, r.id, r.watch?.sampledAt ?? null, step.watch))) return false;
      if (step.action === 'warn') await recordRentalEvent(m, r.id, 'rental.idle_warning', now);
      return true;
    });
    if (stored && step.action === 'end') {
      this.deps.logger.info({ deploymentId: r.id, idleSince: step.watch.idleSince }, 'ending a rental whose GPUs stayed idle');
      await this.requestTermination(r.id, 'IDLE');
    }
  }

  private async sample(r: WatchedRental): Promise<IdleSample> {
    try {
      const privateKey = this.deps.box.open(r.sshPrivateKeyEnc, r.sshKeyKid, r.id);
      const res = await sshExec({ host: r.sshHost, port: r.sshPort, user: r.sshUser, privateKey }, UTILIZATION_COMMAND, { timeoutMs: this.timing.sshTimeoutMs });
      return readUtilization(res.stdout, res.code);
    } catch (err) {
      this.deps.logger.debug({ err, deploymentId: r.id }, 'could not sample GPU utilisation; the idle window starts over');
      return 'unknown';
    }
  }
}

function windowMs(r: WatchedRental): number {
  return r.idleTerminateMinutes * 60_000;
}
