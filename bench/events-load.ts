/*
 * The load process of bench/events.ts: holds event streams (GET /api/v1/events as SSE, each on a
 * connection of its own) and waiting reads (GET /api/v1/rentals/{id}?waitFor=..., each sent again
 * as soon as it is answered, as a long-polling client does) against one api process, and notes
 * when each stream's frames arrive, on the clock the bench reads the commits on
 * (performance.timeOrigin + performance.now(), the same machine's clock in both processes).
 */
import { Agent, request, type ClientRequest } from 'node:http';
import type { LoadCounters, LoadKey, LoadMessage, LoadRequest } from './events-types.js';
import { exitWithParent } from './processes.js';

const now = () => performance.timeOrigin + performance.now();
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Stream opens waiting for their headers at once: the api's accept queue holds 511. */
const OPENING = 128;
/** What the waiting reads wait for: a status no rental of the bench reaches, so each ends at its bound. */
const WAIT_FOR = 'TERMINATED';

let base = '';
let keys: LoadKey[] = [];
let openRate = 1000;
const counters: LoadCounters = {
  openStreams: 0,
  heartbeats: 0,
  frames: 0,
  streamsReopened: 0,
  waitsAnswered: 0,
  failures: {},
};
const failed = (why: string) => (counters.failures[why] = (counters.failures[why] ?? 0) + 1);

class Stream {
  /** Arrival time of each event id (its account's number) received since the last commit was reckoned. */
  readonly seen = new Map<string, number>();
  private lastId: string | undefined;
  private rest = '';
  private req: ClientRequest | undefined;
  wanted = true;

  constructor(readonly key: LoadKey) {}

  /** Resolves once the stream has its headers (true) or was refused or failed (false). */
  open(): Promise<boolean> {
    return new Promise((resolve) => {
      const headers: Record<string, string> = { Authorization: this.key.auth, Accept: 'text/event-stream' };
      if (this.lastId) headers['Last-Event-ID'] = this.lastId;
      const req = request(`${base}/api/v1/events`, { agent: false, headers }, (res) => {
        if (res.statusCode !== 200) {
          failed(`stream ${res.statusCode}`);
          res.resume();
          resolve(false);
          return;
        }
        counters.openStreams++;
        resolve(true);
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => this.read(chunk));
        res.once('close', () => {
          counters.openStreams--;
          if (this.wanted) {
            counters.streamsReopened++;
            void this.reopen();
          }
        });
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (this.wanted) failed(`stream ${err.code ?? 'error'}`);
        resolve(false);
      });
      req.end();
      this.req = req;
    });
  }

  /** Opens it, trying again each second while it is refused (as a reconnecting client does). */
  async reopen(): Promise<void> {
    while (this.wanted && !(await this.open())) await pause(1000);
  }

  private read(chunk: string): void {
    const at = now();
    let text = this.rest + chunk;
    let end: number;
    while ((end = text.indexOf('\n\n')) >= 0) {
      const frame = text.slice(0, end);
      text = text.slice(end + 2);
      if (frame.startsWith(':')) {
        counters.heartbeats++;
        continue;
      }
      const id = /^id: (\d+)$/m.exec(frame)?.[1];
      if (id === undefined) continue;
      counters.frames++;
      this.lastId = id;
      this.seen.set(id, at);
      if (expecting?.seqs[this.key.accountId] === id && --expecting.remaining === 0) expecting.done();
    }
    this.rest = text;
  }

  close(): void {
    this.wanted = false;
    this.req?.destroy();
  }
}

const streams: Stream[] = [];
const waitAgent = new Agent({ keepAlive: true });
/** A waiting-read slot: the read it has out, sent again as it is answered while wanted. */
interface WaitSlot {
  wanted: boolean;
  seconds: number;
  req?: ClientRequest;
}
const waits: WaitSlot[] = [];

/** Waiting reads sent and not yet answered (or failed). */
let waitsOut = 0;

/** Sends the slot's waiting read, and again whenever it is answered, until the slot is closed. */
function holdWait(slot: WaitSlot, key: LoadKey, sent: () => void): void {
  const path = `/api/v1/rentals/${key.rentalId}?waitFor=${WAIT_FOR}&waitSeconds=${slot.seconds}`;
  let done = false;
  const settle = (ok: boolean, why: string, resend = false) => {
    if (done) return;
    done = true;
    waitsOut--;
    if (!slot.wanted) return;
    if (ok) counters.waitsAnswered++;
    else failed(why);
    setTimeout(() => holdWait(slot, key, () => {}), ok || resend ? 0 : 1000);
  };
  waitsOut++;
  const req = request(`${base}${path}`, { agent: waitAgent, headers: { Authorization: key.auth } }, (res) => {
    res.resume();
    res.once('end', () => settle(res.statusCode === 200, `wait ${res.statusCode}`));
    res.once('error', (err: NodeJS.ErrnoException) => settle(false, `wait ${err.code ?? 'error'}`));
  });
  req.once('finish', sent);
  req.on('error', (err: NodeJS.ErrnoException) => {
    // A kept-alive socket the api closed as idle just as the read left: the client's race, not an
    // answer (as admission-load.ts has it), so the read is sent again at once on a new one.
    if (req.reusedSocket && err.code === 'ECONNRESET') settle(false, 'wait resent: idle socket closed', true);
    else settle(false, `wait ${err.code ?? 'error'}`);
  });
  req.on('close', () => settle(false, 'wait closed'));
  req.end();
  slot.req = req;
}

async function openStreams(total: number): Promise<LoadMessage> {
  const started = performance.now();
  const before = { ...counters.failures };
  let next = streams.length;
  const opener = async () => {
    while (next < total) {
      const s = new Stream(keys[next++ % keys.length]);
      streams.push(s);
      await s.reopen();
    }
  };
  await Promise.all(Array.from({ length: OPENING }, opener));
  const failures = Object.fromEntries(
    Object.entries(counters.failures)
      .map(([k, v]) => [k, v - (before[k] ?? 0)] as const)
      .filter(([, v]) => v > 0),
  );
  return { type: 'streams-open', open: counters.openStreams, ms: performance.now() - started, failures };
}

async function openWaits(total: number, seconds: number): Promise<LoadMessage> {
  const started = performance.now();
  const sends: Promise<void>[] = [];
  const from = waits.length;
  for (let i = from; i < total; i++) {
    // Paced, so the api's accept queue is never what refuses them.
    const due = started + ((i - from) * 1000) / openRate;
    if (due > performance.now()) await pause(due - performance.now());
    const slot: WaitSlot = { wanted: true, seconds };
    waits.push(slot);
    sends.push(new Promise<void>((sent) => holdWait(slot, keys[i % keys.length], sent)));
  }
  await Promise.all(sends);
  return { type: 'waits-sent', sent: waits.length, ms: performance.now() - started };
}

/** Closes every stream and waiting read (the api lets go of a waiting read's listening when its wait ends). */
async function closeAll(): Promise<void> {
  for (const s of streams.splice(0)) s.close();
  for (const w of waits.splice(0)) {
    w.wanted = false;
    w.req?.destroy();
  }
  while (counters.openStreams > 0 || waitsOut > 0) await pause(20);
}

/** The commit being reckoned: how many of its streams still wait for their event. */
let expecting: { seqs: Record<string, string>; remaining: number; done: () => void } | undefined;

/** Waits until every stream of the accounts in `seqs` has its event (or `timeoutMs` passes); the latencies. */
async function arrivals(commitAt: number, seqs: Record<string, string>, timeoutMs: number): Promise<LoadMessage> {
  const watching = streams.filter((s) => seqs[s.key.accountId] !== undefined);
  // Counted down as frames arrive (some may have before this message did), not polled.
  const remaining = watching.filter((s) => !s.seen.has(seqs[s.key.accountId])).length;
  if (remaining > 0) {
    await new Promise<void>((done) => {
      const timer = setTimeout(done, timeoutMs);
      expecting = { seqs, remaining, done: () => (clearTimeout(timer), done()) };
    });
    expecting = undefined;
  }
  const latencies: number[] = [];
  let missing = 0;
  for (const s of watching) {
    const at = s.seen.get(seqs[s.key.accountId]);
    if (at === undefined) missing++;
    else latencies.push(at - commitAt);
  }
  for (const s of streams) s.seen.clear();
  return { type: 'arrivals', latencies, missing };
}

async function handle(m: LoadRequest): Promise<LoadMessage> {
  switch (m.type) {
    case 'setup':
      ({ base, keys, openRate } = m);
      return { type: 'setup-done' };
    case 'streams':
      return openStreams(m.total);
    case 'waits':
      return openWaits(m.total, m.waitSeconds);
    case 'close':
      await closeAll();
      return { type: 'closed' };
    case 'counters':
      return { type: 'counters', counters: { ...counters, failures: { ...counters.failures } } };
    case 'expect':
      return arrivals(m.commitAt, m.seqs, m.timeoutMs);
  }
}

exitWithParent();
// The IPC channel no longer holds the process open (exitWithParent), and between phases nothing else may.
setInterval(() => {}, 1 << 30);
process.on('message', (m: LoadRequest) => {
  handle(m).then(
    (answer) => process.send!(answer),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
});
process.send!({ type: 'ready' } satisfies LoadMessage);
