import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { Principal } from '../keys/principal.js';
import type { RentalReadsService } from '../rentals/reads/rental-reads.service.js';
import type { MachinePhase } from '../rentals/state/rental-status.js';
import type { RentalDto } from '../rentals/wire/rentals.dto.js';
import type { CanaryPhase } from './canary-report.js';

/** How often a canary reads its rental while it waits (the rental's phases change on the provision job's polls). */
export const CANARY_POLL_MS = 500;

/** Why a canary stopped waiting: a stop signal (`stop`: end the machine; `leave`: stop watching it end), or its time bound. */
export type StopWhy = 'stop' | 'leave' | 'timeout';

/** The error a canary's wait ends with when it stops waiting ({@link stopOf} reads it back). */
export function canaryStop(why: StopWhy, message: string): Error {
  return Object.assign(new Error(message), { canaryStop: why });
}

/** Why `err` stopped a canary's wait; null for any other error. */
export function stopOf(err: unknown): StopWhy | null {
  return (err as { canaryStop?: StopWhy } | null)?.canaryStop ?? null;
}

/** A problem that ends a canary's way up, in words for the operator (the machine is ended all the same). */
export function canaryProblem(message: string): Error {
  return Object.assign(new Error(message), { canaryProblem: true });
}

/** Whether `err` is a {@link canaryProblem}: expected, so reported without a stack in the log. */
export function isCanaryProblem(err: unknown): boolean {
  return (err as { canaryProblem?: boolean } | null)?.canaryProblem === true;
}

/** Resolves after `ms`, or at once when `signal` is aborted (then the caller's loop sees it). */
export async function pause(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return;
  await sleep(ms, undefined, signal ? { signal } : {}).catch(() => undefined);
}

/** What each machine phase of a rental says in a canary's lines. */
const PHASE_WORDS: Record<MachinePhase, string> = {
  waiting_for_capacity: 'waiting for capacity',
  creating: 'creating: asking the provider for the machine',
  booting: 'booting',
  pulling_image: 'pulling the image',
  waiting_for_ssh: "waiting for SSH with the rental's key",
  checking_gpus: 'checking the GPUs (nvidia-smi -L)',
  starting: 'starting',
};

/** The phase a rental is in as a canary names it: its machine phase while it starts, else its status. */
export function phaseOf(r: Pick<RentalDto, 'status' | 'phase'>): string {
  return r.phase ?? r.status;
}

/** What the phase of `r` says, with what the rental tells of it. */
export function phaseDetail(r: RentalDto): string {
  const phase = phaseOf(r);
  const words = (PHASE_WORDS as Record<string, string | undefined>)[phase];
  if (words) return words;
  switch (r.status) {
    case 'PENDING':
      return 'PENDING: admitted, waiting for the provision job';
    case 'PROVISIONING':
      return 'PROVISIONING';
    case 'ACTIVE':
      return 'ACTIVE: the service checked the machine (SSH with the rental key, nvidia-smi -L)';
    case 'TERMINATING':
      return `TERMINATING${r.terminationReason ? ` (${r.terminationReason})` : ''}: destroying the machine and verifying it is gone`;
    case 'TERMINATED':
      return `TERMINATED${r.endedAt ? `: destruction verified at ${r.endedAt}` : ''}`;
    case 'FAILED':
      return `FAILED: ${r.failureCode ?? 'unknown'}: ${r.failureReason ?? ''}`.trim();
    default:
      return r.status;
  }
}

/** Reads a rental as its key sees it, over and over, saying each new phase once. */
export class RentalWatch {
  private readonly seen = new Map<string, string>();

  constructor(
    private readonly deps: { clock: Clock; logger: Logger; rentalReads: Pick<RentalReadsService, 'get'> },
    private readonly emit: (phase: string, detail: string) => void,
    private readonly pollMs: number,
  ) {}

  /**
   * Reads rental `rentalId` until `each` (called with every read) answers true, and answers that
   * read. A failed read is logged and read again. Throws a {@link canaryStop} when `signal` is
   * aborted (`why` says which signal it is) or the clock passes `deadline`.
   */
  async until(
    who: Principal,
    rentalId: string,
    each: (r: RentalDto) => boolean | Promise<boolean>,
    stop: { signal?: AbortSignal; why: 'stop' | 'leave'; deadline: number; waitingFor: string },
    prefix = '',
  ): Promise<RentalDto> {
    let last: RentalDto | undefined;
    for (;;) {
      if (stop.signal?.aborted) throw canaryStop(stop.why, `stopped while waiting for ${stop.waitingFor}`);
      try {
        last = await this.deps.rentalReads.get(who, rentalId);
      } catch (err) {
        this.deps.logger.warn({ err, rentalId }, 'canary: reading the rental failed; reading it again');
      }
      if (last) {
        this.observe(last, prefix);
        if (await each(last)) return last;
      }
      if (this.deps.clock.now().getTime() > stop.deadline)
        throw canaryStop(
          'timeout',
          `${stop.waitingFor} did not happen in time; the rental was last ${last ? phaseOf(last) : 'unread'}`,
        );
      await pause(this.pollMs, stop.signal);
    }
  }

  /** Says the rental's phase when it is not the one said last. */
  observe(r: RentalDto, prefix = ''): void {
    const phase = phaseOf(r);
    if (this.seen.get(r.rentalId) === phase) return;
    this.seen.set(r.rentalId, phase);
    this.emit(prefix ? `${prefix}${phase}` : phase, `${prefix ? 'previous rental: ' : ''}${phaseDetail(r)}`);
  }
}

/** A phase as it was seen now, `startMs` being the run's start. */
export function phaseAt(clock: Clock, startMs: number, phase: string, detail: string): CanaryPhase {
  const now = clock.now();
  return { phase, at: now.toISOString(), sinceStartMs: Math.max(0, now.getTime() - startMs), detail };
}
