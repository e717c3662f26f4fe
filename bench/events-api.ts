/*
 * The processes of bench/events.ts: the api role as production runs it (dist/src/main.js, NODE_ENV
 * production, the production node flags) with a probe preloaded that counts its statements and
 * open long-lived requests and reports its memory, and the load process; both spoken to over IPC,
 * both under an open-file limit raised as far as this machine lets a process go.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
// @ts-expect-error plain ESM script without types
import { buildIsFresh } from '../scripts/freshness.mjs';
import type { ProbeRequest, ProbeStats } from './events-types.js';
import { endChild, ownChild, productionNodeFlags } from './processes.js';

const ROOT = resolve(import.meta.dirname, '..');

/**
 * Preloaded into the api process (`--import data:...`), so nothing of the bench is in its code:
 * counts the statements of every mysql2 connection (as support.ts's queryCounter does in the
 * bench's own process; a batch joined by `;\n` counts each statement) by their first words, with
 * the counts as they stood at the hub's last read of the tail (so a window can span whole ticks), the
 * event streams and waiting reads received, and those not yet closed, the event-loop delay, and answers
 * `{ type: 'probe' }` with them and process.memoryUsage(). It exits when the bench goes.
 */
const PROBE = `
import { createRequire } from 'node:module';
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
const mysql = createRequire(${JSON.stringify(join(ROOT, 'package.json'))})('mysql2');
let statements = 0;
const byKind = {};
let mark = { tails: 0, statements: 0, byKind: {} };
const query = mysql.Connection.prototype.query;
mysql.Connection.prototype.query = function (...args) {
  const sql = typeof args[0] === 'string' ? args[0] : (args[0]?.sql ?? '');
  for (const one of sql.split(';\\n')) {
    const kind = one.replace(/\\s+/g, ' ').trim().slice(0, 56);
    if (kind.startsWith('SELECT * FROM events WHERE id > ')) {
      mark = { tails: mark.tails + 1, statements, byKind: { ...byKind } };
    }
    statements++;
    byKind[kind] = (byKind[kind] ?? 0) + 1;
  }
  return query.apply(this, args);
};
const inflight = { streams: 0, waits: 0 };
const received = { streams: 0, waits: 0 };
const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (event, req, res) {
  if (event === 'request') {
    const url = req.url ?? '';
    const kind = url.includes('waitFor=') ? 'waits'
      : url.startsWith('/api/v1/events') && String(req.headers.accept).includes('text/event-stream') ? 'streams' : null;
    if (kind) {
      received[kind]++;
      inflight[kind]++;
      res.once('close', () => inflight[kind]--);
    }
  }
  return emit.apply(this, arguments);
};
const loop = monitorEventLoopDelay({ resolution: 5 });
loop.enable();
process.once('disconnect', () => process.exit(1));
process.channel?.unref();
process.on('message', (m) => {
  if (m?.type !== 'probe') return;
  if (m.gc) globalThis.gc?.();
  const ms = (ns) => ns / 1e6;
  process.send({
    type: 'probe-stats', memory: process.memoryUsage(), statements, byKind: { ...byKind }, mark, inflight: { ...inflight }, received: { ...received },
    loop: { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max) },
  });
  if (m.resetLoop) loop.reset();
});
`;

/** A child spoken to over IPC: messages tagged by `type`, each request answered by one message. */
export interface Ipc<Req, Msg extends { type: string }> {
  child: ChildProcess;
  next<T extends Msg['type']>(type: T): Promise<Extract<Msg, { type: T }>>;
  ask<T extends Msg['type']>(request: Req, type: T): Promise<Extract<Msg, { type: T }>>;
}

function ipcOf<Req, Msg extends { type: string }>(child: ChildProcess, what: string): Ipc<Req, Msg> {
  const next = <T extends Msg['type']>(type: T) =>
    new Promise<Extract<Msg, { type: T }>>((resolve, reject) => {
      const onExit = (code: number | null, sig: string | null) =>
        reject(new Error(`the ${what} process exited (${code ?? sig}) while the bench waited for ${type}`));
      const onMessage = (m: Msg) => {
        if (m.type !== type) return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(m as Extract<Msg, { type: T }>);
      };
      child.once('exit', onExit);
      child.on('message', onMessage);
    });
  return {
    child,
    next,
    ask(request, type) {
      const answer = next(type);
      return new Promise((resolve, reject) => {
        // A channel already closed (the child gone) fails the send, not the whole bench.
        child.send(request as object, (err) => err && reject(err));
        answer.then(resolve, reject);
      });
    },
  };
}

/** The soft and hard open-file limits of this process (RLIMIT_NOFILE; Node raises the soft one to the hard at start). */
export function fileLimits(): { soft: number; hard: number } {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)\s/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  const n = (s: string | undefined) => (s === undefined || s === 'unlimited' ? Number.POSITIVE_INFINITY : Number(s));
  return { soft: n(m?.[1]), hard: n(m?.[2]) };
}

/**
 * Whether a child may be started with `files` open files (soft and hard): null when it may
 * (through `prlimit`), else why not. Raising the hard limit takes CAP_SYS_RESOURCE.
 */
export function canRaiseFiles(files: number): string | null {
  const r = spawnSync('prlimit', [`--nofile=${files}:${files}`, 'true'], { encoding: 'utf8' });
  if (r.error) return `prlimit could not be run (${(r.error as NodeJS.ErrnoException).code})`;
  if (r.status !== 0) return `prlimit --nofile=${files}:${files}: ${r.stderr.trim().replace(/^prlimit: /, '')}`;
  return null;
}

/** Starts node with `args` under `files` open files when given (through prlimit), with an IPC channel. */
function spawnNode(args: string[], files: number | null, env: NodeJS.ProcessEnv, stdout: 'inherit' | 'ignore') {
  const [cmd, argv] =
    files === null
      ? [process.execPath, args]
      : ['prlimit', [`--nofile=${files}:${files}`, '--', process.execPath, ...args]];
  return ownChild(spawn(cmd, argv, { cwd: ROOT, env, stdio: ['ignore', stdout, 'inherit', 'ipc'] }));
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

/** Builds dist/ when a source is newer than it (as bench:http does): the api runs the compiled service. */
export function ensureBuilt(): void {
  if (buildIsFresh(ROOT)) return;
  console.error('bench: dist/ is older than the sources; building it (npm run build)');
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit', cwd: ROOT });
  if (r.status !== 0) throw new Error('the build failed');
}

/** The api role in a process of its own, with the probe's questions. */
export interface ApiProcess {
  base: string;
  pid: number;
  probe(request?: Omit<ProbeRequest, 'type'>): Promise<ProbeStats>;
  close(): Promise<void>;
}

/**
 * `node dist/src/main.js --role api` on `databaseUrl`, NODE_ENV=production, heartbeats and the tail
 * at their defaults, `push` as the PUSH_* variables, under `files` open files when given.
 */
export async function startApi(o: {
  databaseUrl: string;
  inventoryPath: string;
  push: Record<'PUSH_MAX_PER_KEY' | 'PUSH_MAX_PER_ADDRESS' | 'PUSH_MAX_OPEN', string>;
  files: number | null;
}): Promise<ApiProcess> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawnNode(
    [
      ...productionNodeFlags(),
      // BENCH_PROFILE=<dir>: a V8 CPU profile of each api process, written when it exits.
      ...(process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${resolve(process.env.BENCH_PROFILE)}`] : []),
      '--expose-gc',
      '--import',
      `data:text/javascript,${encodeURIComponent(PROBE)}`,
      join(ROOT, 'dist', 'src', 'main.js'),
      '--role',
      'api',
    ],
    o.files,
    {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      DATABASE_URL: o.databaseUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_BASE_URL: base,
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      SECRETS_KEY: randomBytes(32).toString('base64'),
      LOCAL_PROVIDER_INVENTORY: o.inventoryPath,
      LOCAL_PROVIDER_ALLOW_PRODUCTION: 'true',
      ...o.push,
    },
    'inherit',
  );
  const ipc = ipcOf<ProbeRequest, ProbeStats>(child, 'api');
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the api exited (${child.exitCode})`);
    const status = await new Promise<number>((r) =>
      request(`${base}/healthz`, (res) => (res.resume(), r(res.statusCode!)))
        .on('error', () => r(0))
        .end(),
    );
    if (status === 200) break;
    if (Date.now() > deadline) throw new Error('the api did not answer /healthz within 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    pid: child.pid!,
    probe: (request = {}) => ipc.ask({ type: 'probe', ...request }, 'probe-stats'),
    close: () => endChild(child),
  };
}

/** Starts the load process (bench/events-load.ts, run by tsx) under `files` open files when given. */
export async function startLoad<Req, Msg extends { type: string }>(files: number | null): Promise<Ipc<Req, Msg>> {
  const child = spawnNode(
    [...productionNodeFlags(), '--import', 'tsx', join(ROOT, 'bench', 'events-load.ts')],
    files,
    process.env,
    'inherit',
  );
  const ipc = ipcOf<Req, Msg>(child, 'load');
  await ipc.next('ready' as Msg['type']);
  return ipc;
}
