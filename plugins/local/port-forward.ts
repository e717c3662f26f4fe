import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../../src/logger.js';
import { SYSTEM_PATH, type SandboxCommand } from './sandbox.js';

/**
 * How one forwarded connection reaches the machine's port: `relay` runs a command inside the
 * machine that connects to the port on the machine's own loopback and carries the bytes over its
 * stdin and stdout; `direct` (a machine without namespaces shares the host's network) connects to
 * the port on this host's loopback.
 */
export type PortRoute = { kind: 'relay'; command: SandboxCommand } | { kind: 'direct' };

/** What a relay runs: node, with {@link RELAY_SCRIPT} and the port. */
export function relayArgv(port: number): string[] {
  return [process.execPath, '-e', RELAY_SCRIPT, String(port)];
}

// Exit 3 tells "nothing listens on the port" apart from a connection that broke later.
const RELAY_SCRIPT = `const s = require('net').connect(Number(process.argv[1]), '127.0.0.1');
let up = false;
s.on('connect', () => { up = true; process.stdin.pipe(s); s.pipe(process.stdout); });
s.on('error', () => process.exit(up ? 1 : 3));
s.on('close', () => process.exit(0));`;

const NOT_LISTENING = 3;

function badGateway(socket: Socket, port: number): void {
  const body = `nothing is listening on port ${port} of this machine\n`;
  socket.end(
    `HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export interface PortForwardsOptions {
  instanceId: string;
  ports: number[];
  /** Where a new connection to `port` goes. Throws when the machine cannot be reached. */
  route(port: number): Promise<PortRoute>;
  /** Asked for every connection: a machine destroyed by another process must stop answering here too. */
  isAlive(): Promise<boolean>;
  /** Called once when `isAlive` said no. */
  onDead(): void;
  logger: Logger;
}

/**
 * The machine's exposed ports on this host's loopback, one listener each, as a cloud's HTTP(S)
 * proxy exposes a container's ports: a connection is carried to the machine's port, and answered
 * `502 Bad Gateway` when nothing listens there yet.
 */
export class PortForwards {
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly relays = new Set<ChildProcess>();
  private readonly log: Logger;
  private closed = false;
  private deadReported = false;

  constructor(private readonly opts: PortForwardsOptions) {
    this.log = opts.logger.child({ instanceId: opts.instanceId });
  }

  /**
   * Listens for every port, on its host port of `previous` (a port number to host port map) when
   * that is free, else on a new one; resolves the map in force.
   */
  async open(previous: Record<string, number>): Promise<Record<string, number>> {
    const hostPorts: Record<string, number> = {};
    for (const port of this.opts.ports) {
      const server = createServer((socket) => void this.forward(port, socket));
      this.servers.push(server);
      const want = previous[String(port)];
      // A restarted machine keeps its addresses, as its SSH port; taken meanwhile, it gets a new one.
      hostPorts[String(port)] = want
        ? await listen(server, want).catch(() => listen(server, 0))
        : await listen(server, 0);
      server.on('error', (err) => this.log.warn({ err, port }, 'local instance port forward error'));
    }
    return hostPorts;
  }

  /** Stops listening and cuts every forwarded connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const relay of this.relays) kill(relay);
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(
      this.servers.map((s) => new Promise<void>((resolve) => (s.listening ? s.close(() => resolve()) : resolve()))),
    );
  }

  private async forward(port: number, socket: Socket): Promise<void> {
    socket.on('error', () => undefined);
    if (this.closed) return void socket.destroy();
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.pause();
    let alive = true;
    try {
      alive = await this.opts.isAlive();
    } catch (err) {
      this.log.warn({ err }, 'local instance liveness check failed; forwarding anyway');
    }
    if (!alive || this.closed) {
      socket.destroy();
      if (!alive && !this.deadReported) {
        this.deadReported = true;
        this.opts.onDead();
      }
      return;
    }
    let route: PortRoute;
    try {
      route = await this.opts.route(port);
    } catch (err) {
      this.log.warn({ err, port }, 'local instance port forward could not reach the machine');
      return badGateway(socket, port);
    }
    if (socket.destroyed) return;
    if (route.kind === 'direct') this.direct(port, socket);
    else this.relay(port, socket, route.command);
  }

  private direct(port: number, socket: Socket): void {
    const upstream = connect(port, '127.0.0.1');
    let up = false;
    upstream.on('connect', () => {
      up = true;
      socket.pipe(upstream);
      upstream.pipe(socket);
      socket.resume();
    });
    upstream.on('error', () => (up ? socket.destroy() : badGateway(socket, port)));
    socket.on('close', () => upstream.destroy());
  }

  private relay(port: number, socket: Socket, cmd: SandboxCommand): void {
    const child = spawn(cmd.file, cmd.args, {
      cwd: '/',
      env: { PATH: SYSTEM_PATH },
      ...(cmd.uid !== undefined ? { uid: cmd.uid, gid: cmd.gid } : {}),
      detached: true,
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    this.relays.add(child);
    let answered = false;
    child.stdin.on('error', () => undefined);
    socket.pipe(child.stdin);
    child.stdout.on('data', () => (answered = true));
    child.stdout.pipe(socket, { end: false });
    socket.resume();
    let finished = false;
    const finish = (code: number | null) => {
      if (finished) return;
      finished = true;
      this.relays.delete(child);
      if (code === NOT_LISTENING && !answered) badGateway(socket, port);
      else socket.end();
    };
    child.on('error', () => finish(null));
    child.on('close', finish);
    socket.on('close', () => kill(child));
  }
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      resolve((server.address() as { port: number }).port);
    });
  });
}

function kill(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}
