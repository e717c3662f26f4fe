import { createHash } from 'node:crypto';
import { Socket } from 'node:net';
import type { Client, ClientChannel } from 'ssh2';
import { loadSsh2 } from './ssh-keys.js';

// Every SSH command the service runs goes to a machine its renter controls, often as root: the
// machine decides how long it takes and how much it says. So every bound here is the service's
// own (a timer and a byte count in this process), never the machine's `timeout`, and every
// 'error' ssh2 or its socket may emit has a listener for the client's whole life, because an
// unheard one ends the process with every job it runs.

/** Where and as whom to log in over SSH with a deployment's key. */
export interface SshTarget {
  host: string;
  port: number;
  user: string;
  /** OpenSSH private key text (see `generateDeploymentKeyPair`). */
  privateKey: string;
  /**
   * The host key pinned for this machine ({@link hostKeyFingerprint} form): a server showing any
   * other is not logged in to (`host_key`). Absent or null: nothing is pinned yet, any key is
   * taken, and the result names the one shown, to be pinned at this first contact.
   */
  hostKey?: string | null;
}

/**
 * Why a login failed: `refused` (nothing listening, connection reset or closed), `auth` (the
 * server turned the key down), `timeout` (no finished login within the bound), `host_key` (the
 * server showed another host key than the pinned one: not the machine we know), `error` (anything else).
 */
export type SshLoginFailure = 'refused' | 'auth' | 'timeout' | 'host_key' | 'error';

/** Outcome of one login attempt; on a failure, `hostKey` is the fingerprint the server showed, when it got that far. */
export type SshProbeResult = { ok: true } | { ok: false; reason: SshLoginFailure; detail: string; hostKey?: string };

/**
 * What cut a command short on the service's side: `timeout` (it ran past the command bound),
 * `output_cap` (it wrote more than the output cap), `connection_lost` (the machine dropped the
 * connection before the command ended). Any of them means the machine misbehaved or went away,
 * not that it is still starting.
 */
export type SshCut = 'timeout' | 'output_cap' | 'connection_lost';

/** Output of one remote command. */
export interface SshExecResult {
  /** What the command wrote, cut at the output cap. */
  stdout: string;
  stderr: string;
  /** Exit status; null when the command died of a signal or was cut short. */
  code: number | null;
  signal: string | null;
  /** Why the service ended the command itself; null when it ended on its own. */
  cut: SshCut | null;
  /** Fingerprint of the host key the server showed ({@link hostKeyFingerprint}). */
  hostKey: string;
}

/** The service-side bounds of one SSH login and command. */
export interface SshOptions {
  /** TCP connect, handshake and authentication together, in ms. Default {@link SSH_CONNECT_TIMEOUT_MS}. */
  timeoutMs?: number;
  /** From login to the command's end (channel open included), in ms. Default {@link SSH_COMMAND_TIMEOUT_MS}. */
  commandTimeoutMs?: number;
  /** Bytes of stdout and stderr together kept before the command is cut. Default {@link SSH_OUTPUT_CAP_BYTES}. */
  maxOutputBytes?: number;
}

/** Default bound on connect, handshake and authentication. */
export const SSH_CONNECT_TIMEOUT_MS = 5000;
/** Default bound on one command after login. */
export const SSH_COMMAND_TIMEOUT_MS = 30_000;
/** Default output cap: the service's checks print a few lines, so 64 KiB is far more than any honest answer. */
export const SSH_OUTPUT_CAP_BYTES = 64 * 1024;
/** How long a closed connection may take to say goodbye before its socket is destroyed. */
const GOODBYE_MS = 1000;

/** A login that did not get in, with why ({@link SshLoginFailure}). */
export class SshLoginError extends Error {
  constructor(
    readonly reason: SshLoginFailure,
    message: string,
    /** The fingerprint the server showed, when the handshake got that far. */
    readonly hostKey?: string,
  ) {
    super(message);
    this.name = 'SshLoginError';
  }
}

/** OpenSSH's fingerprint of a host key blob: `SHA256:` and the unpadded base64 of its SHA-256, as `ssh-keygen -l` prints it. */
export function hostKeyFingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** The {@link hostKeyFingerprint} of an OpenSSH public key line or private key text (its public half). Throws on text that is no key. */
export function fingerprintOfKey(text: string): string {
  const parsed = loadSsh2().utils.parseKey(text);
  if (parsed instanceof Error) throw new Error(`not an SSH key: ${parsed.message}`);
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!key) throw new Error('not an SSH key');
  return hostKeyFingerprint(key.getPublicSSH());
}

function classify(err: unknown, hostKey: string | undefined): SshLoginError {
  const e = err as { code?: string; level?: string; message?: string };
  const detail = e.message ?? String(err);
  if (e.level === 'client-authentication' || /authentication methods failed/i.test(detail))
    return new SshLoginError('auth', detail, hostKey);
  if (e.level === 'client-timeout' || /timed out/i.test(detail)) return new SshLoginError('timeout', detail, hostKey);
  if (
    e.code === 'ECONNREFUSED' ||
    e.code === 'ECONNRESET' ||
    e.code === 'ETIMEDOUT' ||
    /no response from server|connection lost/i.test(detail)
  ) {
    return new SshLoginError('refused', detail, hostKey);
  }
  return new SshLoginError('error', detail, hostKey);
}

interface Connection {
  client: Client;
  /** Ours, not ssh2's: ssh2 cannot destroy a socket it has ended, and a server that never closes its side would keep it open. */
  sock: Socket;
}

/** Ends a connection politely, and for certain (the socket destroyed) at once or a moment later. */
function dispose({ client, sock }: Connection, now = false): void {
  try {
    client.end();
  } catch {
    // Already gone.
  }
  if (now) sock.destroy();
  else setTimeout(() => sock.destroy(), GOODBYE_MS).unref();
}

interface Session extends Connection {
  hostKey: string;
}

/** Logs in within `timeoutMs` or rejects with an {@link SshLoginError}; the client's errors are heard for its whole life. */
function connect(target: SshTarget, timeoutMs: number): Promise<Session> {
  // Loaded here, not at start-up: ssh2 holds 16 MB of cipher memory (see loadSsh2).
  const client = new (loadSsh2().Client)();
  const sock = new Socket();
  // ssh2 hears the socket's errors once it has it; this listener covers the moment before.
  sock.on('error', () => undefined);
  const conn = { client, sock };
  return new Promise<Session>((resolve, reject) => {
    let settled = false;
    let seen: string | undefined;
    let refusedKey = false;
    const fail = (err: SshLoginError) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      dispose(conn, true);
      reject(err);
    };
    // ssh2's readyTimeout is set too, but a server that stalls in the middle of the handshake must
    // not depend on it: this timer destroys the socket whatever ssh2 is waiting for.
    // Unreferenced: the socket keeps the process up while there is anything to wait for.
    const timer = setTimeout(
      () => fail(new SshLoginError('timeout', `no finished SSH login within ${timeoutMs} ms`, seen)),
      timeoutMs,
    ).unref();
    client.on('error', (err) => {
      if (refusedKey)
        fail(
          new SshLoginError('host_key', `the server showed host key ${seen}, not the pinned ${target.hostKey}`, seen),
        );
      else fail(classify(err, seen));
    });
    client.on('close', () =>
      fail(new SshLoginError('refused', 'the connection closed before the login finished', seen)),
    );
    client.on('ready', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ client, sock, hostKey: seen! });
    });
    try {
      sock.connect({ host: target.host, port: target.port });
      client.connect({
        sock,
        host: target.host,
        port: target.port,
        username: target.user,
        privateKey: target.privateKey,
        readyTimeout: timeoutMs,
        tryKeyboard: false,
        hostVerifier: (key: Buffer) => {
          seen = hostKeyFingerprint(key);
          refusedKey = !!target.hostKey && seen !== target.hostKey;
          return !refusedKey;
        },
      });
    } catch (err) {
      fail(classify(err, seen));
    }
  });
}

/** Tries to log in and disconnects at once; never throws. Bounded by `timeoutMs` whatever the server does. */
export async function sshProbe(target: SshTarget, opts: SshOptions = {}): Promise<SshProbeResult> {
  try {
    dispose(await connect(target, opts.timeoutMs ?? SSH_CONNECT_TIMEOUT_MS));
    return { ok: true };
  } catch (err) {
    const e = err instanceof SshLoginError ? err : classify(err, undefined);
    return { ok: false, reason: e.reason, detail: e.message, ...(e.hostKey ? { hostKey: e.hostKey } : {}) };
  }
}

/**
 * Runs one command over a fresh connection, within the bounds of `opts` whatever the machine
 * does: the output is read as it comes and kept up to the cap, and a command cut short says so
 * in `cut`. Throws an {@link SshLoginError} when the login fails, and an Error when the command
 * could not be started.
 */
export async function sshExec(target: SshTarget, command: string, opts: SshOptions = {}): Promise<SshExecResult> {
  const session = await connect(target, opts.timeoutMs ?? SSH_CONNECT_TIMEOUT_MS);
  try {
    const res = await runCommand(session, command, opts);
    // A cut command's machine is not waited on for a goodbye.
    dispose(session, res.cut !== null);
    return res;
  } catch (err) {
    dispose(session, true);
    throw err;
  }
}

/** A logged-in connection that may run more commands ({@link runCommand}); end it with {@link closeSession}. */
export interface SshSession {
  readonly client: Client;
  readonly sock: Socket;
  /** The host key the server showed at login. */
  readonly hostKey: string;
}

/** Logs in within `timeoutMs` (default {@link SSH_CONNECT_TIMEOUT_MS}) or rejects with an {@link SshLoginError}. */
export function openSession(target: SshTarget, timeoutMs = SSH_CONNECT_TIMEOUT_MS): Promise<SshSession> {
  return connect(target, timeoutMs);
}

/** Ends a session: at once (`now`, for a machine that misbehaved) or after a moment's goodbye. */
export function closeSession(session: SshSession, now = false): void {
  dispose(session, now);
}

/**
 * Runs one command on a logged-in session within the bounds of `opts` (channel open included),
 * leaving the session open: the caller closes it, at once when the command was cut. Throws an
 * Error when the command could not be started (the session is then unfit for another).
 */
export function runCommand(session: SshSession, command: string, opts: SshOptions = {}): Promise<SshExecResult> {
  const { client, hostKey } = session;
  const cap = opts.maxOutputBytes ?? SSH_OUTPUT_CAP_BYTES;
  const commandTimeoutMs = opts.commandTimeoutMs ?? SSH_COMMAND_TIMEOUT_MS;
  return new Promise<SshExecResult>((resolve, reject) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let bytes = 0;
    let code: number | null = null;
    let signal: string | null = null;
    let channel: ClientChannel | undefined;
    let settled = false;
    const onError = () => finish('connection_lost');
    // After the channel's own close had its turn: a server that hangs up right after the exit
    // status ended the command, it did not cut it.
    const onClose = () => setImmediate(() => finish(code !== null || signal !== null ? null : 'connection_lost'));
    const finish = (cut: SshCut | null, failure?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // The session outlives this command: its listeners go with it (the login's stay, so an
      // error is always heard).
      client.removeListener('error', onError);
      client.removeListener('close', onClose);
      if (cut && channel) {
        try {
          channel.close();
        } catch {
          // The connection is going anyway.
        }
      }
      if (failure) return reject(failure);
      const text = (chunks: Buffer[]) => Buffer.concat(chunks).toString('utf8');
      resolve({
        stdout: text(out),
        stderr: text(err),
        code: cut ? null : code,
        signal: cut ? null : signal,
        cut,
        hostKey,
      });
    };
    const timer = setTimeout(() => finish('timeout'), commandTimeoutMs).unref();
    const take = (into: Buffer[]) => (chunk: Buffer) => {
      if (settled) return;
      const room = cap - bytes;
      if (chunk.length > room) {
        if (room > 0) into.push(chunk.subarray(0, room));
        bytes = cap;
        return finish('output_cap');
      }
      into.push(chunk);
      bytes += chunk.length;
    };
    client.on('error', onError);
    client.on('close', onClose);
    try {
      client.exec(command, (e, stream) => {
        if (e) return finish(null, new Error(`the command could not be started: ${e.message}`));
        channel = stream;
        if (settled) return void stream.close();
        stream.on('data', take(out));
        stream.stderr.on('data', take(err));
        stream.on('error', () => finish('connection_lost'));
        stream.stderr.on('error', () => finish('connection_lost'));
        stream.on('exit', (c: number | null, s?: string) => {
          code = typeof c === 'number' ? c : null;
          signal = s ?? null;
        });
        stream.on('close', () => finish(null));
        // Nothing goes to the command's stdin: a command that reads it sees its end at once.
        stream.end();
      });
    } catch (e) {
      finish(null, new Error(`the command could not be started: ${(e as Error).message}`));
    }
  });
}
