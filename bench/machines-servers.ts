/*
 * The machines of bench/machines.ts: S SSH servers (ssh2's Server) on 127.0.0.1 in this process of
 * their own, so the handshakes' server half costs none of the worker's CPU. Each lets any public
 * key in and answers every command with its GPUs' utilisation, one line per GPU, exit 0: server i
 * answers idle GPUs when i is even, a busy one when odd. It counts TCP connections, logins
 * (authentications accepted), sessions and commands, and reports them over IPC when asked.
 *
 * As a stock sshd (ClientAliveInterval 0), they ping no client unless BENCH_CLIENT_ALIVE_S gives
 * an interval; they set TCP_NODELAY unless BENCH_NODELAY=0 (see where the sockets are made).
 *
 *   const servers = await startServers(8);   // forks this file with ['serve', '8']
 *   await servers.stats();                   // ServerStats
 */
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { UTILIZATION_COMMAND } from '../src/modules/rentals/lifecycle/idle.js';
import { generateDeploymentKeyPair, loadSsh2 } from '../src/providers/ssh-keys.js';
import { fingerprintOfKey } from '../src/providers/ssh-probe.js';
import { exitWithParent, ownChild } from './processes.js';

/** One server: where it listens, the fingerprint rentals pin, and whether its GPUs read idle. */
export interface MachineServer {
  port: number;
  hostKey: string;
  idle: boolean;
}

/** What the servers saw since they started (counters) or since the last report (`maxOpen`). */
export interface ServerStats {
  type: 'stats';
  connections: number;
  logins: number;
  sessions: number;
  commands: number;
  /** Commands other than the utilisation query. */
  otherCommands: number;
  /** TCP connections open now, and the most open at once since the last report. */
  open: number;
  maxOpen: number;
  /** This process's CPU so far (user + system), ms. */
  cpuMs: number;
}

export type ServersMessage = { type: 'ready'; servers: MachineServer[]; openFiles: string } | ServerStats;

/** This process's soft and hard limits on open files, as /proc says them. */
export function openFilesLimit(): string {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const [soft, hard] = line!
      .trim()
      .split(/\s{2,}/)
      .slice(1, 3);
    return `soft ${soft}, hard ${hard}`;
  } catch {
    return 'unknown (no /proc)';
  }
}

/** The server process, as the bench sees it: its machines, and their counters on request. */
export interface Servers {
  machines: MachineServer[];
  openFiles: string;
  stats(): Promise<ServerStats>;
}

/** Forks the server process with `count` servers and waits until they listen. */
export async function startServers(count: number): Promise<Servers> {
  const file = fileURLToPath(import.meta.url);
  const child = ownChild(fork(file, ['serve', String(count)], { execArgv: process.execArgv }));
  const next = <T extends ServersMessage['type']>(type: T) =>
    new Promise<Extract<ServersMessage, { type: T }>>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`the SSH server process exited with ${code}`));
      const onMessage = (m: ServersMessage) => {
        if (m.type !== type) return;
        child.off('message', onMessage).off('exit', onExit);
        resolve(m as Extract<ServersMessage, { type: T }>);
      };
      child.on('message', onMessage).once('exit', onExit);
    });
  const ready = await next('ready');
  return {
    machines: ready.servers,
    openFiles: ready.openFiles,
    stats() {
      const answer = next('stats');
      child.send({ type: 'stats' });
      return answer;
    },
  };
}

const stats: ServerStats = {
  type: 'stats',
  connections: 0,
  logins: 0,
  sessions: 0,
  commands: 0,
  otherCommands: 0,
  open: 0,
  maxOpen: 0,
  cpuMs: 0,
};

function start(index: number): Promise<{ server: Server; machine: MachineServer }> {
  const hostKey = generateDeploymentKeyPair(`bench-machine-${index}`).privateKey;
  const idle = index % 2 === 0;
  const answer = idle ? '0\n0\n' : '37\n0\n';
  const ssh = new (loadSsh2().Server)({ hostKeys: [hostKey] }, (client) => {
    client.on('error', () => undefined);
    client.on('authentication', (ctx) => (ctx.method === 'publickey' ? ctx.accept() : ctx.reject(['publickey'])));
    client.on('ready', () => {
      stats.logins++;
      client.on('session', (accept) => {
        stats.sessions++;
        const session = accept();
        session.on('exec', (acceptExec, _reject, info) => {
          stats.commands++;
          if (info.command !== UTILIZATION_COMMAND) stats.otherCommands++;
          const channel = acceptExec();
          channel.on('error', () => undefined);
          channel.write(answer);
          channel.exit(0);
          channel.end();
        });
      });
    });
  });
  // Our own listener, so connections are counted whatever ssh2 does with them.
  const server = createServer((socket) => {
    stats.connections++;
    stats.maxOpen = Math.max(stats.maxOpen, ++stats.open);
    socket.on('error', () => undefined);
    // Else each answer may wait out Nagle and the worker's delayed ACK (40 ms a time on loopback),
    // which stretches the rounds (and their wall time) without changing what the worker computes.
    if (process.env.BENCH_NODELAY !== '0') socket.setNoDelay(true);
    socket.once('close', () => stats.open--);
    ssh.injectSocket(socket);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () =>
      resolve({
        server,
        machine: { port: (server.address() as { port: number }).port, hostKey: fingerprintOfKey(hostKey), idle },
      }),
    );
  });
}

async function main(): Promise<void> {
  exitWithParent(0);
  // ssh2's server pings every client each 15 s unless told otherwise; sshd's ClientAliveInterval
  // is off unless a machine's image sets it. Each ping costs the worker a packet per connection it keeps.
  const aliveS = Number(process.env.BENCH_CLIENT_ALIVE_S ?? 0);
  (loadSsh2().Server as unknown as { KEEPALIVE_CLIENT_INTERVAL: number }).KEEPALIVE_CLIENT_INTERVAL =
    aliveS > 0 ? aliveS * 1000 : -1;
  const count = Number(process.argv[3] ?? 8);
  const started = await Promise.all(Array.from({ length: count }, (_, i) => start(i)));
  process.on('message', (msg: { type: string }) => {
    if (msg.type !== 'stats') return;
    const cpu = process.cpuUsage();
    process.send!({ ...stats, cpuMs: (cpu.user + cpu.system) / 1000 } satisfies ServerStats);
    stats.maxOpen = stats.open;
  });
  process.send!({
    type: 'ready',
    servers: started.map((s) => s.machine),
    openFiles: openFilesLimit(),
  } satisfies ServersMessage);
}

// Only as the forked child: bench/machines.ts imports this file for its types and openFilesLimit.
if (process.argv[2] === 'serve') {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
