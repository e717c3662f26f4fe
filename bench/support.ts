/*
 * What the rental and metering benchmarks share: a throwaway database with the in-process app on
 * it, funded bench clients, the admission load phase, a statement and deadlock counter on
 * TypeORM's MySQL query runner, and min/median/max over repetitions.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2';
import { createApp } from '../src/app.js';
import { runLoad } from './admission-load.js';
import type { Client, FloorMessage, FloorRequest, ServiceMessage, ServiceRequest } from './bench-types.js';
import { exited, ownChild, productionNodeFlags } from './processes.js';
import { systemClock, type Clock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { createServices, type Services } from '../src/container.js';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../src/db/data-source.js';
import { entities } from '../src/entities.js';
import { createLogger } from '../src/logger.js';
import { Account } from '../src/modules/accounts/account.entity.js';
import { Offer } from '../src/modules/inventory/offer.entity.js';
import { createProviderRegistry, type ProviderRegistry } from '../src/providers/provider-registry.js';

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** `min / median / max` of repeated measurements, with `digits` decimals and a unit. */
export function spread(values: number[], digits = 1, unit = ''): string {
  const s = [...values].sort((a, b) => a - b);
  const f = (n: number) => `${n.toFixed(digits)}${unit}`;
  return `${f(s[0])} / ${f(s[Math.floor((s.length - 1) / 2)])} / ${f(s[s.length - 1])}`;
}

/**
 * Statements and deadlocks seen by every mysql2 connection of this process: TypeORM's query
 * runners and the plain-mysql2 hot paths (src/db/sql.ts) both end in `Connection#query`.
 */
export const queryCounter = { statements: 0, requests: 0, deadlocks: 0 };
type QueryCallback = (err: { code?: string } | null, ...rest: unknown[]) => void;
const originalQuery = mysql.Connection.prototype.query as (...args: unknown[]) => unknown;
mysql.Connection.prototype.query = function (this: mysql.Connection, ...args: unknown[]) {
  // SqlTransaction sends a batch as one request, its statements joined by `;\n` (mysql2 escapes a
  // newline inside a value, so the separator only ever stands between statements).
  const sql = typeof args[0] === 'string' ? args[0] : ((args[0] as { sql?: string })?.sql ?? '');
  queryCounter.requests++;
  queryCounter.statements += 1 + (sql.match(/;\n/g)?.length ?? 0);
  const last = args.length - 1;
  if (typeof args[last] === 'function') {
    const callback = args[last] as QueryCallback;
    args[last] = (err: { code?: string } | null, ...rest: unknown[]) => {
      if (err?.code === 'ER_LOCK_DEADLOCK') queryCounter.deadlocks++;
      callback(err, ...rest);
    };
  }
  return originalQuery.apply(this, args);
} as typeof mysql.Connection.prototype.query;

/**
 * CPU time (ms) the local MariaDB or MySQL server has used so far, or null when it is not a
 * process of this machine: with the server on the same cores, CPU per admission on both sides
 * says where the time goes. The server is the one listening on the bench database's port (other
 * servers may run beside it: tests start private ones).
 */
export function databaseCpuMs(): number | null {
  const pid = databasePid();
  if (pid === null) return null;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime and stime, fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

let serverPid: string | null | undefined;

/** The pid of the mariadbd or mysqld process listening on BENCH_DATABASE_URL's TCP port, or null. */
function databasePid(): string | null {
  if (serverPid !== undefined) return serverPid;
  serverPid = null;
  try {
    const port = Number(new URL(process.env.BENCH_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/').port || 3306);
    const hexPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
    const listening = new Set<string>();
    for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
      for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
        const f = line.trim().split(/\s+/);
        // local address, state 0A (LISTEN), inode
        if (f[1]?.endsWith(hexPort) && f[3] === '0A') listening.add(`socket:[${f[9]}]`);
      }
    }
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        if (!/^(mariadbd|mysqld)$/.test(readFileSync(`/proc/${pid}/comm`, 'utf8').trim())) continue;
        if (
          readdirSync(`/proc/${pid}/fd`).some((fd) =>
            listening.has(readlinkSync(`/proc/${pid}/fd/${fd}`, { encoding: 'utf8' })),
          )
        )
          return (serverPid = pid);
      } catch {
        // The process ended while we looked, or its descriptors are not ours to read.
      }
    }
  } catch {
    // Not Linux's /proc.
  }
  return serverPid;
}

export interface BenchApp {
  databaseUrl: string;
  /** The local provider's inventory file, for another service process on the same database. */
  inventoryPath: string;
  services: Services;
  providers: ProviderRegistry;
  base: string;
  offer: Offer;
  close(): Promise<void>;
}

/** A fresh database with the local provider's three H100 offers and the app listening on a free port. */
export async function startBenchApp(opts: { clock?: Clock; poolSize?: number } = {}): Promise<BenchApp> {
  const server = new URL(process.env.BENCH_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/');
  server.pathname = `/gpu_rental_bench_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  const databaseUrl = server.toString();
  const dir = mkdtempSync(join(tmpdir(), 'gpu-rental-bench-'));
  const inventoryPath = join(dir, 'inventory.json');
  const h100 = {
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  };
  writeFileSync(
    inventoryPath,
    JSON.stringify({
      offers: [
        { ...h100, key: 'h100-a', pricePerHourMinor: 300 },
        { ...h100, key: 'h100-b', pricePerHourMinor: 350 },
        { ...h100, key: 'h100-c', pricePerHourMinor: 400 },
      ],
    }),
  );
  await createDatabaseIfMissing(databaseUrl);
  const served = await serveBenchApp(databaseUrl, inventoryPath, { ...opts, migrate: true });
  await served.services.inventory.refresh();
  served.services.inventory.invalidate();
  const [offer] = await served.services.ds.getRepository(Offer).find({ order: { pricePerHourMinor: 'ASC' }, take: 1 });
  return {
    ...served,
    databaseUrl,
    inventoryPath,
    offer,
    async close() {
      await served.close();
      await dropDatabase(databaseUrl);
    },
  };
}

/** The service as a bench runs it, listening on a free port of 127.0.0.1, on a database that exists. */
export interface ServedApp {
  services: Services;
  providers: ProviderRegistry;
  base: string;
  close(): Promise<void>;
}

/**
 * The service's API on an existing bench database (migrated here when `migrate` is set), with the
 * local provider reading `inventoryPath`: what startBenchApp runs in the bench's own process, and
 * what a forked service process (bench/service-process.ts) runs in its own.
 */
export async function serveBenchApp(
  databaseUrl: string,
  inventoryPath: string,
  opts: { clock?: Clock; poolSize?: number; migrate?: boolean } = {},
): Promise<ServedApp> {
  const ds = createDataSource(databaseUrl, opts.poolSize ?? 40, entities);
  await ds.initialize();
  if (opts.migrate) await migrate(ds);
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'silent',
    LOCAL_PROVIDER_INVENTORY: inventoryPath,
    SIGNUP_RATE_PER_MINUTE: '1000000',
    SIGNUP_RATE_PER_ADDRESS_PER_MINUTE: '1000000',
    JOBS_PROCESS_EVERY_MS: '50',
  });
  const clock = opts.clock ?? systemClock;
  const logger = createLogger(config.logLevel);
  const providers = await createProviderRegistry(config.providers, {
    logger,
    clock,
    dataSource: ds,
    production: false,
    labelPrefix: 'gpb-',
  });
  const services: Services = createServices({ config, ds, clock, logger, providers });
  const http = createApp(services).listen(0, '127.0.0.1');
  await new Promise((r) => http.once('listening', r));
  return {
    services,
    providers,
    base: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    async close() {
      http.close();
      await providers.close();
      await ds.destroy();
    },
  };
}

/** The service in a process of its own (bench/service-process.ts), on a bench app's database. */
export interface ServiceProcess {
  base: string;
  pid: number;
  /** Its CPU time so far (every thread of the process), and the SQL it has sent. */
  stats(): Promise<{ cpuMs: number; systemMs: number; statements: number; requests: number; deadlocks: number }>;
  /** Starts a V8 CPU profile of the process, sampling every `intervalUs` microseconds. */
  startProfile(intervalUs?: number): Promise<void>;
  /** Stops the profile and writes it to `path` (a .cpuprofile for Chrome DevTools or speedscope). */
  stopProfile(path: string): Promise<void>;
  close(): Promise<void>;
}

/** A bench child process spoken to over IPC: messages tagged by `type`, each request answered by one message. */
interface IpcChild<Req, Msg extends { type: string }> {
  child: ChildProcess;
  /** The next message of `type`; rejects if the child exits first. */
  next<T extends Msg['type']>(type: T): Promise<Extract<Msg, { type: T }>>;
  /** Sends `request` and waits for the answer of `type`. */
  ask<T extends Msg['type']>(request: Req, type: T): Promise<Extract<Msg, { type: T }>>;
  /** Asks the child to close (if it still runs) and waits for it to exit. */
  close(request: Req, type: Msg['type']): Promise<void>;
}

/** Forks the bench file `name` (run by tsx, with the service's production node flags) and speaks to it over IPC. */
function forkBenchChild<Req, Msg extends { type: string }>(
  name: string,
  args: string[],
  what: string,
): IpcChild<Req, Msg> {
  const file = fileURLToPath(new URL(name, import.meta.url));
  const child = ownChild(
    fork(file, args, {
      execArgv: [...productionNodeFlags(), '--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  const next = <T extends Msg['type']>(type: T) =>
    new Promise<Extract<Msg, { type: T }>>((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`the ${what} process exited with ${code} while the bench waited for ${type}`));
      child.once('exit', onExit);
      const onMessage = (m: Msg) => {
        if (m.type !== type) return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(m as Extract<Msg, { type: T }>);
      };
      child.on('message', onMessage);
    });
  const ask = <T extends Msg['type']>(request: Req, type: T) => {
    const answer = next(type);
    child.send(request as object);
    return answer;
  };
  return {
    child,
    next,
    ask,
    async close(request, type) {
      if (child.exitCode === null) await ask(request, type);
      await exited(child);
    },
  };
}

/** CPU times (µs) as a child reports them, in ms. */
const cpuMsOf = (s: { userUs: number; systemUs: number }) => ({
  cpuMs: (s.userUs + s.systemUs) / 1000,
  systemMs: s.systemUs / 1000,
});

/**
 * Forks a service process serving the API on `app`'s database: its CPU is then the service's
 * alone, apart from the bench's own process and its load thread. It reads the offers the bench
 * app has cached.
 */
export async function startServiceProcess(app: BenchApp): Promise<ServiceProcess> {
  const p = forkBenchChild<ServiceRequest, ServiceMessage>(
    './service-process.ts',
    [app.databaseUrl, app.inventoryPath],
    'service',
  );
  const { base } = await p.next('ready');
  return {
    base,
    pid: p.child.pid!,
    async stats() {
      const s = await p.ask({ type: 'stats' }, 'stats');
      return { ...cpuMsOf(s), statements: s.statements, requests: s.requests, deadlocks: s.deadlocks };
    },
    async startProfile(intervalUs = 500) {
      await p.ask({ type: 'profile-start', intervalUs }, 'profile-started');
    },
    async stopProfile(path: string) {
      await p.ask({ type: 'profile-stop', path }, 'profile-stopped');
    },
    close: () => p.close({ type: 'close' }, 'closed'),
  };
}

/** Bare Express serving the raw admission (bench/express-floor-process.ts), in a process of its own. */
export interface FloorProcess {
  base: string;
  /** The clients it will serve (looked up by Authorization), the offer, and the answer body with `__RENTAL_ID__` for the rental's id. */
  serve(clients: Client[], offer: Offer, answer: string): Promise<void>;
  /** Its CPU time so far, every thread of the process. */
  stats(): Promise<{ cpuMs: number; systemMs: number }>;
  close(): Promise<void>;
}

/** Forks the Express floor process on `app`'s database, with the service's pool size and node flags. */
export async function startFloorProcess(app: BenchApp, poolSize = 40): Promise<FloorProcess> {
  const p = forkBenchChild<FloorRequest, FloorMessage>(
    './express-floor-process.ts',
    [app.databaseUrl, String(poolSize)],
    'floor',
  );
  const { base } = await p.next('ready');
  return {
    base,
    async serve(clients, offer, answer) {
      await p.ask({ type: 'clients', clients, offer, answer }, 'clients-set');
    },
    stats: async () => cpuMsOf(await p.ask({ type: 'stats' }, 'stats')),
    close: () => p.close({ type: 'close' }, 'closed'),
  };
}

/** `count` accounts signed up through the API, each funded and given an agent key with room to spare. */
export async function makeClients(
  app: BenchApp,
  count: number,
  billingModel: 'ACCOUNT_BALANCE' | 'LEGACY_PREPAID',
): Promise<Client[]> {
  const { services, base } = app;
  return Promise.all(
    Array.from({ length: count }, async () => {
      const res = await fetch(`${base}/api/v1/signup`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() },
        body: '{}',
      });
      const { data } = (await res.json()) as { data: { account: { user: { id: string } } } };
      const accountId = data.account.user.id;
      await services.ds.getRepository(Account).update({ id: accountId }, { billingModel });
      const { key, token } = await services.store.transaction(async (r) => {
        await services.ledger.post(r, {
          accountId,
          kind: 'TOPUP',
          amountMinor: 100_000_000,
          externalRef: `bench:${accountId}`,
          description: 'bench credit',
        });
        return services.keys.create(r.accounts, {
          accountId,
          kind: 'AGENT',
          name: 'bench',
          scopes: ['read', 'rent', 'manage'],
          origin: 'bench',
          maxPerRentalMinor: 1_000_000,
          budgetLimitMinor: 100_000_000,
          maxConcurrentDeployments: 100_000,
        });
      });
      return { auth: `Bearer ${token}`, accountId, keyId: key.id };
    }),
  );
}

export interface PhaseResult {
  admitted: number;
  requests: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  failures: Record<string, number>;
}

/**
 * Each client sends `perClient` admissions of `body` one after another, all clients at once,
 * from a worker thread (admission-load.ts), so the server's event loop carries only the server;
 * with `rate`, at that many requests per second in all (open loop) instead of as fast as answered.
 */
export async function admissionPhase(
  base: string,
  clients: Client[],
  body: object,
  perClient: number,
  rate?: number,
): Promise<PhaseResult> {
  const r = await runLoad({ base, auths: clients.map((c) => c.auth), perClient, body, rate });
  return summarize(r.latencies, r.failures, r.seconds);
}

/** Runs `one` (null on success, else a failure label) `perClient` times per client, clients in parallel. */
export async function loadPhase<C>(
  clients: C[],
  perClient: number,
  one: (c: C) => Promise<string | null>,
): Promise<PhaseResult> {
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  const started = performance.now();
  await Promise.all(
    clients.map(async (c) => {
      for (let i = 0; i < perClient; i++) {
        const t0 = performance.now();
        const failed = await one(c);
        latencies.push(performance.now() - t0);
        if (failed) failures[failed] = (failures[failed] ?? 0) + 1;
      }
    }),
  );
  return summarize(latencies, failures, (performance.now() - started) / 1000);
}

function summarize(latencies: number[], failures: Record<string, number>, seconds: number): PhaseResult {
  latencies.sort((a, b) => a - b);
  const admitted = latencies.length - Object.values(failures).reduce((a, b) => a + b, 0);
  return {
    admitted,
    requests: latencies.length,
    seconds,
    perSecond: admitted / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    failures,
  };
}

export function describePhase(name: string, r: PhaseResult): string {
  const failed = Object.keys(r.failures).length ? `; failures ${JSON.stringify(r.failures)}` : '';
  return `  ${name}: ${r.admitted}/${r.requests} in ${r.seconds.toFixed(2)} s = ${r.perSecond.toFixed(0)}/s; p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${failed}`;
}
