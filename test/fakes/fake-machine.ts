import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { connect, createServer, type Server as NetServer, type Socket } from 'node:net';
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

/** Bytes that crossed a machine's SSH port since it started, as its cloud's network meters them. */
export interface MachineTraffic {
  /** Bytes the machine sent to its clients. */
  sentBytes: number;
  /** Bytes it received from them. */
  receivedBytes: number;
}

/**
 * The machine's public SSH port: each connection is relayed to the SSH server's own port and
 * every byte counted on the way, as a cloud's edge meters what its machine moves (the SSH
 * protocol's own bytes included, as on a real link). The relay's sockets are kept so a power-off
 * cuts them.
 */
class MeteredPort {
  readonly traffic: MachineTraffic = { sentBytes: 0, receivedBytes: 0 };
  private readonly sockets = new Set<Socket>();
  private readonly server: NetServer;
  private target: { host: string; port: number } | undefined;

  constructor() {
    this.server = createServer((client) => this.relay(client));
  }

  /** Listens on `host`:`port` (0: an ephemeral one) and resolves the bound port. */
  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  /** Where connections go from now on; until then they are cut, as a machine still booting refuses them. */
  relayTo(host: string, port: number): void {
    this.target = { host, port };
  }

  private relay(client: Socket): void {
    if (!this.target) return void client.destroy();
    const inner = connect(this.target);
    for (const s of [client, inner]) {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    }
    client.on('data', (d: Buffer) => (this.traffic.receivedBytes += d.length));
    inner.on('data', (d: Buffer) => (this.traffic.sentBytes += d.length));
    client.pipe(inner);
    inner.pipe(client);
    // One side's end is the other's, as on a single TCP connection.
    client.on('error', () => inner.destroy());
    inner.on('error', () => client.destroy());
    client.on('close', () => inner.destroy());
    inner.on('close', () => client.destroy());
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

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
 * not stop its machine. Its SSH port counts the bytes it moves ({@link traffic}), for clouds that
 * bill traffic; the cloud's own way in ({@link controlPort}) is not counted.
 */
export class FakeMachine {
  private closed = false;
  private started = false;
  private startupPid: number | undefined;

  private constructor(
    private readonly server: SshInstanceServer,
    private readonly metered: MeteredPort,
    private readonly runtime: MachineRuntime,
    private readonly dir: string,
    private readonly user: string,
    readonly port: number,
    /** The SSH server's own port on `host`, unmetered: the cloud's agent's way in (Vast's runs `onstart`), never a customer's. */
    readonly controlPort: number,
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
    const metered = new MeteredPort();
    let port: number;
    let controlPort: number;
    let hostPorts: Record<string, number>;
    try {
      // The public port first: a taken one is the caller's to retry elsewhere (EADDRINUSE).
      port = await metered.listen(o.port ?? 0, host);
      controlPort = await server.listen(0, host);
      metered.relayTo(host, controlPort);
      await runtime.boot();
      hostPorts = await readHostPorts(dir);
    } catch (err) {
      alive = false;
      await Promise.all([metered.close(), server.close(), runtime.close()]);
      await stopMachine(machineStateDir(dir));
      await Promise.all([removeSandbox(dir), removeMachineState(dir)]);
      throw err;
    }
    const byPort = Object.fromEntries(Object.entries(hostPorts).map(([p, h]) => [Number(p), h]));
    return new FakeMachine(server, metered, runtime, dir, o.user, port, controlPort, host, byPort);
  }

  /** What the machine's SSH port has moved so far (a copy): what a cloud that bills traffic counts. */
  traffic(): MachineTraffic {
    return { ...this.metered.traffic };
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
    await Promise.all([this.metered.close(), this.server.close(), this.runtime.close()]);
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
