/*
 * What the rental and metering benchmarks share: a throwaway database with the in-process app on
 * it, funded bench clients, the admission load phase, a statement and deadlock counter on
 * TypeORM's MySQL query runner, and min/median/max over repetitions.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2';
import { createApp } from '../src/app.js';
import { runLoad } from './admission-load.js';
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
 * says where the time goes.
 */
export function databaseCpuMs(): number | null {
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!/^(mariadbd|mysqld)$/.test(readFileSync(`/proc/${pid}/comm`, 'utf8').trim())) continue;
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      // utime and stime, fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
      return (Number(fields[11]) + Number(fields[12])) * 10;
    } catch {
      // The process ended while we looked, or /proc is not Linux's.
    }
  }
  return null;
}

export interface BenchApp {
  databaseUrl: string;
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
  const h100 = { name: 'NVIDIA H100 SXM', category: 'datacenter', vramGb: 80, gpuCount: 1, maximumDurationSeconds: 86400, provisionSeconds: 0 };
  writeFileSync(
    inventoryPath,
    JSON.stringify({ offers: [{ ...h100, key: 'h100-a', pricePerHourMinor: 300 }, { ...h100, key: 'h100-b', pricePerHourMinor: 350 }, { ...h100, key: 'h100-c', pricePerHourMinor: 400 }] }),
  );
  await createDatabaseIfMissing(databaseUrl);
  const ds = createDataSource(databaseUrl, opts.poolSize ?? 40, entities);
  await ds.initialize();
  await migrate(ds);
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
  const providers = await createProviderRegistry(config.providers, { logger, clock, dataSource: ds, production: false, labelPrefix: 'gpb-' });
  const services: Services = createServices({ config, ds, clock, logger, providers });
  await services.inventory.refresh();
  services.inventory.invalidate();
  const http = createApp(services).listen(0, '127.0.0.1');
  await new Promise((r) => http.once('listening', r));
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const [offer] = await ds.getRepository(Offer).find({ order: { pricePerHourMinor: 'ASC' }, take: 1 });
  return {
    databaseUrl,
    services,
    providers,
    base,
    offer,
    async close() {
      http.close();
      await providers.close();
      await ds.destroy();
      await dropDatabase(databaseUrl);
    },
  };
}

export interface Client {
  auth: string;
  accountId: string;
  keyId: string;
}

/** `count` accounts signed up through the API, each funded and given an agent key with room to spare. */
export async function makeClients(app: BenchApp, count: number, billingModel: 'ACCOUNT_BALANCE' | 'LEGACY_PREPAID'): Promise<Client[]> {
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
      const { key, token } = await services.ds.transaction(async (m) => {
        await services.ledger.post(m, { accountId, kind: 'TOPUP', amountMinor: 100_000_000, externalRef: `bench:${accountId}`, description: 'bench credit' });
        return services.keys.create(m, {
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
export async function admissionPhase(base: string, clients: Client[], body: object, perClient: number, rate?: number): Promise<PhaseResult> {
  const r = await runLoad({ base, auths: clients.map((c) => c.auth), perClient, body, rate });
  return summarize(r.latencies, r.failures, r.seconds);
}

/** Runs `one` (null on success, else a failure label) `perClient` times per client, clients in parallel. */
export async function loadPhase<C>(clients: C[], perClient: number, one: (c: C) => Promise<string | null>): Promise<PhaseResult> {
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
  return { admitted, requests: latencies.length, seconds, perSecond: admitted / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), failures };
}

export function describePhase(name: string, r: PhaseResult): string {
  const failed = Object.keys(r.failures).length ? `; failures ${JSON.stringify(r.failures)}` : '';
  return `  ${name}: ${r.admitted}/${r.requests} in ${r.seconds.toFixed(2)} s = ${r.perSecond.toFixed(0)}/s; p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${failed}`;
}
