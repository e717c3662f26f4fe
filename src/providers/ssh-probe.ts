import type { NodeSSH } from 'node-ssh';

/** Where and as whom to log in over SSH with a deployment's key. */
export interface SshTarget {
  host: string;
  port: number;
  user: string;
  /** OpenSSH private key text (see `generateDeploymentKeyPair`). */
  privateKey: string;
}

/**
 * Outcome of one login attempt. `reason` says why it failed:
 * `refused` (nothing listening / connection reset), `auth` (the server turned the key down),
 * `timeout` (no finished handshake within the time limit), `error` (anything else).
 */
export type SshProbeResult = { ok: true } | { ok: false; reason: 'refused' | 'auth' | 'timeout' | 'error'; detail: string };

/** Output of one remote command; `code` is null when the command died of a signal. */
export interface SshExecResult {
  stdout: string;
  stderr: string;
  code: number | null;
  signal: string | null;
}

export interface SshOptions {
  /** Limit for TCP connect, handshake and authentication together. Default 5000 ms. */
  timeoutMs?: number;
}

function classify(err: unknown): Exclude<SshProbeResult, { ok: true }> {
  const e = err as { code?: string; level?: string; message?: string };
  const detail = e.message ?? String(err);
  if (e.level === 'client-authentication' || /authentication methods failed/i.test(detail)) return { ok: false, reason: 'auth', detail };
  if (e.level === 'client-timeout' || /timed out/i.test(detail)) return { ok: false, reason: 'timeout', detail };
  if (e.code === 'ECONNREFUSED' || e.code === 'ECONNRESET' || e.code === 'ETIMEDOUT' || /no response from server/i.test(detail)) {
    return { ok: false, reason: 'refused', detail };
  }
  return { ok: false, reason: 'error', detail };
}

async function connect(target: SshTarget, opts: SshOptions): Promise<NodeSSH> {
  // Loaded here, not at start-up: node-ssh brings ssh2 and its 16 MB cipher memory (see loadSsh2).
  const ssh = new (await import('node-ssh')).NodeSSH();
  await ssh.connect({
    host: target.host,
    port: target.port,
    username: target.user,
    privateKey: target.privateKey,
    readyTimeout: opts.timeoutMs ?? 5000,
    tryKeyboard: false,
    // We have no host key to pin yet (providers do not report one); the login key is what we test.
    hostVerifier: () => true,
  });
  // node-ssh stops listening for errors once connected; a server that drops us later (an instance
  // being destroyed) would otherwise raise an unhandled 'error' event.
  ssh.connection?.on('error', () => undefined);
  return ssh;
}

/** Tries to log in and disconnects at once; never throws. */
export async function sshProbe(target: SshTarget, opts: SshOptions = {}): Promise<SshProbeResult> {
  let ssh: NodeSSH | undefined;
  try {
    ssh = await connect(target, opts);
    return { ok: true };
  } catch (err) {
    return classify(err);
  } finally {
    ssh?.dispose();
  }
}

/** Runs one command over a fresh connection; throws when the login itself fails. */
export async function sshExec(target: SshTarget, command: string, opts: SshOptions = {}): Promise<SshExecResult> {
  const ssh = await connect(target, opts);
  try {
    const r = await ssh.execCommand(command, { noTrim: true });
    return { stdout: r.stdout, stderr: r.stderr, code: r.code, signal: r.signal };
  } finally {
    ssh.dispose();
  }
}
