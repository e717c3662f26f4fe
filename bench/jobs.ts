/**
 * `npm run bench:jobs`: this project's MySQL backend for Agenda, in each JOBS_CLAIM mode, beside
 * the official @agendajs/postgres-backend on this machine's PostgreSQL, same Agenda version and
 * settings.
 *
 *  - throughput: a producer process that does not process enqueues N no-op jobs; 1 or 4 worker
 *    processes run them; jobs/s = N / (last completion − first enqueue).
 *  - pickup latency: one process that enqueues and processes; now() → handler start, sequentially.
 *
 * Every figure is min / median / max over BENCH_REPS repetitions, the backends taking turns within
 * each, and the last line divides the `update` medians by the `skip-locked` ones.
 *
 * Env: BENCH_JOBS (default 2000), BENCH_LATENCY_SAMPLES (300), BENCH_REPS (3), BENCH_JOBS_CLAIM
 * (the MySQL claim modes to run, default `skip-locked,update`), DATABASE_URL base for MySQL
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
import { JOB_CLAIM_MODES, type JobClaimMode } from '../src/config.js';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../src/db/data-source.js';
import { entities } from '../src/entities.js';
import { createAgenda, startAgendaProcessing } from '../src/jobs/agenda.js';
import { createLogger } from '../src/logger.js';
import { endChild, exitWithParent, ownChild, runBench } from './processes.js';
import { spread } from './support.js';

type Kind = 'mysql' | 'postgres';

const JOBS = Number(process.env.BENCH_JOBS ?? 2000);
const SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 300);
const REPS = Number(process.env.BENCH_REPS ?? 3);
const CLAIMS = (process.env.BENCH_JOBS_CLAIM ?? JOB_CLAIM_MODES.join(','))
  .split(',')
  .map((c) => c.trim())
  .filter(Boolean) as JobClaimMode[];
for (const c of CLAIMS)
  if (!JOB_CLAIM_MODES.includes(c))
    throw new Error(`BENCH_JOBS_CLAIM: "${c}" is not one of ${JOB_CLAIM_MODES.join(', ')}`);
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
  /** The MySQL claim mode; none for PostgreSQL. */
  claim?: JobClaimMode;
  label: string;
  url: string;
  agenda(opts: { processEvery?: number }): Promise<{
    agenda: Agenda;
    enqueue(name: string, data: object): Promise<unknown>;
    start(): Promise<void>;
    close(): Promise<void>;
  }>;
  completed(): Promise<number>;
  reset(): Promise<void>;
  drop(): Promise<void>;
}

async function mysqlSide(claim: JobClaimMode, url?: string): Promise<Side> {
  const owned = !url;
  url ??= withDb(MYSQL_BASE, `gpu_rental_bench_${randomBytes(4).toString('hex')}`);
  await createDatabaseIfMissing(url);
  const ds: DataSource = createDataSource(url, 20, entities);
  await ds.initialize();
  if (owned) await migrate(ds);
  return {
    kind: 'mysql',
    claim,
    label: `MySQL ${claim}`,
    url,
    async agenda({ processEvery }) {
      const { agenda, queue } = createAgenda(
        ds,
        { jobs: { processEveryMs: processEvery ?? SETTINGS.processEvery, claim } },
        { maxConcurrency: SETTINGS.maxConcurrency },
      );
      let worker: Awaited<ReturnType<typeof startAgendaProcessing>> | undefined;
      return {
        agenda,
        enqueue: (name, data) => queue.now(name, data),
        async start() {
          worker = await startAgendaProcessing(queue, createLogger(process.env.BENCH_LOG_LEVEL ?? 'silent'));
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
    label: '@agendajs/postgres',
    url,
    async agenda({ processEvery }) {
      const backend = new PostgresBackend({ pool, ensureSchema: false });
      // Its LISTEN connection is cut when the database is force-dropped at the end of the run.
      (backend.notificationChannel as unknown as { on?(event: 'error', fn: () => void): void } | undefined)?.on?.(
        'error',
        () => undefined,
      );
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
async function child(kind: Kind, url: string, claim: JobClaimMode): Promise<void> {
  exitWithParent();
  const side = kind === 'mysql' ? await mysqlSide(claim, url) : await postgresSide(url);
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
    ownChild(
      fork(SELF, ['--child', side.kind, side.url, side.claim ?? 'skip-locked'], {
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      }),
    ),
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
    if (Date.now() > deadline)
      throw new Error(`${side.label}: ${await side.completed()} of ${jobs} jobs completed in 180 s`);
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

type Figures = { t1: number[]; t4: number[]; p50: number[]; p99: number[] };

async function main(): Promise<void> {
  const sides: Side[] = [];
  const results = new Map<Side, Figures>();
  try {
    for (const claim of CLAIMS) sides.push(await mysqlSide(claim));
    sides.push(await postgresSide());
    for (const side of sides) {
      await throughput(side, 1, 200); // warm-up: pools, JIT, buffer pool; not reported
      results.set(side, { t1: [], t4: [], p50: [], p99: [] });
    }
    // The backends take turns within each repetition, so a slow spell of a noisy machine falls on all of them.
    for (let rep = 0; rep < REPS; rep++) {
      for (const side of sides) {
        const r = results.get(side)!;
        r.t1.push(await throughput(side, 1));
        r.t4.push(await throughput(side, 4));
        const lat = await latency(side);
        r.p50.push(lat.p50);
        r.p99.push(lat.p99);
      }
    }
  } finally {
    for (const side of sides)
      await side.drop().catch((err) => console.error(`dropping the ${side.label} bench database:`, err.message));
  }
  const cols: Array<[keyof Figures, string, number]> = [
    ['t1', '1 worker jobs/s', 0],
    ['t4', '4 workers jobs/s', 0],
    ['p50', 'pickup p50 ms', 2],
    ['p99', 'pickup p99 ms', 2],
  ];
  const width = 26;
  console.log(
    `Agenda 6.2.6, ${JOBS} no-op jobs per throughput run, ${SAMPLES} latency samples, ${REPS} repetitions (min / median / max)`,
  );
  console.log(
    `settings: processEvery ${SETTINGS.processEvery} ms, concurrency ${SETTINGS.defaultConcurrency}/name, maxConcurrency ${SETTINGS.maxConcurrency}; producer in its own process`,
  );
  console.log(`${'backend'.padEnd(22)}${cols.map(([, title]) => title.padStart(width)).join('')}`);
  for (const side of sides) {
    const r = results.get(side)!;
    console.log(
      `${side.label.padEnd(22)}${cols.map(([key, , digits]) => spread(r[key], digits).padStart(width)).join('')}`,
    );
  }
  const skip = sides.find((s) => s.claim === 'skip-locked');
  const upd = sides.find((s) => s.claim === 'update');
  if (skip && upd) {
    const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)];
    const ratio = (key: keyof Figures) => (median(results.get(upd)![key]) / median(results.get(skip)![key])).toFixed(2);
    console.log(
      `${'update / skip-locked'.padEnd(22)}${cols.map(([key]) => `${ratio(key)}x`.padStart(width)).join('')}`,
    );
  }
}

const childAt = process.argv.indexOf('--child');
if (childAt >= 0) {
  child(process.argv[childAt + 1] as Kind, process.argv[childAt + 2], process.argv[childAt + 3] as JobClaimMode).catch(
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
} else {
  runBench(main);
}
