/*
 * Rental admission under load: POST /api/v1/rentals from 32 concurrent clients, one per account,
 * sent from a worker thread of this process to the service running in a process of its own
 * (bench/service-process.ts) on a throwaway database, beside a raw mysql2 client sending the same
 * statements in the same three round trips (bench/raw-admission.ts) from this process, and beside
 * the floor of any admission served by Express: bare Express running that raw admission in a
 * process of its own (bench/express-floor-process.ts), all in the same run. For each side:
 * admissions per second, the ratios ours/raw, floor/raw and ours/floor, the CPU time per admission
 * of the process doing the work (the service process alone for ours: not the load generator; this
 * process for raw, where nothing else runs during its phase), statements and round trips per
 * admission counted on every mysql2 connection of that process, and the database server's CPU
 * when it runs on this machine. Then, with a worker running, the time from admission to the
 * provider create call. Every figure is min / median / max over BENCH_REPS repetitions.
 *
 *   npm run bench:rentals                 # BENCH_REQUESTS=<per client, default 50>, BENCH_REPS=<default 3>
 *   BENCH_PROFILE=<dir>                   # also writes a V8 CPU profile of the service process under the same load
 *   BENCH_DATABASE_URL=mysql://root@127.0.0.1:3306/ (the server; a fresh database is made and dropped)
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { RENTAL_JOBS } from '../src/jobs/job-queue.js';
import { runBench } from './processes.js';
import { rawAdmission, rawPool } from './raw-admission.js';
import {
  admissionPhase,
  databaseCpuMs,
  describePhase,
  loadPhase,
  makeClients,
  percentile,
  queryCounter,
  spread,
  startBenchApp,
  startFloorProcess,
  startServiceProcess,
  type BenchApp,
  type PhaseResult,
} from './support.js';

const CLIENTS = 32;
const PER_CLIENT = Number(process.env.BENCH_REQUESTS ?? 50);
const REPS = Number(process.env.BENCH_REPS ?? 3);
const PROVISION_SAMPLES = Number(process.env.BENCH_PROVISION_SAMPLES ?? 32);

interface Measured extends PhaseResult {
  statements: number;
  /** Requests sent to the database per admission (a batch of statements is one). */
  roundTrips: number;
  deadlocks: number;
  /** CPU time per admission of the process that did the work (every thread of it), ms. */
  cpuMs: number;
  /** The part of cpuMs spent in the kernel (system calls: socket reads and writes above all), ms. */
  systemMs: number;
  /** The database server's CPU time per admission, ms, when it runs on this machine. */
  dbCpuMs: number | null;
  /** This process's CPU time per admission, ms: for the service's phases, the load generator's. */
  benchCpuMs: number;
}

/** What a side's process has used and sent so far. */
interface Counters {
  cpuMs: number;
  systemMs: number;
  statements: number;
  requests: number;
  deadlocks: number;
}

/** This process's counters: the raw side's, whose phase is the only thing running in it. */
async function ownCounters(raw: { deadlocks: number }): Promise<Counters> {
  const cpu = process.cpuUsage();
  return {
    cpuMs: (cpu.user + cpu.system) / 1000,
    systemMs: cpu.system / 1000,
    statements: queryCounter.statements,
    requests: queryCounter.requests,
    deadlocks: raw.deadlocks,
  };
}

/** One phase on fresh accounts, with the CPU, statements and deadlocks of the process that served it. */
async function measured(run: () => Promise<PhaseResult>, counters: () => Promise<Counters>): Promise<Measured> {
  const c0 = await counters();
  const db0 = databaseCpuMs();
  const own0 = process.cpuUsage();
  const r = await run();
  const own = process.cpuUsage(own0);
  const db1 = databaseCpuMs();
  const c1 = await counters();
  return {
    ...r,
    statements: (c1.statements - c0.statements) / r.requests,
    roundTrips: (c1.requests - c0.requests) / r.requests,
    deadlocks: c1.deadlocks - c0.deadlocks,
    cpuMs: (c1.cpuMs - c0.cpuMs) / r.requests,
    systemMs: (c1.systemMs - c0.systemMs) / r.requests,
    dbCpuMs: db0 === null || db1 === null ? null : (db1 - db0) / r.requests,
    benchCpuMs: (own.user + own.system) / 1000 / r.requests,
  };
}

const facts = (m: Measured) =>
  `; ${m.statements.toFixed(2)} statements in ${m.roundTrips.toFixed(2)} round trips/admission; deadlocks ${m.deadlocks}; process CPU ${m.cpuMs.toFixed(3)} ms/admission (${m.systemMs.toFixed(3)} of it in the kernel)` +
  (m.dbCpuMs === null ? '' : `; database CPU ${m.dbCpuMs.toFixed(2)} ms/admission`);

async function main(): Promise<void> {
  // This process's app only sets up accounts and keys (and runs the provisioning phase): few connections,
  // so the service's pool and the raw client's (40 each) fit under the server's connection limit.
  const app = await startBenchApp({ poolSize: 10 });
  const service = await startServiceProcess(app);
  const pool = rawPool(app.databaseUrl, 40);
  const raw = { deadlocks: 0 };
  const byOffer = { offerId: app.offer.id };
  const byIntent = { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 };
  const serviceCounters = () => service.stats();
  const floor = await startFloorProcess(app);
  // The floor's statements are the raw side's (10 in 3 round trips); it reports its CPU alone.
  const floorCounters = async (): Promise<Counters> => ({
    ...(await floor.stats()),
    statements: 0,
    requests: 0,
    deadlocks: 0,
  });
  try {
    // The service's answer to one admission, for the floor to send the same bytes.
    const [sample] = await makeClients(app, 1, 'ACCOUNT_BALANCE');
    const first = await fetch(`${service.base}/api/v1/rentals`, {
      method: 'POST',
      headers: { Authorization: sample.auth, 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() },
      body: JSON.stringify(byOffer),
    });
    const sampleBody = await first.text();
    if (first.status !== 201) throw new Error(`the sample admission answered ${first.status}: ${sampleBody}`);
    const sampleId = (JSON.parse(sampleBody) as { data: { rentalId: string } }).data.rentalId;
    const floorAnswer = sampleBody.replaceAll(sampleId, '__RENTAL_ID__');
    // JIT and connection pool warm-up: one whole phase of each, not reported, so the repetitions
    // measure the steady state a long-running server is in.
    await admissionPhase(service.base, await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE'), byOffer, PER_CLIENT);
    await loadPhase(await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE'), PER_CLIENT, (c) =>
      rawAdmission(pool, c, app.offer, raw),
    );
    const warmFloor = await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE');
    await floor.serve(warmFloor, app.offer, floorAnswer);
    await admissionPhase(floor.base, warmFloor, byOffer, PER_CLIENT);
    console.log(
      `rental admission: ${CLIENTS} concurrent clients on ${CLIENTS} funded accounts, ${PER_CLIENT} requests each, ${REPS} repetitions; ` +
        `the service in its own process (pid ${service.pid}), the raw client in the bench's; MariaDB`,
    );
    const ours: Measured[] = [];
    const theirs: Measured[] = [];
    const intents: Measured[] = [];
    const floors: Measured[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      const floorClients = await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE');
      await floor.serve(floorClients, app.offer, floorAnswer);
      const oursClients = await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE');
      const rawClients = await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE');
      const intentClients = await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE');
      ours.push(await measured(() => admissionPhase(service.base, oursClients, byOffer, PER_CLIENT), serviceCounters));
      theirs.push(
        await measured(
          () => loadPhase(rawClients, PER_CLIENT, (c) => rawAdmission(pool, c, app.offer, raw)),
          () => ownCounters(raw),
        ),
      );
      intents.push(
        await measured(() => admissionPhase(service.base, intentClients, byIntent, PER_CLIENT), serviceCounters),
      );
      floors.push(await measured(() => admissionPhase(floor.base, floorClients, byOffer, PER_CLIENT), floorCounters));
      console.log(
        describePhase(`rep ${rep + 1} ours (metered, by offer id)`, ours[rep]) +
          facts(ours[rep]) +
          ` (the service process); load generator CPU ${ours[rep].benchCpuMs.toFixed(3)} ms/admission`,
      );
      console.log(
        describePhase(`rep ${rep + 1} raw mysql2 (same statements, same round trips)`, theirs[rep]) +
          facts(theirs[rep]),
      );
      console.log(
        describePhase(`rep ${rep + 1} ours (metered, by GPU intent)`, intents[rep]) +
          `; ${intents[rep].statements.toFixed(2)} statements in ${intents[rep].roundTrips.toFixed(2)} round trips/admission`,
      );
      console.log(
        describePhase(`rep ${rep + 1} floor (bare Express serving the raw admission)`, floors[rep]) +
          `; process CPU ${floors[rep].cpuMs.toFixed(3)} ms/admission (${floors[rep].systemMs.toFixed(3)} of it in the kernel)`,
      );
    }
    const col = (xs: Measured[], f: (m: Measured) => number, d = 1, u = '') => spread(xs.map(f), d, u);
    const line = (xs: Measured[]) =>
      `${col(xs, (m) => m.perSecond, 0, '/s')}; p50 ${col(xs, (m) => m.p50, 1, ' ms')}; p99 ${col(xs, (m) => m.p99, 1, ' ms')}; ` +
      `CPU ${col(xs, (m) => m.cpuMs, 3, ' ms')}/admission (kernel ${col(xs, (m) => m.systemMs, 3, ' ms')}); statements ${col(xs, (m) => m.statements, 2)} in ${col(xs, (m) => m.roundTrips, 2)} round trips/admission; deadlocks ${col(xs, (m) => m.deadlocks, 0)}`;
    console.log('summary (min / median / max):');
    console.log(
      `  ours: ${line(ours)} (BEGIN and COMMIT included; a key is read at most once a minute); load generator CPU ${col(ours, (m) => m.benchCpuMs, 3, ' ms')}/admission`,
    );
    console.log(`  raw:  ${line(theirs)}`);
    const ratios = ours.map((o, i) => o.perSecond / theirs[i].perSecond);
    const p99s = ours.map((o, i) => o.p99 / theirs[i].p99);
    const cpus = ours.map((o, i) => o.cpuMs / theirs[i].cpuMs);
    console.log(
      `  throughput ours/raw ${spread(ratios, 2, 'x')}; p99 ours/raw ${spread(p99s, 2, 'x')}; CPU per admission ours/raw ${spread(cpus, 2, 'x')}`,
    );
    console.log(
      `  floor (bare Express + raw): ${col(floors, (m) => m.perSecond, 0, '/s')}; p99 ${col(floors, (m) => m.p99, 1, ' ms')}; CPU ${col(floors, (m) => m.cpuMs, 3, ' ms')}/admission`,
    );
    console.log(
      `  throughput floor/raw ${spread(
        floors.map((f, i) => f.perSecond / theirs[i].perSecond),
        2,
        'x',
      )}; ours/floor ${spread(
        ours.map((o, i) => o.perSecond / floors[i].perSecond),
        2,
        'x',
      )}; ` +
        `CPU per admission floor - raw ${spread(
          floors.map((f, i) => f.cpuMs - theirs[i].cpuMs),
          3,
          ' ms',
        )}, ours - floor ${spread(
          ours.map((o, i) => o.cpuMs - floors[i].cpuMs),
          3,
          ' ms',
        )}`,
    );
    console.log(
      `  GPU intent: ${col(intents, (m) => m.perSecond, 0, '/s')}; p50 ${col(intents, (m) => m.p50, 1, ' ms')}; p99 ${col(intents, (m) => m.p99, 1, ' ms')}; statements ${col(intents, (m) => m.statements, 2)}/admission`,
    );
    console.log(
      `  throughput GPU intent/by offer id (same repetition) ${spread(
        intents.map((m, i) => m.perSecond / ours[i].perSecond),
        2,
        'x',
      )}`,
    );

    if (process.env.BENCH_PROFILE) {
      // A phase of its own: sampling slows the service, so the measured repetitions run without it.
      mkdirSync(process.env.BENCH_PROFILE, { recursive: true });
      const path = join(process.env.BENCH_PROFILE, `admission-${Date.now()}.cpuprofile`);
      const clients = await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE');
      await service.startProfile();
      const p = await admissionPhase(service.base, clients, byOffer, PER_CLIENT);
      await service.stopProfile(path);
      console.log(describePhase('profiled (not in the summary)', p) + `; the service's CPU profile is ${path}`);
    }

    const extra = await makeClients(app, CLIENTS, 'ACCOUNT_BALANCE');
    const intent = { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 };
    const i = await measured(() => admissionPhase(service.base, extra, intent, PER_CLIENT), serviceCounters);
    console.log(describePhase('metered (ACCOUNT_BALANCE, by GPU intent)', i) + facts(i));
    const legacy = await makeClients(app, CLIENTS, 'LEGACY_PREPAID');
    const l = await measured(
      () => admissionPhase(service.base, legacy, { offerId: app.offer.id, budgetMinor: 600 }, PER_CLIENT),
      serviceCounters,
    );
    console.log(describePhase('legacy prepaid (ledger debit, by offer id)', l) + facts(l));
    await service.close();
    await provisioningLatency(app);
  } finally {
    await pool.end();
    await floor.close();
    await service.close();
    await app.close();
  }
}

/**
 * Admission to the provider create call, with a worker in this process: the attempt row is
 * written just before the create call, so its time minus the order's creation time is the wait.
 */
async function provisioningLatency(app: BenchApp): Promise<void> {
  const { services, base } = app;
  const offerId = app.offer.id;
  const hasJob = services.jobDefinitions.some((d) => d.name === RENTAL_JOBS.provision);
  const jobs = (services as { jobs?: unknown }).jobs;
  if (!hasJob || !jobs) {
    console.log(
      `  admission -> provider create: not measured (${!jobs ? 'no job queue on Services' : `no ${RENTAL_JOBS.provision} job defined`} yet)`,
    );
    return;
  }
  // The admission phases queued a provisioning job per rental; drop them and retire their rows so
  // this phase measures the pick-up of a fresh rental, not a backlog of our own making.
  await services.ds.query(`DELETE FROM agenda_jobs WHERE name = ?`, [RENTAL_JOBS.provision]);
  await services.ds.query(`UPDATE deployments SET status = 'FAILED' WHERE status = 'PENDING'`);
  await services.ds.query(`UPDATE orders SET status = 'FAILED' WHERE status = 'PENDING'`);
  const { startWorker } = await import('../src/worker.js');
  const worker = await startWorker(services);
  try {
    const [client] = await makeClients(app, 1, 'ACCOUNT_BALANCE');
    const rentalIds: string[] = [];
    for (let i = 0; i < PROVISION_SAMPLES; i++) {
      const res = await fetch(`${base}/api/v1/rentals`, {
        method: 'POST',
        headers: { Authorization: client.auth, 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() },
        body: JSON.stringify({ offerId }),
      });
      rentalIds.push(((await res.json()) as { data: { rentalId: string } }).data.rentalId);
      // Spaced out, so this measures the pick-up path rather than a queue of our own making.
      await new Promise((r) => setTimeout(r, 100));
    }
    const deadline = Date.now() + 30_000;
    let rows: { waited: number }[] = [];
    while (Date.now() < deadline) {
      rows = await services.ds.query(
        `SELECT TIMESTAMPDIFF(MICROSECOND, o.created_at, MIN(a.created_at)) / 1000 AS waited
           FROM orders o JOIN deployments d ON d.order_id = o.id JOIN deployment_attempts a ON a.deployment_id = d.id
          WHERE o.id IN (?) GROUP BY o.id`,
        [rentalIds],
      );
      if (rows.length === rentalIds.length) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const waits = rows.map((r) => Number(r.waited)).sort((a, b) => a - b);
    console.log(
      `  admission -> provider create call (${waits.length}/${rentalIds.length} rentals reached it): ` +
        `p50 ${percentile(waits, 50).toFixed(1)} ms, p99 ${percentile(waits, 99).toFixed(1)} ms, max ${waits[waits.length - 1]?.toFixed(1)} ms`,
    );
    // Leave nothing running: terminate what was provisioned.
    const deployments: { id: string }[] = await services.ds.query(`SELECT id FROM deployments WHERE order_id IN (?)`, [
      rentalIds,
    ]);
    for (const d of deployments) {
      await fetch(`${base}/api/v1/deployments/${d.id}/terminate`, {
        method: 'POST',
        headers: { Authorization: client.auth },
      });
    }
    await new Promise((r) => setTimeout(r, 2000));
  } finally {
    await worker.stop();
  }
}

// Exits when main settles: Agenda and SSH timers of the in-process worker would otherwise keep it alive.
runBench(main);
