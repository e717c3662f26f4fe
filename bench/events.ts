/*
 * Push at scale: S event streams (GET /api/v1/events as SSE) and W waiting reads
 * (GET /api/v1/rentals/{id}?waitFor=...) held on ONE api process (dist/src/main.js --role api,
 * NODE_ENV=production, heartbeats and the event tail at their defaults), from ONE load process
 * (bench/events-load.ts), on a fresh database per size with K = S / BENCH_STREAMS_PER_KEY keys
 * (stream i on key i mod K, so every key listens from the first S/10 streams on), each with a
 * rental or two that the waiting reads wait on for a status it never reaches (each read ends at its
 * 30 s bound and the load process sends it again, as a long-polling client does).
 *
 * Each repetition starts a fresh api process, takes its code paths once at a small size (so its
 * baseline holds their compiled code), then measures, of the api process alone:
 *   memory per stream      RSS (and V8 heap) after a GC with S streams open, less the same with
 *                          none, ÷ the streams the api holds; the same for the waiting reads on top
 *   statements per tail interval (250 ms), counted on the api's own mysql2 connections by a probe
 *                          preloaded into it, over BENCH_DB_WINDOW_MS with 0, S/10 and S streams
 *                          listening (no other request in flight), and with the waiting reads too
 *   commit → arrival       events committed through the events repository in one pipelined
 *                          transaction by this process, one per key (every stream gets one) and one
 *                          for a single key (its streams), from the commit's return to each frame's
 *                          arrival in the load process, on the same clock, heartbeats flowing: once
 *                          with the S streams alone, once with the W waiting reads held too
 * Every figure is min / median / max over BENCH_REPS repetitions, printed beside its goal.
 *
 * Each stream and waiting read is a socket in both children. Their open-file limit is this
 * process's hard limit (printed); where S + W and the api's reserve need more and prlimit cannot
 * raise it (CAP_SYS_RESOURCE), W is lowered to what fits and the output says so, and a size whose
 * streams alone do not fit is not run, with the reason.
 *
 *   npm run bench:events   # BENCH_SIZES=1000,10000 (S at each size; W = S × BENCH_WAITS / BENCH_STREAMS)
 *                          # BENCH_STREAMS=10000 BENCH_WAITS=10000 BENCH_STREAMS_PER_KEY=10 BENCH_REPS=3
 *                          # BENCH_COMMITS=3 (one event per key) BENCH_SINGLE_COMMITS=10 BENCH_DB_WINDOW_MS=5000
 *                          # BENCH_OPEN_RATE=1000 (waiting reads started per second)
 *                          # BENCH_PROFILE=<dir> (a V8 CPU profile of each api process, written as it exits)
 */
import { readdirSync } from 'node:fs';
import { PUSH_FILE_RESERVE } from '../src/http/push-limits.js';
import {
  canRaiseFiles,
  ensureBuilt,
  fileLimits,
  startApi,
  startLoad,
  type ApiProcess,
  type Ipc,
} from './events-api.js';
import { report, type DbWindow, type Rep, type SizeResult } from './events-report.js';
import { EventWriter, seedKeys, type SeededKey } from './events-seed.js';
import type { LoadMessage, LoadRequest, ProbeStats } from './events-types.js';
import { runBench } from './processes.js';
import { startBenchApp, type BenchApp } from './support.js';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const STREAMS = env('BENCH_STREAMS', 10_000);
const WAITS = env('BENCH_WAITS', 10_000);
const SIZES = [...new Set((process.env.BENCH_SIZES ?? `1000,${STREAMS}`).split(',').map(Number))];
const PER_KEY = env('BENCH_STREAMS_PER_KEY', 10);
const REPS = env('BENCH_REPS', 3);
const COMMITS = env('BENCH_COMMITS', 3);
const SINGLES = env('BENCH_SINGLE_COMMITS', 10);
const WINDOW_MS = env('BENCH_DB_WINDOW_MS', 5000);
const OPEN_RATE = env('BENCH_OPEN_RATE', 1000);
/** The event hub's tail interval and the streams' heartbeat, as the service has them (src/container.ts, src/app.ts). */
const TAIL_MS = 250;
const HEARTBEAT_S = 15;
/** The longest a waiting read may wait (the routes' bound): they must stay held through the measurement. */
const WAIT_SECONDS = 30;
/** How long a commit's events may take to reach every stream before the missing ones count as never arriving. */
const ARRIVAL_TIMEOUT_MS = 60_000;
/** How long into the streams' life (the api ends them at 5 minutes) the measurement may go on. */
const STREAM_LIFE_MS = 270_000;
/** Streams and waiting reads of the warm-up each repetition begins with. */
const WARM = 50;
/** Places and descriptors beyond S + W: a waiting read sent again before the api has let go of the last one. */
const MARGIN = 64;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The descriptors process `pid` has open now. */
const openFiles = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
type Load = Ipc<LoadRequest, LoadMessage>;
const counters = async (load: Load) => (await load.ask({ type: 'counters' }, 'counters')).counters;

/** Polls the api's probe until `test` holds; the last answer, or an error after `timeoutMs`. */
async function until(api: ApiProcess, test: (s: ProbeStats) => boolean, what: string, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await api.probe();
    if (test(s)) return s;
    if (Date.now() > deadline)
      throw new Error(`${what}: not within ${timeoutMs / 1000} s (${JSON.stringify(s.inflight)})`);
    await pause(200);
  }
}

const TAIL = /^SELECT \* FROM events WHERE id > /;
const REVOCATION = /^SELECT id FROM api_keys WHERE id IN \(\?\) AND revoked_at/;
type Counts = Pick<ProbeStats, 'byKind'>;
const count = (a: Counts, b: Counts, test: (kind: string) => boolean) =>
  Object.entries(b.byKind).reduce((n, [k, v]) => n + (test(k) ? v - (a.byKind[k] ?? 0) : 0), 0);
const outsideHub = (a: Counts, b: Counts) => count(a, b, (k) => !TAIL.test(k) && !REVOCATION.test(k));

/**
 * The api's statements over about BENCH_DB_WINDOW_MS: per 250 ms of the window, and per tick of the
 * hub over the whole ticks in it (from the probe's marks at the tail reads, so no tick is cut in two).
 */
async function dbWindow(api: ApiProcess): Promise<DbWindow> {
  const a = await api.probe();
  const started = performance.now();
  await pause(WINDOW_MS);
  const b = await api.probe();
  const ms = performance.now() - started;
  const ticks = b.mark.tails - a.mark.tails;
  const per = (n: number) => (ticks > 0 ? n / ticks : NaN);
  return {
    perInterval: (b.statements - a.statements) / (ms / TAIL_MS),
    perTick: per(b.mark.statements - a.mark.statements),
    hubPerTick: per(count(a.mark, b.mark, (k) => TAIL.test(k) || REVOCATION.test(k))),
    revocationPerTick: per(count(a.mark, b.mark, (k) => REVOCATION.test(k))),
    ticksPerS: ticks / (ms / 1000),
  };
}

/** Until nothing is open and the hub has stopped ticking (a waiting read whose client left listens until its wait ends). */
async function hubIdle(api: ApiProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (let a = await api.probe(); ;) {
    await pause(TAIL_MS * 3);
    const b = await api.probe();
    if (b.inflight.streams + b.inflight.waits === 0 && b.mark.tails === a.mark.tails) return;
    if (Date.now() > deadline) throw new Error('the hub still listens 60 s after everything closed');
    a = b;
  }
}

/** Arrival latencies of commits of `pick()`'s keys, each after a random pause, while `more(commitsSoFar)`. */
async function commitRounds(
  load: Load,
  writer: EventWriter,
  more: (done: number) => boolean,
  pick: () => SeededKey[],
  gapMs: number,
): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; more(i); i++) {
    await pause(gapMs * (0.5 + Math.random()));
    const { commitAt, seqs } = await writer.commit(pick());
    // Waiting for every arrival lets the next commit start with nothing left over from this one.
    const r = await load.ask({ type: 'expect', commitAt, seqs, timeoutMs: ARRIVAL_TIMEOUT_MS }, 'arrivals');
    // A frame that never came is later than any that did: it stays in the percentiles, as Infinity.
    latencies.push(...r.latencies, ...new Array<number>(r.missing).fill(Number.POSITIVE_INFINITY));
  }
  return latencies;
}

/**
 * BENCH_COMMITS commits of one event per key, then BENCH_SINGLE_COMMITS of a single key's event,
 * ending early once the streams near the api's 5-minute bound (past it they reconnect, and the
 * figures would be of reconnection).
 */
async function arrivalPhase(load: Load, writer: EventWriter, keys: SeededKey[], streamsSince: number) {
  const young = () => performance.now() - streamsSince < STREAM_LIFE_MS;
  const burst = await commitRounds(
    load,
    writer,
    (i) => i < COMMITS && young(),
    () => keys,
    1000,
  );
  const single = await commitRounds(
    load,
    writer,
    (i) => i < SINGLES && young(),
    () => [keys[Math.floor(Math.random() * keys.length)]],
    300,
  );
  return { burst, single, cut: !young() };
}

interface Setting {
  app: BenchApp;
  load: Load;
  writer: EventWriter;
  keys: SeededKey[];
  streams: number;
  waits: number;
  push: Parameters<typeof startApi>[0]['push'];
  files: number | null;
}

/** One repetition on a fresh api process. */
async function repetition(o: Setting): Promise<Rep> {
  const { load, writer, keys } = o;
  const api = await startApi({
    databaseUrl: o.app.databaseUrl,
    inventoryPath: o.app.inventoryPath,
    push: o.push,
    files: o.files,
  });
  try {
    await load.ask({ type: 'setup', base: api.base, keys, openRate: OPEN_RATE }, 'setup-done');
    // Every code path once, so the baseline below holds their compiled code and loaded modules.
    await load.ask({ type: 'streams', total: Math.min(WARM, o.streams) }, 'streams-open');
    await load.ask({ type: 'waits', total: Math.min(WARM, o.waits), waitSeconds: 1 }, 'waits-sent');
    await commitRounds(
      load,
      writer,
      (i) => i < 2,
      () => keys,
      100,
    );
    await load.ask({ type: 'close' }, 'closed');
    await hubIdle(api);
    const start = await counters(load);

    const before = await api.probe({ gc: true });
    const db = { none: await dbWindow(api) } as Rep['db'];
    const streamsSince = performance.now();
    await load.ask({ type: 'streams', total: Math.ceil(o.streams / 10) }, 'streams-open');
    await pause(1000);
    db.tenth = await dbWindow(api);
    const s0 = await api.probe();
    const opened = await load.ask({ type: 'streams', total: o.streams }, 'streams-open');
    await until(api, (s) => s.inflight.streams >= o.streams, 'streams held by the api');
    await pause(1000);
    const streams = await api.probe({ gc: true });
    db.full = await dbWindow(api);
    const c0 = await counters(load);
    const t0 = performance.now();
    await api.probe({ resetLoop: true });
    const streamsOnly = await arrivalPhase(load, writer, keys, streamsSince);
    const loopStreams = (await api.probe()).loop;

    const w0 = await api.probe();
    const sent = await load.ask({ type: 'waits', total: o.waits, waitSeconds: WAIT_SECONDS }, 'waits-sent');
    await until(api, (s) => s.inflight.waits >= o.waits * 0.98, 'waiting reads held by the api');
    await pause(2000);
    const waits = await api.probe({ gc: true });
    const files = { api: openFiles(api.pid), load: openFiles(load.child.pid!) };
    db.waits = await dbWindow(api);

    await api.probe({ resetLoop: true });
    const withWaits = await arrivalPhase(load, writer, keys, streamsSince);
    const loopWaits = (await api.probe()).loop;
    const c2 = await counters(load);
    const failures = Object.fromEntries(
      Object.entries(c2.failures)
        .map(([k, v]) => [k, v - (start.failures[k] ?? 0)] as const)
        .filter(([, v]) => v > 0),
    );
    return {
      streams: streams.inflight.streams,
      waits: waits.inflight.waits,
      openStreamsS: opened.ms / 1000,
      openWaitsS: sent.ms / 1000,
      memory: { before: before.memory, streams: streams.memory, waits: waits.memory },
      db,
      perStreamOpened: outsideHub(s0, streams) / (streams.received.streams - s0.received.streams),
      perWaitSent: o.waits ? outsideHub(w0, waits) / (waits.received.waits - w0.received.waits) : NaN,
      arrivals: { streams: streamsOnly, waits: withWaits },
      cut: streamsOnly.cut || withWaits.cut,
      heartbeatsPerS: (c2.heartbeats - c0.heartbeats) / ((performance.now() - t0) / 1000),
      loop: { streams: loopStreams, waits: loopWaits },
      reopened: c2.streamsReopened - start.streamsReopened,
      files,
      failures,
    };
  } finally {
    await load.ask({ type: 'close' }, 'closed');
    await api.close();
  }
}

/** S and W at `size`, lowered or refused when this machine's open-file limit cannot hold them; the limit to start children under. */
function fit(size: number): { streams: number; waits: number; files: number | null; note?: string; skip?: string } {
  const streams = size;
  let waits = Math.round((size * WAITS) / STREAMS);
  const { soft, hard } = fileLimits();
  // Each stream and waiting read is a socket in both processes; the api keeps PUSH_FILE_RESERVE more free.
  const needs = (w: number) => streams + w + PUSH_FILE_RESERVE + MARGIN;
  console.log(
    `  open files: soft ${soft}, hard ${hard} (the api and the load process inherit them; Node raises soft to hard)`,
  );
  if (needs(waits) <= hard) return { streams, waits, files: null };
  const why = canRaiseFiles(needs(waits));
  if (why === null) {
    console.log(`  open files raised to ${needs(waits)} for both children (prlimit)`);
    return { streams, waits, files: needs(waits) };
  }
  const room = hard - PUSH_FILE_RESERVE - MARGIN - streams;
  const reason = `${streams} streams + ${waits} waiting reads + ${PUSH_FILE_RESERVE + MARGIN} other files need ${needs(waits)} open files in the api, above the hard limit ${hard}, which cannot be raised here (${why})`;
  if (room < 0) return { streams, waits, files: null, skip: reason };
  waits = room;
  return { streams, waits, files: null, note: `${reason}: waiting reads lowered to ${waits}` };
}

async function runSize(size: number): Promise<SizeResult | string> {
  console.log(`\nsize ${size}`);
  const f = fit(size);
  if (f.skip) return `size ${size} not run: ${f.skip}`;
  if (f.note) console.log(`  ${f.note}`);
  const { streams, waits } = f;
  const keyCount = Math.ceil(streams / PER_KEY);
  const app = await startBenchApp();
  let load: Load | undefined;
  try {
    let t = performance.now();
    const keys = await seedKeys(app, keyCount);
    console.log(
      `  seeded ${keyCount} accounts, each an agent key and a rental or two, in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
    const push = {
      PUSH_MAX_PER_KEY: String(Math.ceil((streams + waits) / keyCount) + 4),
      PUSH_MAX_PER_ADDRESS: String(streams + waits + MARGIN),
      PUSH_MAX_OPEN: String(streams + waits + MARGIN),
    };
    console.log(
      `  api: ${Object.entries(push)
        .map(([k, v]) => `${k}=${v}`)
        .join(', ')} (PUSH_MAX_PER_ADDRESS raised from its default 200: the whole load comes from 127.0.0.1)`,
    );
    load = await startLoad<LoadRequest, LoadMessage>(f.files);
    const writer = new EventWriter(app);
    await writer.begin();
    const reps: Rep[] = [];
    for (let i = 0; i < REPS; i++) {
      t = performance.now();
      const r = await repetition({ app, load, writer, keys, streams, waits, push, files: f.files });
      reps.push(r);
      console.log(
        `  rep ${i + 1}: ${((performance.now() - t) / 1000).toFixed(1)} s${r.cut ? ' (commits cut short: the streams neared their 5-minute bound)' : ''}; ${r.streams} streams opened in ${r.openStreamsS.toFixed(1)} s, ${r.waits} waiting reads held (sent in ${r.openWaitsS.toFixed(1)} s); open files then: api ${r.files.api}, load ${r.files.load}; ${r.reopened} streams reopened; failures ${JSON.stringify(r.failures)}`,
      );
    }
    return { size, keys: keyCount, perKey: PER_KEY, reps, streams, waits, note: f.note };
  } finally {
    load?.child.kill('SIGTERM');
    await app.close();
  }
}

async function main(): Promise<void> {
  ensureBuilt();
  console.log(
    `bench:events: sizes ${SIZES.join(', ')} (S streams and W = S × ${WAITS}/${STREAMS} waiting reads each), ${REPS} repetitions, ` +
      `tail every ${TAIL_MS} ms, heartbeats every ${HEARTBEAT_S} s, waiting reads of ${WAIT_SECONDS} s sent again as they end`,
  );
  console.log(
    "statements: counted on the api process's own mysql2 connections (a probe preloaded into it) over " +
      `${WINDOW_MS} ms windows; memory: the api's process.memoryUsage() after a full GC`,
  );
  console.log(
    `streams go round-robin over the keys (${PER_KEY} each at S), so all of them listen from S/10 on: the hub's ` +
      'revocation check is one statement per 500 listening keys, whatever the streams per key',
  );
  // Each size's figures as soon as it is done, so a later size that fails leaves them printed.
  const verdicts: string[] = [];
  for (const size of SIZES) {
    const r = await runSize(size);
    if (typeof r === 'string') console.log(`\n${r}`);
    else report(r, { heartbeatS: HEARTBEAT_S, arrivalTimeoutS: ARRIVAL_TIMEOUT_MS / 1000 }, verdicts);
  }
  console.log('\ngoals (judged on the worst repetition):');
  for (const v of verdicts) console.log(`  ${v}`);
  const met = verdicts.filter((v) => v.startsWith('meets')).map((v) => v.slice('meets: '.length));
  console.log(`meet their goal: ${met.length ? met.join('; ') : 'none'}`);
}

runBench(main);
