/*
 * The metering sweep at scale: sweep time over 1k / 10k / 30k active metered rentals (seeded with
 * multi-row inserts, 10 per account), each sweep charging every rental (the sweep's clock moves a
 * minute between sweeps), then the p99 of admissions (32 clients on their own funded accounts)
 * with no sweep running and while a worker process sweeps the 30k rentals back to back. Every
 * figure is min / median / max over BENCH_REPS repetitions.
 *
 *   npm run bench:metering      # BENCH_SIZES=1000,10000,30000 BENCH_REPS=3 BENCH_REQUESTS=30
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Clock } from '../src/clock.js';
import { createDataSource } from '../src/db/data-source.js';
import { LedgerService } from '../src/modules/billing/ledger.service.js';
import { Metering } from '../src/modules/rentals/lifecycle/metering.js';
import { DEFAULT_TIMING } from '../src/modules/rentals/lifecycle/lifecycle-deps.js';
import { seedMeteredRentals } from '../test/helpers/metered-seed.js';
import { admissionPhase, describePhase, makeClients, spread, startBenchApp, type PhaseResult } from './support.js';

const SIZES = (process.env.BENCH_SIZES ?? '1000,10000,30000').split(',').map(Number);
const REPS = Number(process.env.BENCH_REPS ?? 3);
const PER_CLIENT = Number(process.env.BENCH_REQUESTS ?? 30);
const PER_ACCOUNT = 10;
const CLIENTS = 32;

/** A clock `offsetMs` ahead of the real one; each sweep moves it a minute on, so every rental owes usage. */
function sweepClock(offsetMs: number): Clock & { tick(): void } {
  let offset = offsetMs;
  return { now: () => new Date(Date.now() + offset), tick: () => void (offset += 60_000) };
}

/** The sweep as the worker runs it (limits never trip here: every account has ample credit). */
function metering(ds: ReturnType<typeof createDataSource>, clock: Clock): Metering {
  return new Metering({ ds, clock, ledger: new LedgerService(ds, clock) }, async () => {}, DEFAULT_TIMING);
}

/** Child mode: sweeps back to back until told to stop, reporting each sweep's time. */
async function sweeper(databaseUrl: string): Promise<void> {
  const ds = createDataSource(databaseUrl, 4);
  await ds.initialize();
  const clock = sweepClock(24 * 3600_000);
  const m = metering(ds, clock);
  let stop = false;
  process.on('message', (msg) => {
    if (msg === 'stop') stop = true;
  });
  process.send!({ ready: true });
  while (!stop) {
    clock.tick();
    const t0 = performance.now();
    const posted = await m.meter();
    process.send!({ sweepMs: performance.now() - t0, posted });
  }
  await ds.destroy();
  process.exit(0);
}

async function main(): Promise<void> {
  const app = await startBenchApp();
  const { ds } = app.services;
  const clock = sweepClock(0);
  const m = metering(ds, clock);
  try {
    console.log(`metering sweep: ${PER_ACCOUNT} metered rentals per account, chunks of ~${DEFAULT_TIMING.meterChunkRentals} rentals, ${REPS} repetitions, MariaDB`);
    let seeded = 0;
    for (const size of SIZES) {
      const t0 = performance.now();
      const accounts = Math.ceil((size - seeded) / PER_ACCOUNT);
      await seedMeteredRentals(ds, { accounts, perAccount: PER_ACCOUNT, creditsMinor: 1_000_000_000, priceMinor: 300, startedAt: new Date(Date.now() - 3600_000) });
      seeded += accounts * PER_ACCOUNT;
      const seedS = (performance.now() - t0) / 1000;
      const times: number[] = [];
      for (let rep = 0; rep < REPS; rep++) {
        clock.tick();
        const s0 = performance.now();
        const posted = await m.meter();
        times.push((performance.now() - s0) / 1000);
        if (posted !== seeded) throw new Error(`sweep posted ${posted} entries for ${seeded} rentals`);
      }
      const entries = Number((await ds.query(`SELECT COUNT(*) AS n FROM ledger_entries`))[0].n);
      console.log(`  ${seeded} rentals (seeded in ${seedS.toFixed(1)} s; ledger now ${entries} entries): sweep ${spread(times, 3, ' s')}; ${spread(times.map((t) => (t * 1e6) / seeded), 1, ' µs')} per rental`);
    }

    console.log(`admissions during a sweep: ${CLIENTS} clients on their own accounts, ${PER_CLIENT} requests each, ${seeded} metered rentals`);
    const without: PhaseResult[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      without.push(await admissionPhase(app.base, await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE'), { offerId: app.offer.id }, PER_CLIENT));
      console.log(describePhase(`rep ${rep + 1} no sweep`, without[rep]));
    }
    const child = fork(fileURLToPath(import.meta.url), ['sweeper'], { execArgv: process.execArgv, env: { ...process.env, BENCH_SWEEP_DATABASE_URL: app.databaseUrl } });
    const sweeps: number[] = [];
    await new Promise<void>((resolve, reject) => {
      child.on('message', (msg: { ready?: boolean; sweepMs?: number }) => {
        if (msg.ready) resolve();
        if (msg.sweepMs !== undefined) sweeps.push(msg.sweepMs / 1000);
      });
      child.once('exit', (code) => reject(new Error(`sweeper exited with ${code}`)));
    });
    const during: PhaseResult[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      during.push(await admissionPhase(app.base, await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE'), { offerId: app.offer.id }, PER_CLIENT));
      console.log(describePhase(`rep ${rep + 1} while sweeping`, during[rep]));
    }
    child.removeAllListeners('exit');
    const exited = new Promise((r) => child.once('exit', r));
    child.send('stop');
    await exited;
    console.log('summary (min / median / max):');
    console.log(`  admission p99 without a sweep ${spread(without.map((r) => r.p99), 1, ' ms')}; during sweeps ${spread(during.map((r) => r.p99), 1, ' ms')}`);
    console.log(`  admission p50 without a sweep ${spread(without.map((r) => r.p50), 1, ' ms')}; during sweeps ${spread(during.map((r) => r.p50), 1, ' ms')}`);
    console.log(`  throughput without ${spread(without.map((r) => r.perSecond), 0, '/s')}; during ${spread(during.map((r) => r.perSecond), 0, '/s')}`);
    console.log(`  sweeps of ${seeded} rentals in the worker process meanwhile: ${sweeps.length}, ${sweeps.length ? spread(sweeps, 3, ' s') : 'none finished'}`);
  } finally {
    await app.close();
  }
}

const run = process.argv[2] === 'sweeper' ? sweeper(process.env.BENCH_SWEEP_DATABASE_URL!) : main();
run
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => process.exit());
