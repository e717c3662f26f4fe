import { SshLoginError, type SshOptions } from '../../../providers/ssh-probe.js';
import { SshSessions } from '../../../providers/ssh-sessions.js';
import type { IdleWatchState, WatchedRental } from '../store/rentals.repository.js';
import { recordRentalEvent } from '../state/rental-events.js';
import type { TerminationReason } from '../state/rental-status.js';
import type { LifecycleDeps, LifecycleTiming } from './lifecycle-deps.js';
import { CHECKS_PER_ACCOUNT, CheckSlots } from './check-slots.js';

/** A GPU at or above this utilisation (percent) is working; a rental whose GPUs all stay under it is idle. */
export const IDLE_UTILIZATION_PERCENT = 5;
/** Samples a window must hold before a rental is called idle. */
export const MIN_SAMPLES_PER_WINDOW = 3;
/** Longest gap between two samples of one rental, whatever its window. */
const MAX_SAMPLE_GAP_MS = 5 * 60_000;
/** Period of the idle sweep: shorter than the shortest gap between samples (15 s, a quarter of a one-minute window), so a one-minute window holds at least three. */
export const IDLE_SWEEP_EVERY_MS = 10_000;
/** Samples in flight at once in one process, all accounts together (each account at most {@link CHECKS_PER_ACCOUNT}). */
export const PARALLEL_SAMPLES = 8;
/**
 * How long a sweep waits for the samples it started. A sample still running then (a machine that
 * holds its answer up to the sample's bound) finishes on its own; later sweeps skip its rental
 * until it has, and sample everyone else at their pace meanwhile.
 */
export const SWEEP_WAIT_MS = IDLE_SWEEP_EVERY_MS / 2;
/** The service's own bound on the utilisation query after login; the remote `timeout 20` is only a courtesy. */
export const SAMPLE_COMMAND_TIMEOUT_MS = 25_000;
/** Output kept from a sample: one short line per GPU. */
const SAMPLE_OUTPUT_CAP_BYTES = 16 * 1024;

/** One login with the rental's own key: every GPU's utilisation, one line each (bounded where `timeout` exists). */
export const UTILIZATION_COMMAND =
  'if command -v timeout >/dev/null 2>&1; then timeout 20 nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits; else nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits; fi';

/** What one sample says: `unknown` when the machine could not be asked or its answer could not be read. */
export type IdleSample = 'idle' | 'busy' | 'unknown';

/** Reads the utilisation query's output: idle only when every GPU answered, and every one under the threshold. */
export function readUtilization(stdout: string, code: number | null): IdleSample {
  if (code !== 0) return 'unknown';
  const lines = stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
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
export function idleStep(
  prev: IdleWatchState | null,
  sample: IdleSample,
  now: Date,
  windowMs: number,
  graceMs: number,
): IdleStep {
  if (sample !== 'idle')
    return { watch: { sampledAt: now, idleSince: null, idleSamples: 0, warnedAt: null }, action: 'none' };
  const idleSince = prev?.idleSince ?? now;
  const idleSamples = (prev?.idleSince ? prev.idleSamples : 0) + 1;
  const warnedAt = prev?.idleSince ? prev.warnedAt : null;
  const watch = { sampledAt: now, idleSince, idleSamples, warnedAt };
  if (warnedAt) return { watch, action: now.getTime() - warnedAt.getTime() >= graceMs ? 'end' : 'none' };
  if (idleSamples >= MIN_SAMPLES_PER_WINDOW && now.getTime() - idleSince.getTime() >= windowMs)
    return { watch: { ...watch, warnedAt: now }, action: 'warn' };
  return { watch, action: 'none' };
}

/** How an {@link IdleWatch} holds its samples (tests shorten the waits). */
export interface IdleWatchOptions {
  /** Samples in flight in this process; default {@link PARALLEL_SAMPLES} in all, {@link CHECKS_PER_ACCOUNT} per account. */
  slots?: CheckSlots;
  /** Default {@link SWEEP_WAIT_MS}. */
  sweepWaitMs?: number;
  /** Default: {@link SAMPLE_COMMAND_TIMEOUT_MS}, a 16 KiB output cap. */
  bounds?: Pick<SshOptions, 'commandTimeoutMs' | 'maxOutputBytes'>;
  /** The connections kept between a rental's samples (default: this watch's own). */
  sessions?: SshSessions;
}

/**
 * The idle sweep: samples the GPUs of every ACTIVE rental whose key carries
 * `idleTerminateMinutes` (each at most every {@link sampleEveryMs} of its window), over SSH with
 * the rental's own key, and keeps where each stands in the database, so whichever worker sweeps
 * next continues it. An idle rental gets `rental.idle_warning`, then ends with reason IDLE.
 *
 * The samples run in a pool no account can fill (see {@link CheckSlots}), each within its SSH
 * bounds, and a sweep never waits on a sample of an earlier one: a machine that holds its answer
 * delays only its own rental's watch.
 */
export class IdleWatch {
  private readonly slots: CheckSlots;
  private readonly sweepWaitMs: number;
  private readonly bounds: Pick<SshOptions, 'commandTimeoutMs' | 'maxOutputBytes'>;
  /** Rentals whose sample is running in this process. */
  private readonly inFlight = new Set<string>();
  /** Rentals whose changed host key was logged already. */
  private readonly hostKeyWarned = new Set<string>();
  /**
   * Each watched rental's SSH connection, kept between its samples: a sample is then a command
   * on a connection already logged in, not a key exchange and a signature (docs/architecture.md,
   * "Machine checks"). A connection that breaks or misbehaves is dropped, and the next sample
   * logs in again.
   */
  readonly sessions: SshSessions;

  constructor(
    private readonly deps: Pick<LifecycleDeps, 'store' | 'clock' | 'logger' | 'box'>,
    private readonly timing: Pick<LifecycleTiming, 'sshTimeoutMs' | 'idleGraceMs'>,
    private readonly requestTermination: (deploymentId: string, reason: TerminationReason) => Promise<void>,
    options: IdleWatchOptions = {},
  ) {
    this.slots = options.slots ?? new CheckSlots({ perAccount: CHECKS_PER_ACCOUNT, total: PARALLEL_SAMPLES });
    this.sweepWaitMs = options.sweepWaitMs ?? SWEEP_WAIT_MS;
    this.sessions = options.sessions ?? new SshSessions();
    this.bounds = {
      commandTimeoutMs: SAMPLE_COMMAND_TIMEOUT_MS,
      maxOutputBytes: SAMPLE_OUTPUT_CAP_BYTES,
      ...options.bounds,
    };
  }

  /**
   * One sweep: starts the due samples as slots allow, longest unsampled first, and waits for them
   * up to the sweep's wait. A rental whose sample is still running, or whose account has its
   * share of slots in use, is left for a later sweep. Answers the rentals this sweep sampled.
   */
  async sweep(): Promise<string[]> {
    const { store, clock } = this.deps;
    await store.read((repos) => repos.rentals.idleWatches.forgetFinished());
    const now = clock.now().getTime();
    const watched = await store.read((repos) => repos.rentals.idleWatches.watched());
    // A rental no longer watched (ended, or its key's watch removed) keeps no connection.
    this.sessions.retain(new Set(watched.map((r) => r.id)));
    const queue = watched
      .filter(
        (r) =>
          !this.inFlight.has(r.id) && (!r.watch || now - r.watch.sampledAt.getTime() >= sampleEveryMs(windowMs(r))),
      )
      .sort((a, b) => (a.watch?.sampledAt.getTime() ?? 0) - (b.watch?.sampledAt.getTime() ?? 0));
    const started: string[] = [];
    await new Promise<void>((resolve) => {
      let running = 0;
      let over = false;
      const end = () => {
        over = true;
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(end, this.sweepWaitMs);
      const pump = () => {
        if (over) return;
        // Once every slot is taken no rental of the queue can start: the scan stops there, so a
        // finished sample costs the same whatever the number of rentals waiting.
        for (let i = 0; i < queue.length && !this.slots.full;) {
          const r = queue[i];
          const release = this.slots.tryTake(r.accountId);
          if (!release) {
            i++;
            continue;
          }
          queue.splice(i, 1);
          started.push(r.id);
          running++;
          this.inFlight.add(r.id);
          void this.watchOne(r)
            .catch((err) =>
              this.deps.logger.warn(
                { err, deploymentId: r.id },
                'an idle sample could not be stored; the next sweep samples again',
              ),
            )
            .finally(() => {
              release();
              this.inFlight.delete(r.id);
              running--;
              pump();
            });
        }
        if (running === 0) end();
      };
      pump();
    });
    return started;
  }

  private async watchOne(r: WatchedRental): Promise<void> {
    const sample = await this.sample(r);
    const now = this.deps.clock.now();
    const step = idleStep(r.watch, sample, now, windowMs(r), this.timing.idleGraceMs);
    const stored = await this.deps.store.transaction(async (repos) => {
      if (step.action === 'warn' && (await repos.rentals.deployments.lock(r.id))?.status !== 'ACTIVE') return false;
      if (!(await repos.rentals.idleWatches.save(r.id, r.watch?.sampledAt ?? null, step.watch))) return false;
      if (step.action === 'warn') await recordRentalEvent(repos, r.id, 'rental.idle_warning', now);
      return true;
    });
    if (stored && step.action === 'end') {
      this.deps.logger.info(
        { deploymentId: r.id, idleSince: step.watch.idleSince },
        'ending a rental whose GPUs stayed idle',
      );
      await this.requestTermination(r.id, 'IDLE');
    }
  }

  /** One utilisation sample within its bounds, to the pinned host key (pinning the first one seen); `unknown` when the machine cannot be asked or misbehaves. */
  private async sample(r: WatchedRental): Promise<IdleSample> {
    const { store, logger } = this.deps;
    try {
      const privateKey = this.deps.box.open(r.sshPrivateKeyEnc, r.sshKeyKid, r.id);
      const target = { host: r.sshHost, port: r.sshPort, user: r.sshUser, privateKey, hostKey: r.sshHostKey };
      const res = await this.sessions.exec(r.id, target, UTILIZATION_COMMAND, {
        timeoutMs: this.timing.sshTimeoutMs,
        ...this.bounds,
      });
      if (!r.sshHostKey) await store.read((repos) => repos.rentals.deployments.pinHostKey(r.id, res.hostKey));
      if (res.cut) {
        logger.debug(
          { deploymentId: r.id, cut: res.cut },
          'the GPU utilisation query was cut short; the idle window starts over',
        );
        return 'unknown';
      }
      return readUtilization(res.stdout, res.code);
    } catch (err) {
      if (err instanceof SshLoginError && err.reason === 'host_key') {
        if (!this.hostKeyWarned.has(r.id)) {
          this.hostKeyWarned.add(r.id);
          logger.warn(
            { deploymentId: r.id, pinned: r.sshHostKey, seen: err.hostKey },
            "the rental's SSH address shows another host key than the one pinned for its machine; its samples count as unknown",
          );
        }
      } else {
        logger.debug({ err, deploymentId: r.id }, 'could not sample GPU utilisation; the idle window starts over');
      }
      return 'unknown';
    }
  }
}

function windowMs(r: WatchedRental): number {
  return r.idleTerminateMinutes * 60_000;
}
