import { SshLoginError, sshExec, type SshExecResult } from '../../providers/ssh-probe.js';
import { listedGpus } from '../rentals/lifecycle/machine-check.js';
import type { CredentialsDto } from '../rentals/wire/rentals.dto.js';
import { canaryProblem, canaryStop } from './canary-watch.js';

/** Bounds of the canary's one SSH command: a login and a GPU listing take seconds on a working machine. */
const SSH_BOUNDS = { timeoutMs: 10_000, commandTimeoutMs: 30_000 };

/**
 * The GPUs `nvidia-smi -L` lists on the machine, over SSH with the credentials an agent's reveal
 * gave. A login that fails, a command that fails or lists nothing is a {@link canaryProblem}
 * naming what happened; `stop` ends the wait at once (the command's own bounds end it behind).
 */
export async function listGpusOverSsh(
  c: Pick<CredentialsDto, 'host' | 'port' | 'user' | 'privateKey'>,
  stop?: AbortSignal,
): Promise<string[]> {
  const target = { host: c.host, port: c.port, user: c.user, privateKey: c.privateKey };
  let res: SshExecResult;
  try {
    res = await unlessStopped(sshExec(target, 'nvidia-smi -L', SSH_BOUNDS), stop);
  } catch (err) {
    if (err instanceof SshLoginError)
      throw canaryProblem(
        `SSH to ${c.user}@${c.host}:${c.port} with the rental's key failed (${err.reason}): ${err.message}`,
      );
    throw err;
  }
  const gpus = listedGpus(res.stdout);
  if (res.code !== 0 || gpus.length === 0) {
    const how = res.cut ? `was cut short (${res.cut})` : `exited ${res.code ?? res.signal}`;
    const said = res.stderr.trim().split('\n')[0]?.slice(0, 200);
    throw canaryProblem(`nvidia-smi -L over SSH ${how} and listed ${gpus.length} GPU(s)${said ? `: ${said}` : ''}.`);
  }
  return gpus;
}

/** `work`, unless `signal` is aborted first. */
function unlessStopped<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return work;
  work.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(canaryStop('stop', 'stopped during nvidia-smi -L'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
