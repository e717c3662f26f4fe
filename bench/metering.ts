/*
 * The metering sweep at scale: sweep time over 1k / 10k / 30k / 100k active metered rentals (seeded
 * with multi-row inserts, 10 per account, their starts spread over an hour so their rental-hours
 * end at different sweeps), each sweep charging every rental (the sweep's clock moves a minute
 * between sweeps), with the ledger rows written per rental-hour of usage charged, then the p99 of admissions (32 clients on their own funded accounts)
 * with no sweep running and while a worker process sweeps the 30k rentals back to back: once as
 * fast as the clients are answered (the machine saturated, where the sweeper's CPU shows) and
 * once at a fixed rate under capacity (where only locks could show), with InnoDB's row-lock
 * waits counted in each phase. Every figure is min / median / max over BENCH_REPS repetitions.
 *
 * Each size also prints the requests and statements per sweep and per chunk, node CPU per rental, and
 * at the end the linearity ratio (median µs per rental at the largest size ÷ at the smallest).
 *
 *   npm run bench:metering      # BENCH_SIZES=1000,10000,30000,100000 BENCH_REPS=3 BENCH_REQUESTS=30 BENCH_RATE=100
 *                               # BENCH_SWEEPS_ONLY=1 stops after the sweeps, without the admission phases
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Clock } from '../src/clock.js';
import { createDataSource } from '../src/db/data-source.js';
import { entities } from '../src/entities.js';
import { LedgerService } from '../src/modules/billing/ledger.service.js';
import { createStore } from '../src/repositories.js';
import { Metering } from '../src/modules/rentals/lifecycle/metering.js';
import { DEFAULT_TIMING, METER_BUDGET_SHARE } from '../src/modules/rentals/lifecycle/lifecycle-deps.js';
import { seedMeteredRentals } from '../test/helpers/metered-seed.js';
import { exited, exitWithParent, ownChild, runBench } from './processes.js';
import {
  admissionPhase,
  databaseCpuMs,
  describePhase,
  makeClients,
  queryCounter,
  spread,
  startBenchApp,
  type PhaseResult,
} from './support.js';

const SIZES = (process.env.BENCH_SIZES ?? '1000,10000,30000,100000').split(',').map(Number);
const REPS = Number(process.env.BENCH_REPS ?? 3);
const PER_CLIENT = Number(process.env.BENCH_REQUESTS ?? 30);
const PER_ACCOUNT = 10;
const CLIENTS = 32;
/** The paced phases' requests per second, well under what the service admits on this machine. */
const RATE = Number(process.env.BENCH_RATE ?? 100);

interface Phase extends PhaseResult {
  /** InnoDB row-lock waits during the phase (server-wide) and the time spent in them. */
  lockWaits: number;
  lockWaitMs: number;
}

async function rowLocks(ds: ReturnType<typeof createDataSource>): Promise<{ waits: number; ms: number }> {
  const rows: { Variable_name: string; Value: string }[] = await ds.query(
    `SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_%'`,
  );
  const v = (name: string) => Number(rows.find((r) => r.Variable_name === name)?.Value ?? 0);
  return { waits: v('Innodb_row_lock_waits'), ms: v('Innodb_row_lock_time') };
}

/** How far the sweep's clock moves between sweeps. */
const SWEEP_TICK_MS = 60_000;

/** A clock `offsetMs` ahead of the real one; each sweep moves it a minute on, so every rental owes usage. */
function sweepClock(offsetMs: number): Clock & { tick(): void } {
  let offset = offsetMs;
  return { now: () => new Date(Date.now() + offset), tick: () => void (offset += SWEEP_TICK_MS) };
}

/** The USAGE entries in the ledger, and the rental-seconds of usage charged so far. */
async function usageCharged(ds: ReturnType<typeof createDataSource>): Promise<{ rows: number; seconds: number }> {
  const [rows]: { n: string }[] = await ds.query(`SELECT COUNT(*) AS n FROM ledger_entries WHERE kind = 'USAGE'`);
  const [time]: { s: string | null }[] = await ds.query(
    `SELECT SUM(TIMESTAMPDIFF(SECOND, started_at, metered_until)) AS s FROM deployments`,
  );
  return { rows: Number(rows.n), seconds: Number(time.s ?? 0) };
}

/** The sweep as the worker runs it (limits never trip here: every account has ample credit). */
function metering(ds: ReturnType<typeof createDataSource>, clock: Clock, paced: boolean): Metering {
  const store = createStore(ds);
  // The sweeps measured alone run back to back (their figures are the work); the worker's sweeps
  // during admissions are paced as the service paces them.
  const timing = paced ? DEFAULT_TIMING : { ...DEFAULT_TIMING, meterBusyShare: 1 };
  return new Metering({ store, clock, ledger: new LedgerService(store, clock) }, async () => {}, timing);
}

/** Child mode: sweeps back to back until told to stop, reporting each sweep's time. */
async function sweeper(databaseUrl: string): Promise<void> {
  exitWithParent();
  const ds = createDataSource(databaseUrl, 4, entities);
  await ds.initialize();
  const clock = sweepClock(24 * 3600_000);
  const m = metering(ds, clock, true);
  let stop = false;
  process.on('message', (msg) => {
    if (msg === 'stop') stop = true;
  });
  process.send!({ ready: true });
  while (!stop) {
    clock.tick();
    const t0 = performance.now();
    const { posted } = await m.meter();
    process.send!({ sweepMs: performance.now() - t0, posted });
  }
  await ds.destroy();
  process.exit(0);
}

async function main(): Promise<void> {
  const app = await startBenchApp();
  const { ds } = app.services;
  const clock = sweepClock(0);
  const m = metering(ds, clock, false);
  try {
    console.log(
      `metering sweep: ${PER_ACCOUNT} metered rentals per account, chunks of ~${DEFAULT_TIMING.meterChunkRentals} rentals, ${DEFAULT_TIMING.meterConcurrency} in flight, ${REPS} repetitions, MariaDB`,
    );
    let seeded = 0;
    /** Median µs per rental at each size, for the linearity ratio. */
    const medians = new Map<number, number>();
    for (const size of SIZES) {
      const t0 = performance.now();
      const accounts = Math.ceil((size - seeded) / PER_ACCOUNT);
      await seedMeteredRentals(ds, {
        accounts,
        perAccount: PER_ACCOUNT,
        creditsMinor: 1_000_000_000,
        priceMinor: 300,
        startedAt: new Date(clock.now().getTime() - 3600_000),
        startSpreadMs: 3600_000,
      });
      seeded += accounts * PER_ACCOUNT;
      const seedS = (performance.now() - t0) / 1000;
      // Not reported: the new rentals' first sweep charges (and posts) the hour before they were
      // seeded, and on the first size it warms the sweep's code up, so every size measures a running worker.
      clock.tick();
      await m.meter();
      const times: number[] = [];
      const usage0 = await usageCharged(ds);
      const cpu0 = process.cpuUsage();
      const db0 = databaseCpuMs();
      const q0 = { ...queryCounter };
      for (let rep = 0; rep < REPS; rep++) {
        clock.tick();
        const s0 = performance.now();
        const { charged } = await m.meter();
        times.push((performance.now() - s0) / 1000);
        if (charged !== seeded) throw new Error(`sweep charged ${charged} of ${seeded} rentals`);
      }
      const cpu = process.cpuUsage(cpu0);
      const db1 = databaseCpuMs();
      // Whole sweeps, the service's job polling in this process included (a few requests a second).
      const requests = (queryCounter.requests - q0.requests) / REPS;
      const statements = (queryCounter.statements - q0.statements) / REPS;
      const chunks = Math.ceil(seeded / PER_ACCOUNT / Math.floor(DEFAULT_TIMING.meterChunkRentals / PER_ACCOUNT));
      const perRental = (ms: number) => `${((ms * 1000) / (seeded * REPS)).toFixed(1)} µs`;
      const where = `CPU per rental: node ${perRental((cpu.user + cpu.system) / 1000)}${db0 === null || db1 === null ? '' : `, database ${perRental(db1 - db0)}`}`;
      const entries = Number((await ds.query(`SELECT COUNT(*) AS n FROM ledger_entries`))[0].n);
      const usage1 = await usageCharged(ds);
      const perHour = (usage1.rows - usage0.rows) / ((usage1.seconds - usage0.seconds) / 3600);
      console.log(
        `  ${seeded} rentals (seeded in ${seedS.toFixed(1)} s; ledger now ${entries} entries): sweep ${spread(times, 3, ' s')}; ${spread(
          times.map((t) => (t * 1e6) / seeded),
          1,
          ' µs',
        )} per rental; ` +
          `ledger rows per rental-hour ${perHour.toFixed(2)} (an entry per sweep would be ${3600_000 / SWEEP_TICK_MS} here, 240 at the 15 s default); ${where}; ` +
          `per sweep ${requests.toFixed(0)} requests (${(requests / chunks).toFixed(2)} per chunk of ${chunks}, ${((requests * 1000) / seeded).toFixed(2)} per 1000 rentals), ${statements.toFixed(0)} statements`,
      );
      medians.set(seeded, [...times].sort((a, b) => a - b)[Math.floor((times.length - 1) / 2)] / seeded);
    }

    const sizes = [...medians.keys()];
    if (sizes.length > 1) {
      const [small, large] = [sizes[0], sizes[sizes.length - 1]];
      console.log(
        `  linearity: median µs per rental at ${large} ÷ at ${small} = ${(medians.get(large)! / medians.get(small)!).toFixed(2)} ` +
          `(${(medians.get(large)! * 1e6).toFixed(1)} µs / ${(medians.get(small)! * 1e6).toFixed(1)} µs; goal: at most 50 µs at 100000, the ratio near 1)`,
      );
    }
    if (process.env.BENCH_SWEEPS_ONLY === '1') return;
    console.log(
      `admissions during a sweep: ${CLIENTS} clients on their own accounts, ${PER_CLIENT} requests each, saturated and at ${RATE}/s; ${seeded} metered rentals`,
    );
    const phase = async (label: string, rate?: number): Promise<Phase> => {
      const clients = await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE');
      const l0 = await rowLocks(ds);
      const r = await admissionPhase(app.base, clients, { offerId: app.offer.id }, PER_CLIENT, rate);
      const l1 = await rowLocks(ds);
      const p = { ...r, lockWaits: l1.waits - l0.waits, lockWaitMs: l1.ms - l0.ms };
      console.log(describePhase(label, p) + `; row-lock waits ${p.lockWaits} (${p.lockWaitMs} ms)`);
      return p;
    };
    // JIT warm-up of the admission path, not reported.
    await admissionPhase(
      app.base,
      await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE'),
      { offerId: app.offer.id },
      PER_CLIENT,
    );
    const without: Phase[] = [];
    const withoutPaced: Phase[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      without.push(await phase(`rep ${rep + 1} no sweep, saturated`));
      withoutPaced.push(await phase(`rep ${rep + 1} no sweep, ${RATE}/s`, RATE));
    }
    const child = ownChild(
      fork(fileURLToPath(import.meta.url), ['sweeper'], {
        execArgv: process.execArgv,
        env: { ...process.env, BENCH_SWEEP_DATABASE_URL: app.databaseUrl },
      }),
    );
    const sweeps: number[] = [];
    await new Promise<void>((resolve, reject) => {
      child.on('message', (msg: { ready?: boolean; sweepMs?: number }) => {
        if (msg.ready) resolve();
        if (msg.sweepMs !== undefined) sweeps.push(msg.sweepMs / 1000);
      });
      // Only before it is ready: a promise settles once.
      child.once('exit', (code) => reject(new Error(`sweeper exited with ${code}`)));
    });
    const during: Phase[] = [];
    const duringPaced: Phase[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      during.push(await phase(`rep ${rep + 1} while sweeping, saturated`));
      duringPaced.push(await phase(`rep ${rep + 1} while sweeping, ${RATE}/s`, RATE));
    }
    child.send('stop');
    // It stops after the sweep under way, whose time is the last figure it reports.
    await exited(child);
    console.log('summary (min / median / max):');
    const row = (name: string, a: Phase[], b: Phase[]) =>
      `  ${name}: p99 ${spread(
        a.map((r) => r.p99),
        1,
        ' ms',
      )} without a sweep, ${spread(
        b.map((r) => r.p99),
        1,
        ' ms',
      )} during sweeps` +
      `; p50 ${spread(
        a.map((r) => r.p50),
        1,
        ' ms',
      )} / ${spread(
        b.map((r) => r.p50),
        1,
        ' ms',
      )}` +
      `; throughput ${spread(
        a.map((r) => r.perSecond),
        0,
        '/s',
      )} / ${spread(
        b.map((r) => r.perSecond),
        0,
        '/s',
      )}` +
      `; row-lock waits ${spread(
        a.map((r) => r.lockWaits),
        0,
      )} / ${spread(
        b.map((r) => r.lockWaits),
        0,
      )}`;
    console.log(row('saturated', without, during));
    console.log(row(`at ${RATE}/s`, withoutPaced, duringPaced));
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const ratio = (a: Phase[], b: Phase[]) => (median(b.map((r) => r.p99)) / median(a.map((r) => r.p99))).toFixed(2);
    console.log(
      `  p99 during / without sweeps (medians): saturated ${ratio(without, during)}×, at ${RATE}/s ${ratio(withoutPaced, duringPaced)}× (goal at ${RATE}/s: at most 1.3×)`,
    );
    console.log(
      `  paced sweeps of ${seeded} rentals in the worker process meanwhile (${DEFAULT_TIMING.meterBusyShare * 100} % busy, within ${METER_BUDGET_SHARE * 100} % of the ${DEFAULT_TIMING.meterPeriodMs / 1000} s period): ${sweeps.length}, ${sweeps.length ? spread(sweeps, 3, ' s') : 'none finished'} (goal: within the period)`,
    );
  } finally {
    await app.close();
  }
}

if (process.argv[2] === 'sweeper') {
  sweeper(process.env.BENCH_SWEEP_DATABASE_URL!).catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  runBench(main);
}
