import { spawn, type ChildProcess } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { connect, createServer, type Server as NetServer, type Socket } from 'node:net';
import type { AuthContext, Connection, ParsedKey, ServerChannel, Server as Ssh2Server } from 'ssh2';
import type { Logger } from '../../src/logger.js';
import { loadSsh2 } from '../../src/providers/ssh-keys.js';
import {
  sandboxShellCommand,
  sessionEnv,
  shellIsolation,
  type SandboxCommand,
  type SandboxOwner,
  type ShellIsolation,
} from './sandbox.js';

/** The only login a local instance accepts, like a cloud image's default user. */
export const LOCAL_SSH_USER = 'gpu';

export interface SshInstanceServerOptions {
  instanceId: string;
  /** The instance's own host key, OpenSSH private key text. */
  hostKey: string;
  /** The public key allowed in (OpenSSH `authorized_keys` line); more may be added with `authorize`. */
  authorizedKey: string;
  /** The login name accepted; the local provider's `gpu` unless a fake cloud image says otherwise. */
  user?: string;
  sandboxDir: string;
  /** The instance's own uid and gid; absent, commands keep the service's user. */
  owner?: SandboxOwner;
  /** How commands are cut off from the host; default: the strongest this host allows ({@link shellIsolation}). */
  isolation?: ShellIsolation;
  /**
   * What runs `/bin/sh shArgs` for a session, when the machine has more to it than the sandbox (its
   * own namespaces and environment); default {@link sandboxShellCommand} with `owner` and `isolation`.
   * Throws when the machine cannot run commands now.
   */
  shell?(shArgs: string[]): Promise<SandboxCommand>;
  logger: Logger;
  /**
   * Asked before letting a client in. Another process may have destroyed the instance; a
   * machine that no longer exists must stop accepting logins wherever its server runs.
   */
  isAlive(): Promise<boolean>;
  /** Called once when `isAlive` said no, so the owner can close and forget this server. */
  onDead(): void;
}

// sshd's default AcceptEnv on common distributions: locale only, so a client cannot move PATH or HOME.
const ACCEPTED_ENV = /^(LANG|LC_[A-Z]+)$/;

function parsePublicKey(text: string): ParsedKey {
  const k = loadSsh2().utils.parseKey(text);
  if (k instanceof Error) throw new Error(`local provider: not an OpenSSH public key (${k.message})`);
  const key = Array.isArray(k) ? k[0] : k;
  if (!key || key.isPrivateKey()) throw new Error('local provider: expected one OpenSSH public key');
  return key;
}

/**
 * One instance's SSH endpoint on 127.0.0.1: public-key login for `gpu` with the instance's key
 * only; `exec` and a minimal pty-less `shell` run `/bin/sh` in the sandbox with a scrubbed
 * environment (never the service's own, which holds its secrets), as the instance's own
 * unprivileged user when one is given, and in network and mount namespaces apart from the host's
 * where the host allows (see {@link ShellIsolation}; the machine's own when `shell` says so): no
 * TCP to this host (its database, other instances' SSH ports) and no Unix sockets under `/run`
 * or `/tmp`. It is still a development stand-in for a cloud machine: the shell shares this host's
 * kernel, process list and world-readable files.
 */
export class SshInstanceServer {
  /** Checks a public key before it is stored, with the same parser the server uses. */
  static assertPublicKey(text: string): void {
    parsePublicKey(text);
  }

  /** Identification string carrying the instance id, so a process can tell whose server holds a port. */
  static identFor(instanceId: string): string {
    return `GpuRentalLocal_${instanceId}`;
  }

  /** True when `port` on 127.0.0.1 is served by this instance's SSH server (in any process). */
  static async isServing(port: number, instanceId: string, timeoutMs = 1000): Promise<boolean> {
    const expected = `SSH-2.0-${SshInstanceServer.identFor(instanceId)}`;
    return new Promise((resolve) => {
      const sock = connect({ host: '127.0.0.1', port });
      let buf = '';
      const done = (v: boolean) => {
        clearTimeout(timer);
        sock.destroy();
        resolve(v);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      sock.setEncoding('latin1');
      sock.on('data', (d: string) => {
        buf += d;
        const nl = buf.indexOf('\n');
        if (nl >= 0) done(buf.slice(0, nl).replace(/\r$/, '') === expected);
        else if (buf.length > 255) done(false);
      });
      sock.on('error', () => done(false));
      sock.on('close', () => done(false));
    });
  }

  private readonly ssh: Ssh2Server;
  // We own the listening socket and hand connections to ssh2, so close() can cut every socket,
  // including ones that never finished the handshake.
  private readonly net: NetServer;
  // Clouds that attach keys after create (Vast) add to this list; the first is the create-time key.
  private readonly allowed: ParsedKey[] = [];
  private readonly user: string;
  private readonly sockets = new Set<Socket>();
  private readonly children = new Set<ChildProcess>();
  private readonly log: Logger;
  private listening = false;
  private closed = false;
  private deadReported = false;
  port: number | undefined;

  constructor(private readonly opts: SshInstanceServerOptions) {
    this.allowed.push(parsePublicKey(opts.authorizedKey));
    this.user = opts.user ?? LOCAL_SSH_USER;
    this.log = opts.logger.child({ instanceId: opts.instanceId });
    this.ssh = new (loadSsh2().Server)(
      { hostKeys: [opts.hostKey], ident: SshInstanceServer.identFor(opts.instanceId) },
      (client) => this.onConnection(client),
    );
    this.net = createServer((socket) => {
      if (this.closed) {
        socket.destroy();
        return;
      }
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      this.ssh.injectSocket(socket);
    });
  }

  /** Lets one more public key in, as `authorized_keys` would after a cloud attached it. */
  authorize(publicKey: string): void {
    const key = parsePublicKey(publicKey);
    const blob = key.getPublicSSH();
    if (!this.allowed.some((k) => k.getPublicSSH().equals(blob))) this.allowed.push(key);
  }

  /**
   * Listens on `host`:`port` (0 for an ephemeral one) and resolves the bound port. `host` defaults
   * to 127.0.0.1; cloud fakes pass other loopback addresses so many machines share one port number.
   */
  listen(port = 0, host = '127.0.0.1'): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.net.once('error', onError);
      this.net.listen(port, host, () => {
        this.net.off('error', onError);
        this.net.on('error', (err: Error) => this.log.warn({ err }, 'local instance ssh server error'));
        this.listening = true;
        this.port = (this.net.address() as { port: number }).port;
        resolve(this.port);
      });
    });
  }

  /** Stops listening, drops every connection and kills every command still running. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const child of this.children) this.kill(child);
    // A destroyed machine does not say goodbye: cut the sockets rather than disconnect politely.
    for (const socket of this.sockets) socket.destroy();
    if (!this.listening) return;
    await new Promise<void>((resolve) => this.net.close(() => resolve()));
  }

  private onConnection(client: Connection): void {
    // A client that vanishes mid-handshake must not take the worker down with it.
    client.on('error', (err: Error) => this.log.debug({ err: err.message }, 'local instance ssh client error'));
    client.on('authentication', (ctx) => void this.authenticate(ctx));
    client.on('ready', () => {
      client.on('session', (accept) => {
        const session = accept();
        const env: Record<string, string> = {};
        session.on('env', (acceptEnv, rejectEnv, info) => {
          if (ACCEPTED_ENV.test(info.key)) {
            env[info.key] = info.val;
            acceptEnv?.();
          } else rejectEnv?.();
        });
        // No pseudo-terminals: clients fall back to plain pipes, which is what exec needs.
        session.on('pty', (_accept, rejectPty) => rejectPty?.());
        session.on(
          'exec',
          (acceptExec, _reject, info) => void this.runIfAlive(acceptExec(), ['-c', info.command], env),
        );
        session.on('shell', (acceptShell) => void this.runIfAlive(acceptShell(), [], env));
      });
    });
  }

  private async authenticate(ctx: AuthContext): Promise<void> {
    const deny = () => ctx.reject(['publickey']);
    if (ctx.method !== 'publickey' || ctx.username !== this.user) return deny();
    const offered = ctx.key.data;
    const allowed = this.allowed.find((k) => {
      const blob = k.getPublicSSH();
      return offered.length === blob.length && timingSafeEqual(offered, blob);
    });
    if (!allowed) return deny();
    // Without a signature the client only asks whether this key would do; the real login follows.
    if (!ctx.signature || !ctx.blob) return ctx.accept();
    if (allowed.verify(ctx.blob, ctx.signature, ctx.hashAlgo) !== true) return deny();
    if (!(await this.alive())) return deny();
    ctx.accept();
  }

  /** Asks `isAlive`, reporting a death once; false once closed. */
  private async alive(): Promise<boolean> {
    let alive = true;
    try {
      alive = await this.opts.isAlive();
    } catch (err) {
      // The machine does not depend on the provider's database; keep serving if it is unreachable.
      this.log.warn({ err }, 'local instance liveness check failed; serving anyway');
    }
    if (alive && !this.closed) return true;
    if (!this.deadReported) {
      this.deadReported = true;
      this.opts.onDead();
    }
    return false;
  }

  // A connection opened before the instance was destroyed elsewhere must not start commands under
  // a uid that may already belong to another instance.
  private async runIfAlive(channel: ServerChannel, args: string[], clientEnv: Record<string, string>): Promise<void> {
    let gone = false;
    channel.once('close', () => (gone = true));
    const alive = await this.alive();
    let cmd: SandboxCommand | null = null;
    if (alive) {
      try {
        cmd = this.opts.shell
          ? await this.opts.shell(args)
          : sandboxShellCommand(this.opts.isolation ?? shellIsolation(), this.opts.sandboxDir, this.opts.owner, args);
      } catch (err) {
        this.log.warn({ err }, 'local instance could not run a command');
      }
    }
    // A command started after its channel closed would have nobody to kill it.
    if (gone) return;
    if (cmd) {
      this.run(channel, cmd, clientEnv);
      return;
    }
    channel.stderr.write(alive ? 'this machine is not running\n' : 'this machine no longer exists\n');
    channel.exit(255);
    channel.end();
  }

  private run(channel: ServerChannel, cmd: SandboxCommand, clientEnv: Record<string, string>): void {
    const dir = this.opts.sandboxDir;
    const child = spawn(cmd.file, cmd.args, {
      cwd: dir,
      // Set only without namespaces; libuv then also drops supplementary groups.
      ...(cmd.uid !== undefined ? { uid: cmd.uid, gid: cmd.gid } : {}),
      // Own process group, so destroying the instance can kill everything a command started.
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: sessionEnv(dir, this.user, clientEnv),
    });
    this.children.add(child);
    let finished = false;
    child.stdin.on('error', () => {
      // The command exited without reading its input; the client's remaining bytes are moot.
    });
    channel.pipe(child.stdin);
    child.stdout.pipe(channel, { end: false });
    child.stderr.pipe(channel.stderr, { end: false });
    child.on('error', (err) => {
      if (finished) return;
      finished = true;
      this.children.delete(child);
      channel.stderr.write(`sh: ${err.message}\n`);
      channel.exit(127);
      channel.end();
    });
    child.on('close', (code, signal) => {
      this.children.delete(child);
      if (finished) return;
      finished = true;
      if (code !== null) channel.exit(code);
      else channel.exit((signal ?? 'KILL').replace(/^SIG/, ''), false, '');
      channel.end();
    });
    channel.on('close', () => {
      if (!finished) this.kill(child);
    });
  }

  private kill(child: ChildProcess): void {
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }
}
