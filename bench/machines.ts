/*
 * Idle sampling at scale: what the worker's idle sweep (createRentalLifecycle(...).watchIdle(), the
 * production path, whatever it does to log in) costs the worker per sample and per rental-hour, at
 * 1k and 10k watched rentals. Each size gets a fresh database with that many ACTIVE rentals (10 per
 * account) whose keys end idle machines after one hour, each with its own sealed ed25519 key (drawn
 * from a pool of BENCH_KEY_POOL keys: ssh2 makes them slowly) and an SSH address on one of
 * BENCH_SERVERS loopback SSH servers with their host keys pinned, so the sweeps write no pin. The
 * servers (bench/machines-servers.ts) run in a process of their own, so their CPU is not the
 * worker's, and count logins and commands.
 *
 * A round moves the injected clock on by one sample period (a quarter of the window, at most five
 * minutes) and drives watchIdle() until every rental was sampled once (their watches' `sampled_at`
 * in the database): one call samples PARALLEL_SAMPLES at once for up to SWEEP_WAIT_MS, so a round of
 * thousands takes many calls. The worker's CPU over the round (process.cpuUsage) ÷ samples is its CPU
 * per sample; × samples per rental-hour its CPU per rental-hour; × 10,000 ÷ 3,600,000 ms the cores
 * 10,000 such rentals keep busy. The rounds run back to back, so the same figures are also given
 * at production's cadence: a call every IDLE_SWEEP_EVERY_MS, the ones with nothing due (timed after
 * the rounds) and the worker's CPU while it only keeps its connections counted in. One warm-up round
 * (the watches' first samples, and the JIT) is not reported; every figure is min / median / max
 * over BENCH_REPS rounds, memory once per size.
 *
 *   npm run bench:machines      # BENCH_SIZES=1000,10000 BENCH_REPS=3 BENCH_SERVERS=8 BENCH_KEY_POOL=200
 *                               # BENCH_ROUND_LIMIT_S=900 (a round that takes longer is reported as not run)
 *                               # BENCH_CLIENT_ALIVE_S=0 BENCH_NODELAY=1 (the servers, machines-servers.ts)
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as pause } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { DataSource } from 'typeorm';
import { ManualClock } from '../src/clock.js';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../src/db/data-source.js';
import { entities } from '../src/entities.js';
import type { JobQueue } from '../src/jobs/job-queue.js';
import { createLogger } from '../src/logger.js';
import { LedgerService } from '../src/modules/billing/ledger.service.js';
import { SecretBox } from '../src/modules/credentials/secret-box.js';
import {
  PARALLEL_SAMPLES,
  SWEEP_WAIT_MS,
  sampleEveryMs,
  IDLE_SWEEP_EVERY_MS,
} from '../src/modules/rentals/lifecycle/idle.js';
import { createRentalLifecycle, type RentalLifecycle } from '../src/modules/rentals/lifecycle/rental-lifecycle.js';
import type { LifecycleDeps } from '../src/modules/rentals/lifecycle/lifecycle-deps.js';
import { createStore } from '../src/repositories.js';
import { IDLE_WINDOW_MINUTES, RENTALS_PER_ACCOUNT, keyPool, seedWatchedRentals } from './machines-seed.js';
import { openFilesLimit, startServers, type Servers, type ServerStats } from './machines-servers.js';
import { runBench } from './processes.js';
import { spread } from './support.js';

const SIZES = (process.env.BENCH_SIZES ?? '1000,10000').split(',').map(Number);
const REPS = Number(process.env.BENCH_REPS ?? 3);
const SERVERS = Number(process.env.BENCH_SERVERS ?? 8);
const KEY_POOL = Number(process.env.BENCH_KEY_POOL ?? 200);
const ROUND_LIMIT_MS = Number(process.env.BENCH_ROUND_LIMIT_S ?? 900) * 1000;

const SAMPLE_EVERY_MS = sampleEveryMs(IDLE_WINDOW_MINUTES * 60_000);
const SAMPLES_PER_RENTAL_HOUR = 3_600_000 / SAMPLE_EVERY_MS;
const FLEET = 10_000;
/** How long a round waits for the samples a call left running before the next call (a sample's own bound is far longer). */
const STRAGGLER_WAIT_MS = 30_000;
/** Calls production makes per sample period, and how many with nothing due the bench times. */
const CALLS_PER_PERIOD = SAMPLE_EVERY_MS / IDLE_SWEEP_EVERY_MS;
const IDLE_CALLS = 5;
/** How long the worker is watched doing nothing but keep its connections. */
const QUIET_MS = 5000;
const GOAL_MS_PER_SAMPLE = 1;
const GOAL_CORES = 0.25;

// Memory is read after a full collection, so it says what the rentals hold, not what awaits collection.
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

/** Stands in for a part the idle sweep never reaches, saying so if it ever does. */
function unused<T extends object>(what: string): T {
  return new Proxy({} as T, {
    get: (_t, prop) => {
      throw new Error(`the idle sweep reached ${what}.${String(prop)}, which this bench does not provide`);
    },
  });
}

/** Warnings and errors the lifecycle logged, counted, with the first kept to show. */
const logged = { problems: 0, first: '' };
const logger = createLogger(process.env.BENCH_LOG_LEVEL ?? 'info', {
  write(line: string) {
    if (!/"level":"(warn|error|fatal)"/.test(line)) return;
    logged.problems++;
    logged.first ||= line.trim();
  },
});

/** Jobs queued (a rental ended for idling queues its termination): counted, never run. */
let queuedJobs = 0;
const jobs: JobQueue = {
  now: async () => void queuedJobs++,
  schedule: async () => void queuedJobs++,
  nowIn: async () => async () => undefined,
};

function lifecycleOn(ds: DataSource, clock: ManualClock, box: SecretBox): RentalLifecycle {
  const store = createStore(ds);
  const deps: LifecycleDeps = {
    store,
    clock,
    logger,
    box,
    jobs,
    ledger: new LedgerService(store, clock),
    providers: unused('providers'),
    refunds: unused('refunds'),
    inventory: unused('inventory'),
  };
  return createRentalLifecycle(deps);
}

async function sampledSince(ds: DataSource, at: Date): Promise<number> {
  const [row]: { n: string }[] = await ds.query(`SELECT COUNT(*) AS n FROM idle_watches WHERE sampled_at >= ?`, [at]);
  return Number(row.n);
}

/** One round's measurements. */
interface Round {
  samples: number;
  cpuMs: number;
  /** The part of `cpuMs` spent in the kernel: on loopback a send also runs the receiving side's TCP. */
  systemMs: number;
  wallS: number;
  calls: number;
  server: ServerStats;
}

/** Moves the clock a sample period on and sweeps until each of the `due` rentals was sampled once. */
async function round(
  lifecycle: RentalLifecycle,
  ds: DataSource,
  clock: ManualClock,
  servers: Servers,
  due: number,
): Promise<Round> {
  clock.advance(SAMPLE_EVERY_MS);
  const at = clock.now();
  const s0 = await servers.stats();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let samples = 0;
  let calls = 0;
  for (;;) {
    if (performance.now() - t0 > ROUND_LIMIT_MS)
      throw new Error(
        `a round did not sample all ${due} rentals within ${ROUND_LIMIT_MS / 1000} s (${samples} samples started)`,
      );
    const started = await lifecycle.watchIdle();
    calls++;
    samples += started.length;
    // Production's next call comes IDLE_SWEEP_EVERY_MS after the last, when the samples a call
    // left running have long finished; calling at once would find their slots taken and only
    // read the watches again. Each sample stores its watch last, so the count says when.
    let stored = await sampledSince(ds, at);
    for (const t = performance.now(); stored < samples && performance.now() - t < STRAGGLER_WAIT_MS;) {
      await pause(10);
      stored = await sampledSince(ds, at);
    }
    if (stored >= due) break;
  }
  const cpu = process.cpuUsage(cpu0);
  const wallS = (performance.now() - t0) / 1000;
  const s1 = await servers.stats();
  const server: ServerStats = {
    ...s1,
    connections: s1.connections - s0.connections,
    logins: s1.logins - s0.logins,
    sessions: s1.sessions - s0.sessions,
    commands: s1.commands - s0.commands,
    otherCommands: s1.otherCommands - s0.otherCommands,
    cpuMs: s1.cpuMs - s0.cpuMs,
  };
  return { samples, cpuMs: (cpu.user + cpu.system) / 1000, systemMs: cpu.system / 1000, wallS, calls, server };
}

/** What one size printed, for the verdict line. */
interface SizeResult {
  size: number;
  msPerSample: number[];
  cores: number[];
  /** CPU per sample at production's cadence: its calls that find nothing due, and the quiet between rounds, counted in. */
  paced: number[];
}

/** Cores that {@link FLEET} rentals sampled at this CPU per sample keep busy. */
const coresOf = (msPerSample: number) => (msPerSample * SAMPLES_PER_RENTAL_HOUR * FLEET) / 3_600_000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

async function measureSize(size: number, servers: Servers, keys: ReturnType<typeof keyPool>): Promise<SizeResult> {
  const url = new URL(process.env.BENCH_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/');
  url.pathname = `/gpu_rental_bench_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  const databaseUrl = url.toString();
  collect();
  const mem0 = process.memoryUsage();
  await createDatabaseIfMissing(databaseUrl);
  const ds = createDataSource(databaseUrl, 10, entities);
  let lifecycle: RentalLifecycle | undefined;
  try {
    await ds.initialize();
    await migrate(ds);
    const box = new SecretBox(new Map([['bench', randomBytes(32)]]), 'bench');
    const clock = new ManualClock();
    const t0 = performance.now();
    const seeded = await seedWatchedRentals(ds, {
      rentals: size,
      servers: servers.machines,
      keys,
      box,
      at: clock.now(),
    });
    const seedS = (performance.now() - t0) / 1000;
    lifecycle = lifecycleOn(ds, clock, box);
    const problems0 = logged.problems;
    const warm = await round(lifecycle, ds, clock, servers, seeded.rentals);
    const rounds: Round[] = [];
    for (let rep = 0; rep < REPS; rep++) rounds.push(await round(lifecycle, ds, clock, servers, seeded.rentals));
    // Production calls every IDLE_SWEEP_EVERY_MS whether or not anything is due: what such a call costs.
    const idle0 = process.cpuUsage();
    for (let i = 0; i < IDLE_CALLS; i++)
      if ((await lifecycle.watchIdle()).length > 0) throw new Error('a rental was due again within its round');
    const idleCall = process.cpuUsage(idle0);
    const idleCallMs = (idleCall.user + idleCall.system) / 1000 / IDLE_CALLS;
    // And between rounds the worker only keeps its connections: what that costs a second, after a
    // full collection and its background tail, so the one collection a round's garbage calls for
    // is not counted for the whole wait.
    collect();
    await pause(QUIET_MS);
    const quiet0 = process.cpuUsage();
    await pause(QUIET_MS);
    const quiet = process.cpuUsage(quiet0);
    const quietMsPerS = (quiet.user + quiet.system) / QUIET_MS;
    collect();
    const mem1 = process.memoryUsage();
    const [idle]: { n: string }[] = await ds.query(
      `SELECT COUNT(*) AS n FROM idle_watches WHERE idle_since IS NOT NULL`,
    );

    const perSample = rounds.map((r) => r.cpuMs / r.samples);
    const perRentalHour = perSample.map((ms) => ms * SAMPLES_PER_RENTAL_HOUR);
    const cores = perSample.map(coresOf);
    const paced = rounds.map(
      (r) =>
        (r.cpuMs +
          Math.max(0, CALLS_PER_PERIOD - r.calls) * idleCallMs +
          Math.max(0, SAMPLE_EVERY_MS / 1000 - r.wallS) * quietMsPerS) /
        r.samples,
    );
    const per = (f: (r: Round) => number) => rounds.map((r) => f(r) / r.samples);
    const kb = (bytes: number) => `${(bytes / 1024 / seeded.rentals).toFixed(2)} KB`;
    const line = (name: string, figure: string, goal: string) =>
      console.log(`    ${name.padEnd(44)} ${figure}  ${goal}`);
    console.log(
      `  ${seeded.rentals} rentals (seeded in ${seedS.toFixed(1)} s; warm-up round ${warm.wallS.toFixed(1)} s, ${(warm.cpuMs / warm.samples).toFixed(2)} ms of worker CPU per first sample):`,
    );
    line(
      'worker CPU per sample',
      spread(perSample, 3, ' ms'),
      `(goal: at most ${GOAL_MS_PER_SAMPLE} ms; in the kernel ${spread(
        rounds.map((r) => (100 * r.systemMs) / r.cpuMs),
        0,
        ' %',
      )})`,
    );
    line(
      'worker CPU per rental-hour',
      spread(perRentalHour, 1, ' ms'),
      `(${SAMPLES_PER_RENTAL_HOUR} samples per rental-hour; goal: at most ${(GOAL_CORES * 3_600_000) / FLEET} ms, from the cores goal)`,
    );
    line(
      `cores for ${FLEET} rentals, one-hour windows`,
      spread(cores, 3),
      `(goal: at most ${GOAL_CORES}${size === FLEET ? '' : `; from this size's CPU per sample`})`,
    );
    line(
      'the same at production’s cadence',
      `${spread(paced, 3, ' ms')} per sample, ${spread(paced.map(coresOf), 3)} cores`,
      `(a call every ${IDLE_SWEEP_EVERY_MS / 1000} s, ${CALLS_PER_PERIOD} per sample period, one with nothing due ${idleCallMs.toFixed(2)} ms; between rounds ${quietMsPerS.toFixed(2)} ms a second)`,
    );
    line(
      'logins per sample',
      spread(
        per((r) => r.server.logins),
        3,
      ),
      '(no goal; 1 = a fresh login each sample)',
    );
    line(
      'TCP connections per sample',
      spread(
        per((r) => r.server.connections),
        3,
      ),
      `(no goal; most open at once on the servers: ${spread(
        rounds.map((r) => r.server.maxOpen),
        0,
      )})`,
    );
    line(
      'wall time per round (every rental once)',
      spread(
        rounds.map((r) => r.wallS),
        2,
        ' s',
      ),
      `(no goal; watchIdle() calls per round ${spread(
        rounds.map((r) => r.calls),
        0,
      )}, production calls it every ${IDLE_SWEEP_EVERY_MS / 1000} s)`,
    );
    line(
      'wall time per watchIdle() call',
      spread(
        rounds.map((r) => (r.wallS * 1000) / r.calls),
        0,
        ' ms',
      ),
      `(no goal; a call waits at most ${SWEEP_WAIT_MS} ms)`,
    );
    line(
      'memory per rental after the sweeps',
      `RSS ${kb(mem1.rss - mem0.rss)}, heap ${kb(mem1.heapUsed - mem0.heapUsed)}`,
      '(no goal; after the rounds minus before seeding, after a full GC)',
    );
    line(
      'SSH servers’ CPU per sample (not the worker’s)',
      spread(
        per((r) => r.server.cpuMs),
        3,
        ' ms',
      ),
      '',
    );
    const answered = rounds.every((r) => r.server.commands >= r.samples && r.server.otherCommands === 0);
    if (!answered)
      console.log(
        `    NOTE: commands the servers answered per round ${rounds.map((r) => r.server.commands).join(', ')} vs samples ${rounds.map((r) => r.samples).join(', ')}: some samples did not reach their machine (BENCH_LOG_LEVEL=debug says why)`,
      );
    if (Number(idle.n) !== seeded.idle)
      console.log(`    NOTE: ${idle.n} watches stand idle, ${seeded.idle} rentals sit on idle machines`);
    if (logged.problems > problems0)
      console.log(`    NOTE: the lifecycle logged ${logged.problems - problems0} warnings, first: ${logged.first}`);
    if (queuedJobs > 0) console.log(`    NOTE: ${queuedJobs} jobs queued (rentals ended for idling)`);
    return { size: seeded.rentals, msPerSample: perSample, cores, paced };
  } finally {
    // The next size starts with none of this one's connections (a lifecycle that keeps none has no such set).
    lifecycle?.idleSessions?.close();
    for (const t = performance.now(); (await servers.stats()).open > 0 && performance.now() - t < 10_000;)
      await pause(50);
    if (ds.isInitialized) await ds.destroy();
    await dropDatabase(databaseUrl);
  }
}

async function main(): Promise<void> {
  const servers = await startServers(SERVERS);
  const t0 = performance.now();
  const keys = keyPool(KEY_POOL);
  const keyS = (performance.now() - t0) / 1000;
  console.log(
    `idle sampling: ${RENTALS_PER_ACCOUNT} watched rentals per account with one-hour windows (a sample every ${SAMPLE_EVERY_MS / 60_000} min, ${SAMPLES_PER_RENTAL_HOUR} per rental-hour), ` +
      `on ${SERVERS} loopback SSH servers in their own process (half answer idle GPUs, half a busy one), ` +
      `keys from a pool of ${KEY_POOL} (made in ${keyS.toFixed(1)} s); the sweep samples ${PARALLEL_SAMPLES} at once and waits ${SWEEP_WAIT_MS} ms per call; ` +
      `${REPS} rounds after one warm-up round, MariaDB`,
  );
  console.log(`  open files: worker ${openFilesLimit()}; servers ${servers.openFiles}`);
  const results: SizeResult[] = [];
  for (const size of SIZES) {
    try {
      results.push(await measureSize(size, servers, keys));
    } catch (err) {
      console.log(`  ${size} rentals: not run here: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (results.length === 0) return;
  const verdict = (name: string, goal: number, unit: string, of: (r: SizeResult) => number[]) =>
    results
      .map(
        (r) =>
          `${name} at ${r.size}: ${median(of(r)) <= goal ? 'meets' : 'misses'} (${median(of(r)).toFixed(3)}${unit})`,
      )
      .join('; ');
  console.log(
    `  goals, by the median: ${verdict(`≤ ${GOAL_MS_PER_SAMPLE} ms per sample`, GOAL_MS_PER_SAMPLE, ' ms', (r) => r.msPerSample)}; ` +
      `${verdict(`≤ ${GOAL_CORES} of a core for ${FLEET}`, GOAL_CORES, '', (r) => r.cores)}; at production's cadence: ` +
      `${verdict(`≤ ${GOAL_MS_PER_SAMPLE} ms per sample`, GOAL_MS_PER_SAMPLE, ' ms', (r) => r.paced)}; ` +
      verdict(`≤ ${GOAL_CORES} of a core`, GOAL_CORES, '', (r) => r.paced.map(coresOf)),
  );
}

runBench(main);
