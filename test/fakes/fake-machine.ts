import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createLogger } from '../../src/logger.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { MachineRuntime, machineStateDir, readHostPorts, removeMachineState } from '../../plugins/local/machine.js';
import { hasMachineNamespaces, stopMachine } from '../../plugins/local/machine-namespaces.js';
import {
  prepareSandbox,
  removeSandbox,
  sandboxDirFor,
  sessionEnv,
  shellIsolation,
} from '../../plugins/local/sandbox.js';
import { SshInstanceServer } from '../../plugins/local/ssh-instance-server.js';

export interface FakeMachineOptions {
  /** The image's login user (`root` on Vast and RunPod images, `ubuntu` on Lambda). */
  user: string;
  gpuName: string;
  gpuCount: number;
  vramGb: number | null;
  /** The key the cloud installed at create time; `authorize` adds more later. */
  publicKey: string;
  /** Loopback address to listen on (any of 127.0.0.0/8 on Linux). Default 127.0.0.1. */
  host?: string;
  /** Port to listen on. Default an ephemeral one. */
  port?: number;
  /**
   * Shell text every SSH session and the startup script read first, as a login reads what the
   * machine's boot left in its profile (`export NAME='value'` lines; see {@link profileOf}).
   */
  profile?: string;
  /** Ports of the machine reachable from this host's loopback, each on a host port of its own (the cloud's port mapping). */
  ports?: number[];
}

const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The profile that exports `env`, byte for byte. */
export function profileOf(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([name, value]) => `export ${name}=${sq(value)}\n`)
    .join('');
}

/**
 * The machine behind a fake cloud's instance: a real SSH endpoint on a loopback address that lets in only
 * the keys the cloud delivered, with a simulated `nvidia-smi`. Like a local provider's machine, it is
 * one set of network and mount namespaces that every command joins (where this host allows), so a
 * server its startup script starts answers its SSH sessions on the machine's own 127.0.0.1, and
 * `ports` reach it from this host. Commands run as the service's user (root in the test runs, as
 * the clouds' images log in), with the machine's home as HOME. The fake cloud decides when it is
 * reachable, when its startup script runs and when it dies; forgetting an instance in the API need
 * not stop its machine.
 */
export class FakeMachine {
  private closed = false;
  private started = false;
  private startupPid: number | undefined;

  private constructor(
    private readonly server: SshInstanceServer,
    private readonly runtime: MachineRuntime,
    private readonly dir: string,
    private readonly user: string,
    readonly port: number,
    readonly host: string,
    /** The host port (on 127.0.0.1) of each of `ports`. */
    readonly hostPorts: Readonly<Record<number, number>>,
  ) {}

  static async start(o: FakeMachineOptions): Promise<FakeMachine> {
    const id = `fake-${randomUUID()}`;
    const dir = sandboxDirFor(id);
    await prepareSandbox(
      dir,
      { instanceId: id, name: o.gpuName, count: o.gpuCount, vramGb: o.vramGb },
      undefined,
      o.profile ? { environment: o.profile } : {},
    );
    let alive = true;
    const logger = createLogger('silent');
    const isolation = shellIsolation();
    const runtime = new MachineRuntime({
      instanceId: id,
      sandboxDir: dir,
      owner: undefined,
      isolation,
      // The startup script is the cloud's to run (`startup`), when its boot would.
      record: {
        image: null,
        env: {},
        startupScript: null,
        ports: [...new Set(o.ports ?? [])],
        diskGb: null,
        gpuCount: o.gpuCount,
      },
      user: o.user,
      logger,
      isAlive: async () => alive,
      onDead: () => undefined,
    });
    const server = new SshInstanceServer({
      instanceId: id,
      hostKey: generateDeploymentKeyPair('fake-host-key').privateKey,
      authorizedKey: o.publicKey,
      user: o.user,
      sandboxDir: dir,
      isolation,
      shell: (args) => runtime.shell(args),
      logger,
      isAlive: async () => alive,
      onDead: () => {
        alive = false;
      },
    });
    const host = o.host ?? '127.0.0.1';
    let port: number;
    let hostPorts: Record<string, number>;
    try {
      port = await server.listen(o.port ?? 0, host);
      await runtime.boot();
      hostPorts = await readHostPorts(dir);
    } catch (err) {
      alive = false;
      await Promise.all([server.close(), runtime.close()]);
      await stopMachine(machineStateDir(dir));
      await Promise.all([removeSandbox(dir), removeMachineState(dir)]);
      throw err;
    }
    const byPort = Object.fromEntries(Object.entries(hostPorts).map(([p, h]) => [Number(p), h]));
    return new FakeMachine(server, runtime, dir, o.user, port, host, byPort);
  }

  /** Adds a key as the cloud's "attach SSH key" call would. */
  authorize(publicKey: string): void {
    this.server.authorize(publicKey);
  }

  /**
   * Runs `script` with `/bin/sh` in the background of the machine, as its user with the profile
   * read, once in the machine's life (a later call does nothing), as a boot runs a startup script.
   * Resolves once it has started.
   */
  async startup(script: string): Promise<void> {
    if (this.closed || this.started) return;
    this.started = true;
    const cmd = await this.runtime.shell(['-s']);
    if (this.closed) return;
    await new Promise<void>((resolve) => {
      const child = spawn(cmd.file, cmd.args, {
        cwd: this.dir,
        env: sessionEnv(this.dir, this.user),
        ...(cmd.uid !== undefined ? { uid: cmd.uid, gid: cmd.gid } : {}),
        // The machine's, not this process's: `close` ends it with everything else in the machine.
        detached: true,
        stdio: ['pipe', 'ignore', 'ignore'],
      });
      child.on('error', () => resolve());
      child.on('spawn', () => {
        this.startupPid = child.pid;
        resolve();
      });
      child.stdin.on('error', () => undefined);
      child.stdin.end(script);
      child.unref();
    });
  }

  /** Powers the machine off: SSH and its ports stop answering at once, and every process of it ends. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([this.server.close(), this.runtime.close()]);
    // Without namespaces of its own (a host that allows none), the script's processes are found by their group.
    if (this.startupPid !== undefined && !hasMachineNamespaces(shellIsolation())) {
      try {
        process.kill(-this.startupPid, 'SIGKILL');
      } catch {
        // Ended already.
      }
    }
    await stopMachine(machineStateDir(this.dir));
    await Promise.all([removeSandbox(this.dir), removeMachineState(this.dir)]);
  }
}
