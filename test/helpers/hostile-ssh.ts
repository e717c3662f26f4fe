import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import type { Connection, ServerChannel } from 'ssh2';
import type { CreateResult, InstanceInfo, OfferRef, Provider, ProviderOffer } from '../../src/providers/provider.js';
import { fingerprintOfKey } from '../../src/providers/ssh-probe.js';
import { generateDeploymentKeyPair, loadSsh2 } from '../../src/providers/ssh-keys.js';

/**
 * What a machine its renter controls can do to the service's SSH checks:
 * - `hang`: lets any key in; a command never answers and never ends;
 * - `flood`: a command writes without end (to stdout, or stderr with `floodStream`), up to 800 MB;
 * - `drop`: a command writes a little, then the machine drops the connection;
 * - `silent`: accepts TCP and never says a word (no SSH banner);
 * - `stall`: sends the SSH banner, then nothing (the handshake never finishes);
 * - `answer`: lets any key in and answers every command with `stdout`, exit 0 (an honest machine).
 */
export type HostileMode = 'hang' | 'flood' | 'drop' | 'silent' | 'stall' | 'answer';

export interface HostileOptions {
  /** Output of `answer`. */
  stdout?: string;
  floodStream?: 'stdout' | 'stderr';
  /** The host key (OpenSSH private key text); default a fresh one. */
  hostKey?: string;
}

/** Most a `flood` command writes: the size that killed a worker in the audit. */
export const FLOOD_BYTES = 800 * 1024 * 1024;

/**
 * A hostile SSH machine on 127.0.0.1 (ssh2's Server), counting what it was asked and what it
 * managed to send. Emits `exec` (the command) when a command starts, and `connection` per TCP connection.
 */
export class HostileSshServer extends EventEmitter {
  readonly hostKeyFingerprint: string;
  port = 0;
  /** Bytes a flood handed to the channel, which only passes them on as the client's window allows. */
  bytesSent = 0;
  execs = 0;
  connections = 0;
  private readonly net: NetServer;
  private readonly sockets = new Set<Socket>();
  private readonly channels = new Set<ServerChannel>();

  private constructor(
    public mode: HostileMode,
    private readonly opts: HostileOptions,
  ) {
    super();
    const hostKey = opts.hostKey ?? generateDeploymentKeyPair('hostile-host-key').privateKey;
    this.hostKeyFingerprint = fingerprintOfKey(hostKey);
    const ssh = new (loadSsh2().Server)({ hostKeys: [hostKey] }, (client) => this.onClient(client));
    this.net = createServer((socket) => {
      this.connections++;
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
      this.emit('connection');
      // Read and dropped, so the service's hang-up is seen (`open` counts it).
      if (this.mode === 'silent') return void socket.resume();
      if (this.mode === 'stall') return void socket.resume().write('SSH-2.0-Stalling\r\n');
      ssh.injectSocket(socket);
    });
  }

  static async start(mode: HostileMode, opts: HostileOptions = {}): Promise<HostileSshServer> {
    const s = new HostileSshServer(mode, opts);
    await new Promise<void>((resolve) => s.net.listen(0, '127.0.0.1', resolve));
    s.port = (s.net.address() as { port: number }).port;
    return s;
  }

  /** TCP connections open now. */
  get open(): number {
    return this.sockets.size;
  }

  /** Commands running now (their channels open). */
  get running(): number {
    return this.channels.size;
  }

  /** Resolves on the next `exec` (a command started). */
  nextExec(): Promise<string> {
    return new Promise((resolve) => this.once('exec', resolve));
  }

  /** Drops every connection (the machine goes away a moment) and keeps listening. */
  dropConnections(): void {
    for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.net.close(() => resolve()));
  }

  private onClient(client: Connection): void {
    client.on('error', () => undefined);
    client.on('authentication', (ctx) => ctx.accept());
    client.on('ready', () => {
      client.on('session', (accept) => {
        const session = accept();
        session.on('exec', (acceptExec, _reject, info) => {
          const channel = acceptExec();
          channel.on('error', () => undefined);
          this.channels.add(channel);
          channel.on('close', () => this.channels.delete(channel));
          this.execs++;
          this.emit('exec', info.command);
          this.run(channel);
        });
      });
    });
  }

  private run(channel: ServerChannel): void {
    if (this.mode === 'hang') return;
    if (this.mode === 'answer') {
      channel.write(this.opts.stdout ?? '');
      channel.exit(0);
      channel.end();
      return;
    }
    if (this.mode === 'drop') {
      channel.write('GPU 0: half a line of outp');
      // Once the bytes are out, the machine goes away without a word.
      setImmediate(() => {
        for (const s of this.sockets) s.destroy();
      });
      return;
    }
    // flood: as fast as the client's window lets it, until the channel closes or 800 MB went.
    const target = this.opts.floodStream === 'stderr' ? channel.stderr : channel;
    const chunk = Buffer.alloc(32 * 1024, 'x');
    let closed = false;
    channel.on('close', () => (closed = true));
    const pump = () => {
      while (!closed && this.bytesSent < FLOOD_BYTES) {
        this.bytesSent += chunk.length;
        if (!target.write(chunk)) return void target.once('drain', pump);
      }
    };
    pump();
  }
}

/** Where a {@link HostileCloud} instance of an offer answers SSH, and what host key the cloud reports for it. */
export interface HostileRoute {
  server: HostileSshServer;
  /** The fingerprint the cloud's answer gives; absent: the cloud reports none. */
  reportedHostKey?: string;
}

/**
 * A cloud whose machines are {@link HostileSshServer}s: every instance of offer `key` runs at once
 * and answers SSH at `routes[key]`. Register it next to the local provider (`ContextOptions.registry`).
 */
export class HostileCloud implements Provider {
  readonly id = 'hostile';
  readonly capabilities = { labels: true, sshKeyPerInstance: true, listInstances: true };
  private readonly instances = new Map<string, { label: string; offerKey: string; gone: boolean }>();

  constructor(
    readonly routes: Record<string, HostileRoute | undefined>,
    private readonly offerKeys: string[],
  ) {}

  async listOffers(): Promise<ProviderOffer[]> {
    return this.offerKeys.map((key) => ({
      key,
      name: 'NVIDIA H100 SXM',
      category: 'datacenter',
      vramGb: 80,
      gpuCount: 1,
      pricePerHourMinor: 100,
      maximumDurationSeconds: 86400,
    }));
  }

  async create(label: string, offer: OfferRef): Promise<CreateResult> {
    const found = [...this.instances.entries()].find(([, i]) => i.label === label);
    if (found) return { kind: 'created', instanceId: found[0] };
    const instanceId = randomUUID();
    this.instances.set(instanceId, { label, offerKey: offer.key, gone: false });
    return { kind: 'created', instanceId };
  }

  async findByLabel(label: string): Promise<InstanceInfo | null> {
    const found = [...this.instances.entries()].find(([, i]) => i.label === label && !i.gone);
    return found ? this.get(found[0]) : null;
  }

  async get(instanceId: string): Promise<InstanceInfo> {
    const i = this.instances.get(instanceId);
    if (!i || i.gone) return { instanceId, label: i?.label ?? '', state: 'gone' };
    const route = this.routes[i.offerKey];
    if (!route) return { instanceId, label: i.label, state: 'pending', startupPhase: 'booting' };
    return {
      instanceId,
      label: i.label,
      state: 'running',
      ssh: { host: '127.0.0.1', port: route.server.port, user: 'root' },
      ...(route.reportedHostKey ? { sshHostKey: route.reportedHostKey } : {}),
    };
  }

  async destroy(instanceId: string): Promise<void> {
    const i = this.instances.get(instanceId);
    if (i) i.gone = true;
  }

  async listInstances(): Promise<InstanceInfo[]> {
    return Promise.all([...this.instances.entries()].filter(([, i]) => !i.gone).map(([id]) => this.get(id)));
  }
}
