/**
 * `npm run bench:jobs`: this project's MySQL backend for Agenda beside the official
 * @agendajs/postgres-backend on this machine's PostgreSQL, same Agenda version and settings.
 *
 *  - throughput: a producer process that does not process enqueues N no-op jobs; 1 or 4 worker
 *    processes run them; jobs/s = N / (last completion − first enqueue).
 *  - pickup latency: one process that enqueues and processes; now() → handler start, sequentially.
 *
 * Env: BENCH_JOBS (default 2000), BENCH_LATENCY_SAMPLES (300), DATABASE_URL base for MySQL
 * (default mysql://root@127.0.0.1:3306/), BENCH_PG_URL base for PostgreSQL
 * (default postgres://postgres@127.0.0.1:5432/). Throwaway databases are created and dropped.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Agenda } from 'agenda';
import { PostgresBackend } from '@agendajs/postgres-backend';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../src/db/data-source.js';
import { entities } from '../src/entities.js';
import { createAgenda, startAgendaProcessing } from '../src/jobs/agenda.js';
import { createLogger } from '../src/logger.js';
import { endChild, exitWithParent, ownChild, runBench } from './processes.js';

type Kind = 'mysql' | 'postgres';

const JOBS = Number(process.env.BENCH_JOBS ?? 2000);
const SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 300);
const MYSQL_BASE = process.env.DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/';
const PG_BASE = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/';
/** The same Agenda settings on both sides. */
const SETTINGS = { processEvery: 100, defaultConcurrency: 20, maxConcurrency: 50 };
const SELF = fileURLToPath(import.meta.url);

function withDb(base: string, name: string): string {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

/** One side of the comparison: a database, an Agenda factory, and a completed-jobs counter. */
interface Side {
  kind: Kind;
  url: string;
  agenda(opts: { processEvery?: number }): Promise<{ agenda: Agenda; enqueue(name: string, data: object): Promise<unknown>; start(): Promise<void>; close(): Promise<void> }>;
  completed(): Promise<number>;
  reset(): Promise<void>;
  drop(): Promise<void>;
}

async function mysqlSide(url?: string): Promise<Side> {
  const owned = !url;
  url ??= withDb(MYSQL_BASE, `gpu_rental_bench_${randomBytes(4).toString('hex')}`);
  await createDatabaseIfMissing(url);
  const ds: DataSource = createDataSource(url, 20, entities);
  await ds.initialize();
  if (owned) await migrate(ds);
  return {
    kind: 'mysql',
    url,
    async agenda({ processEvery }) {
      const { agenda, queue } = createAgenda(ds, { jobsProcessEveryMs: processEvery ?? SETTINGS.processEvery, jobsClaim: 'skip-locked' }, { maxConcurrency: SETTINGS.maxConcurrency });
      let worker: Awaited<ReturnType<typeof startAgendaProcessing>> | undefined;
      return {
        agenda,
        enqueue: (name, data) => queue.now(name, data),
        async start() {
          worker = await startAgendaProcessing(queue, createLogger('silent'));
        },
        async close() {
          await worker?.stop({ timeoutMs: 5000 });
        },
      };
    },
    async completed() {
      const [r] = await ds.query('SELECT COUNT(*) AS n FROM agenda_jobs WHERE last_finished_at IS NOT NULL');
      return Number(r.n);
    },
    async reset() {
      await ds.query('DELETE FROM agenda_jobs');
    },
    async drop() {
      await ds.destroy();
      if (owned) await dropDatabase(url!);
    },
  };
}

async function postgresSide(url?: string): Promise<Side> {
  const owned = !url;
  const name = `agenda_bench_${randomBytes(4).toString('hex')}`;
  if (!url) {
    const admin = new pg.Client({ connectionString: withDb(PG_BASE, 'postgres') });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    url = withDb(PG_BASE, name);
  }
  const pool = new pg.Pool({ connectionString: url, max: 20 });
  // The LISTEN client may still be open when the database is force-dropped at the end.
  pool.on('error', () => undefined);
  // The schema is created once, by the parent; worker processes creating it at the same moment
  // race in PostgreSQL's catalog ("tuple concurrently updated").
  if (owned) await new PostgresBackend({ pool }).connect();
  return {
    kind: 'postgres',
    url,
    async agenda({ processEvery }) {
      const backend = new PostgresBackend({ pool, ensureSchema: false });
      // Its LISTEN connection is cut when the database is force-dropped at the end of the run.
      (backend.notificationChannel as unknown as { on?(event: 'error', fn: () => void): void } | undefined)?.on?.('error', () => undefined);
      const agenda = new Agenda({
        backend,
        processEvery: processEvery ?? SETTINGS.processEvery,
        defaultConcurrency: SETTINGS.defaultConcurrency,
        maxConcurrency: SETTINGS.maxConcurrency,
      });
      await agenda.ready;
      return {
        agenda,
        enqueue: (n, data) => agenda.now(n, data),
        start: () => agenda.start(),
        async close() {
          await agenda.drain({ timeout: 5000, closeConnection: false });
        },
      };
    },
    async completed() {
      const r = await pool.query('SELECT COUNT(*)::int AS n FROM agenda_jobs WHERE last_finished_at IS NOT NULL');
      return r.rows[0].n;
    },
    async reset() {
      await pool.query('DELETE FROM agenda_jobs');
    },
    async drop() {
      await pool.end();
      if (owned) {
        const admin = new pg.Client({ connectionString: withDb(PG_BASE, 'postgres') });
        await admin.connect();
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.end();
      }
    },
  };
}

/** Child process: a worker that runs `bench.noop` until SIGTERM, or until its parent is gone. */
async function child(kind: Kind, url: string): Promise<void> {
  exitWithParent();
  const side = kind === 'mysql' ? await mysqlSide(url) : await postgresSide(url);
  const a = await side.agenda({});
  a.agenda.define('bench.noop', async () => undefined, { concurrency: SETTINGS.defaultConcurrency });
  await a.start();
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => {
    void a.close().then(() => process.exit(0));
  });
}

async function throughput(side: Side, workers: number, jobs = JOBS): Promise<number> {
  await side.reset();
  const procs = Array.from({ length: workers }, () =>
    ownChild(fork(SELF, ['--child', side.kind, side.url], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })),
  );
  await Promise.all(procs.map(ready));
  const producer = await side.agenda({});
  // The PostgreSQL backend only NOTIFYs from a started Agenda; starting one without definitions
  // gives it that advantage. The MySQL producer, like the api role, is never started.
  if (side.kind === 'postgres') await producer.start();
  const t0 = performance.now();
  const batch = 50;
  for (let i = 0; i < jobs; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, jobs - i) }, () => producer.enqueue('bench.noop', {})));
  }
  const deadline = Date.now() + 180_000;
  while ((await side.completed()) < jobs) {
    if (Date.now() > deadline) throw new Error(`${side.kind}: jobs did not complete`);
    await new Promise((r) => setTimeout(r, 10));
  }
  const seconds = (performance.now() - t0) / 1000;
  await producer.close();
  await Promise.all(procs.map((p) => endChild(p)));
  return jobs / seconds;
}

/** Resolves when the worker process prints "ready"; rejects when it exits first. */
function ready(p: ChildProcess): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let out = '';
    p.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('ready')) resolve();
    });
    p.once('exit', (code, sig) => reject(new Error(`bench worker exited before it was ready (${sig ?? code})`)));
  });
}

async function latency(side: Side): Promise<{ p50: number; p99: number }> {
  await side.reset();
  // The service default poll (1 s): pickup must come from the notification channel, not polling.
  const a = await side.agenda({ processEvery: 1000 });
  let started: ((t: number) => void) | undefined;
  a.agenda.define('bench.latency', async () => {
    started?.(performance.now());
  });
  await a.start();
  await new Promise((r) => setTimeout(r, 300));
  const samples: number[] = [];
  for (let i = 0; i < SAMPLES + 10; i++) {
    const ran = new Promise<number>((resolve) => (started = resolve));
    const t0 = performance.now();
    await a.enqueue('bench.latency', { i });
    const t1 = await ran;
    if (i >= 10) samples.push(t1 - t0); // the first few warm pools and JIT
    await new Promise((r) => setTimeout(r, 2));
  }
  await a.close();
  samples.sort((x, y) => x - y);
  const q = (p: number) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))];
  return { p50: q(0.5), p99: q(0.99) };
}

async function main(): Promise<void> {
  const sides = [await mysqlSide(), await postgresSide()];
  const results: Record<Kind, { t1: number; t4: number; p50: number; p99: number }> = {} as never;
  try {
    for (const side of sides) {
      await throughput(side, 1, 200); // warm-up: pools, JIT, buffer pool; not reported
      const t1 = await throughput(side, 1);
      const t4 = await throughput(side, 4);
      const lat = await latency(side);
      results[side.kind] = { t1, t4, ...lat };
    }
  } finally {
    for (const side of sides) await side.drop().catch((err) => console.error(`dropping the ${side.kind} bench database:`, err.message));
  }
  const f = (n: number, d = 0) => n.toFixed(d).padStart(10);
  console.log(`Agenda 6.2.6, ${JOBS} no-op jobs per throughput run, ${SAMPLES} latency samples`);
  console.log(`settings: processEvery ${SETTINGS.processEvery} ms, concurrency ${SETTINGS.defaultConcurrency}/name, maxConcurrency ${SETTINGS.maxConcurrency}; producer in its own process`);
  console.log(`${'backend'.padEnd(22)}${'1 worker/s'.padStart(10)}${'4 workers/s'.padStart(12)}${'p50 ms'.padStart(10)}${'p99 ms'.padStart(10)}`);
  for (const [kind, label] of [['mysql', 'MySQL (this project)'], ['postgres', '@agendajs/postgres']] as const) {
    const r = results[kind];
    console.log(`${label.padEnd(22)}${f(r.t1)}${f(r.t4).padStart(12)}${f(r.p50, 2)}${f(r.p99, 2)}`);
  }
}

const childAt = process.argv.indexOf('--child');
if (childAt >= 0) {
  child(process.argv[childAt + 1] as Kind, process.argv[childAt + 2]).catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  runBench(main);
}
