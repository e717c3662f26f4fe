import { STARTUP_MARKER_PATH } from '../../../providers/provider.js';
import { SshLoginError, sshExec, type SshCut, type SshOptions, type SshTarget } from '../../../providers/ssh-probe.js';
import type { MachinePhase } from '../state/rental-status.js';
import type { Deployment } from '../store/deployment.entity.js';
import { CheckSlots } from './check-slots.js';
import type { LifecycleDeps } from './lifecycle-deps.js';

/** What a rental's machine must show before it is ACTIVE. */
export interface UsableWhen {
  /** GPUs the offer promised; `nvidia-smi -L` must list this many (0: a machine without GPUs, not checked). */
  gpus: number;
  /** The rental has a startup script, which must have recorded its start. */
  startupScript: boolean;
}

/**
 * Where a running machine stands: usable (ACTIVE may follow), not yet (the phase it is in),
 * fewer GPUs than promised (waiting will not mend it), misbehaving (it let us in but its answer
 * ran past the service's bound or cap, or it hung up: not usable, though not "still starting"),
 * or answering with another host key than the one pinned (not the machine we know: not usable).
 * `hostKey` is the host key of a machine that let us in with the rental's key, to pin at first contact.
 */
export type MachineCheck = (
  | { kind: 'usable' }
  | { kind: 'not_yet'; phase: Extract<MachinePhase, 'waiting_for_ssh' | 'checking_gpus' | 'starting'>; detail: string }
  | { kind: 'gpu_mismatch'; listed: number; promised: number }
  | { kind: 'misbehaved'; phase: Extract<MachinePhase, 'checking_gpus'>; cut: SshCut; detail: string }
  | { kind: 'host_key_changed'; phase: Extract<MachinePhase, 'waiting_for_ssh'>; pinned: string; seen: string }
) & { hostKey?: string };

/**
 * The service's own bound on the check command, after login: the remote `timeout 30` is only a
 * courtesy (the renter controls `timeout`, `nvidia-smi` and the shell), so this timer is what holds.
 */
export const CHECK_COMMAND_TIMEOUT_MS = 35_000;
/** Output kept from the check: a listing of a few GPUs and two marker lines fit many times over. */
export const CHECK_OUTPUT_CAP_BYTES = 16 * 1024;

const SMI_EXIT = '__gpr_smi_exit=';
const STARTED = '__gpr_started=';

/** One login with the rental's own key runs every check: `nvidia-smi -L` (bounded where `timeout` exists), then the startup marker. */
export const CHECK_COMMAND = `if command -v timeout >/dev/null 2>&1; then timeout 30 nvidia-smi -L; else nvidia-smi -L; fi 2>/dev/null; echo "${SMI_EXIT}$?"; if [ -f "$HOME/${STARTUP_MARKER_PATH}" ]; then echo "${STARTED}1"; else echo "${STARTED}0"; fi`;

/** The GPUs a `nvidia-smi -L` listing names, one line each (`GPU 0: NVIDIA H100 … (UUID: …)`). */
export function listedGpus(stdout: string): string[] {
  return stdout.split('\n').filter((l) => /^GPU \d+:/.test(l));
}

/**
 * Reads the output of {@link CHECK_COMMAND}. A listing with some GPUs but fewer than promised is a
 * mismatch at once; no listing at all (drivers still loading, `nvidia-smi` failing) is not yet.
 */
export function readCheck(stdout: string, want: UsableWhen): MachineCheck {
  const listed = listedGpus(stdout).length;
  const smiExit = /__gpr_smi_exit=(\d+)/.exec(stdout)?.[1];
  if (want.gpus > 0) {
    if (listed > 0 && listed < want.gpus) return { kind: 'gpu_mismatch', listed, promised: want.gpus };
    if (listed < want.gpus)
      return {
        kind: 'not_yet',
        phase: 'checking_gpus',
        detail: `nvidia-smi -L listed no GPU yet (exit ${smiExit ?? 'unknown'})`,
      };
  }
  if (want.startupScript && !stdout.includes(`${STARTED}1`))
    return { kind: 'not_yet', phase: 'starting', detail: 'the startup script has not started yet' };
  return { kind: 'usable' };
}

/**
 * Logs in with the rental's key (to the pinned host key, when `target.hostKey` is set) and checks
 * the machine; never throws (a refused login is `waiting_for_ssh`). Ends within `timeoutMs` plus
 * the command bound whatever the machine does.
 */
export async function checkMachine(
  target: SshTarget,
  want: UsableWhen,
  timeoutMs: number,
  bounds: Pick<SshOptions, 'commandTimeoutMs' | 'maxOutputBytes'> = {},
): Promise<MachineCheck> {
  const commandTimeoutMs = bounds.commandTimeoutMs ?? CHECK_COMMAND_TIMEOUT_MS;
  const maxOutputBytes = bounds.maxOutputBytes ?? CHECK_OUTPUT_CAP_BYTES;
  let res;
  try {
    res = await sshExec(target, CHECK_COMMAND, { timeoutMs, commandTimeoutMs, maxOutputBytes });
  } catch (err) {
    if (err instanceof SshLoginError && err.reason === 'host_key' && target.hostKey && err.hostKey) {
      return { kind: 'host_key_changed', phase: 'waiting_for_ssh', pinned: target.hostKey, seen: err.hostKey };
    }
    return { kind: 'not_yet', phase: 'waiting_for_ssh', detail: (err as Error).message };
  }
  if (res.cut) {
    const why = {
      timeout: `did not finish within ${commandTimeoutMs} ms`,
      output_cap: `wrote more than ${maxOutputBytes} bytes`,
      connection_lost: 'lost the connection before it ended',
    }[res.cut];
    return {
      kind: 'misbehaved',
      phase: 'checking_gpus',
      cut: res.cut,
      detail: `the check command ${why}`,
      hostKey: res.hostKey,
    };
  }
  return { ...readCheck(res.stdout, want), hostKey: res.hostKey };
}

/** What a {@link MachineChecker} needs. */
export type MachineCheckerDeps = Pick<LifecycleDeps, 'store' | 'logger' | 'box'>;

/**
 * Provisioning's checks of its rentals' machines, with what holds them: the slots a check takes
 * ({@link CheckSlots}, per account in this process) and the host key it logs in to.
 */
export class MachineChecker {
  /** Rentals whose changed host key was logged already (once per process is enough). */
  private readonly hostKeyWarned = new Set<string>();

  constructor(
    private readonly deps: MachineCheckerDeps,
    private readonly connectTimeoutMs: number,
    private readonly slots = new CheckSlots(),
    private readonly bounds: Pick<SshOptions, 'commandTimeoutMs' | 'maxOutputBytes'> = {},
  ) {}

  /**
   * One {@link checkMachine} of `d`'s machine at `ssh`, against the host key pinned for it: the
   * provider's (`reported`), pinned before the first login, else the one the first login that
   * gets in shows. A changed key is logged once. Null, without checking, when the rental's
   * account already has its share of this process's checks in flight.
   */
  async check(
    d: Deployment,
    ssh: { host: string; port: number; user: string },
    reported: string | undefined,
    want: UsableWhen,
  ): Promise<MachineCheck | null> {
    const release = this.slots.tryTake(d.accountId);
    if (!release) return null;
    try {
      const { store, logger } = this.deps;
      const pinned = d.sshHostKey ?? reported ?? null;
      if (!d.sshHostKey && reported) await store.read((r) => r.rentals.deployments.pinHostKey(d.id, reported));
      const privateKey = this.deps.box.open(d.sshPrivateKeyEnc!, d.sshKeyKid!, d.id);
      const check = await checkMachine(
        { ...ssh, privateKey, hostKey: pinned },
        want,
        this.connectTimeoutMs,
        this.bounds,
      );
      const seen = check.hostKey;
      if (!pinned && seen) await store.read((r) => r.rentals.deployments.pinHostKey(d.id, seen));
      if (check.kind === 'host_key_changed' && !this.hostKeyWarned.has(d.id)) {
        this.hostKeyWarned.add(d.id);
        logger.warn(
          {
            deploymentId: d.id,
            providerId: d.providerId,
            endpoint: `${ssh.user}@${ssh.host}:${ssh.port}`,
            pinned: check.pinned,
            seen: check.seen,
          },
          "the machine at the rental's SSH address shows another host key than the one pinned for it; it is not taken for the rental's machine",
        );
      }
      if (check.kind === 'misbehaved') logger.debug({ deploymentId: d.id, cut: check.cut }, check.detail);
      return check;
    } finally {
      release();
    }
  }
}
