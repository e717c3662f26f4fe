import { STARTUP_MARKER_PATH } from '../../../providers/provider.js';
import { sshExec, type SshTarget } from '../../../providers/ssh-probe.js';
import type { MachinePhase } from '../rental-status.js';

/** What a rental's machine must show before it is ACTIVE. */
export interface UsableWhen {
  /** GPUs the offer promised; `nvidia-smi -L` must list this many (0: a machine without GPUs, not checked). */
  gpus: number;
  /** The rental has a startup script, which must have recorded its start. */
  startupScript: boolean;
}

/**
 * Where a running machine stands: usable (ACTIVE may follow), not yet (the phase it is in), or
 * fewer GPUs than promised, which waiting will not mend.
 */
export type MachineCheck =
  | { kind: 'usable' }
  | { kind: 'not_yet'; phase: Extract<MachinePhase, 'waiting_for_ssh' | 'checking_gpus' | 'starting'>; detail: string }
  | { kind: 'gpu_mismatch'; listed: number; promised: number };

const SMI_EXIT = '__gpr_smi_exit=';
const STARTED = '__gpr_started=';

/** One login with the rental's own key runs every check: `nvidia-smi -L` (bounded where `timeout` exists), then the startup marker. */
export const CHECK_COMMAND = `if command -v timeout >/dev/null 2>&1; then timeout 30 nvidia-smi -L; else nvidia-smi -L; fi 2>/dev/null; echo "${SMI_EXIT}$?"; if [ -f "$HOME/${STARTUP_MARKER_PATH}" ]; then echo "${STARTED}1"; else echo "${STARTED}0"; fi`;

/**
 * Reads the output of {@link CHECK_COMMAND}. A listing with some GPUs but fewer than promised is a
 * mismatch at once; no listing at all (drivers still loading, `nvidia-smi` failing) is not yet.
 */
export function readCheck(stdout: string, want: UsableWhen): MachineCheck {
  const listed = stdout.split('\n').filter((l) => /^GPU \d+:/.test(l)).length;
  const smiExit = /__gpr_smi_exit=(\d+)/.exec(stdout)?.[1];
  if (want.gpus > 0) {
    if (listed > 0 && listed < want.gpus) return { kind: 'gpu_mismatch', listed, promised: want.gpus };
    if (listed < want.gpus) return { kind: 'not_yet', phase: 'checking_gpus', detail: `nvidia-smi -L listed no GPU yet (exit ${smiExit ?? 'unknown'})` };
  }
  if (want.startupScript && !stdout.includes(`${STARTED}1`)) return { kind: 'not_yet', phase: 'starting', detail: 'the startup script has not started yet' };
  return { kind: 'usable' };
}

/** Logs in with the rental's key and checks the machine; never throws (a refused login is `waiting_for_ssh`). */
export async function checkMachine(target: SshTarget, want: UsableWhen, timeoutMs: number): Promise<MachineCheck> {
  let stdout: string;
  try {
    stdout = (await sshExec(target, CHECK_COMMAND, { timeoutMs })).stdout;
  } catch (err) {
    return { kind: 'not_yet', phase: 'waiting_for_ssh', detail: (err as Error).message };
  }
  return readCheck(stdout, want);
}
