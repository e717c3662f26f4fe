/*
 * The HTTP side of `bench:rentals` and `bench:metering`: admissions over keep-alive connections,
 * one connection per client (account), each sending its next request when the last is answered,
 * all at once. It runs autocannon in a worker thread of its own, out of the server's thread like
 * a real caller, as bench:http does: the server's event loop carries only the service, and the
 * client costs the shared cores as little as a client can.
 */
import autocannon from 'autocannon';
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { parentPort, Worker, workerData } from 'node:worker_threads';
import { ownWorker } from './processes.js';

/** What the load worker is asked to do. */
export interface LoadJob {
  base: string;
  /** One Authorization header per client; each client gets a connection of its own. */
  auths: string[];
  perClient: number;
  body: object;
  /** Requests per second across all clients, evenly spaced (open loop); unset, each client sends as fast as it is answered. */
  rate?: number;
}

/** What it measured: one latency (ms) per request, and the failures by status code. */
export interface LoadResult {
  latencies: number[];
  failures: Record<string, number>;
  seconds: number;
}

let loadWorker: Worker | undefined;

/**
 * Runs `job` in the load worker thread and resolves with its measurements. The one worker serves
 * every phase of the bench: started afresh per phase, its start (tsx, autocannon) and its code not
 * yet optimised by the JIT would be charged to the shared cores during the very phase measured.
 */
export function runLoad(job: LoadJob): Promise<LoadResult> {
  if (!loadWorker) {
    // The worker runs this same file, so it registers tsx's loader first, as the parent has.
    const boot = `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(import.meta.url)}); })`;
    loadWorker = ownWorker(new Worker(boot, { eval: true, workerData: { loadWorker: true } }));
    // Idle between phases, it does not keep the bench alive.
    loadWorker.unref();
  }
  const w = loadWorker;
  return new Promise((resolve, reject) => {
    const done = () => {
      w.off('message', answered);
      w.off('error', failed);
      w.off('exit', exited);
      w.unref();
    };
    const answered = (r: LoadResult) => (done(), resolve(r));
    const failed = (err: Error) => (done(), (loadWorker = undefined), reject(err));
    const exited = (code: number) => (
      done(),
      (loadWorker = undefined),
      reject(new Error(`load worker exited with ${code}`))
    );
    w.ref();
    w.on('message', answered);
    w.on('error', failed);
    w.on('exit', exited);
    w.postMessage(job);
  });
}

/**
 * One POST on a keep-alive agent; resolves with the status code once the answer is read. A reused
 * socket the server closed as idle just as the request left is the client's race, not an answer
 * of the server: that request is sent again, with the same Idempotency-Key (as Node's documentation
 * advises for the race; the key makes a repeat harmless even if the server had read it).
 */
function post(
  agent: Agent,
  url: URL,
  auth: string,
  body: string,
  key = randomUUID(),
  retried = false,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          Authorization: auth,
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
          'Idempotency-Key': key,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!retried && req.reusedSocket && err.code === 'ECONNRESET')
        post(agent, url, auth, body, key, true).then(resolve, reject);
      else reject(err);
    });
    req.end(body);
  });
}

/**
 * Open loop at `job.rate` requests per second, evenly spaced (autocannon's rate limit sends each
 * second's quota in a burst). A latency runs from when the request was due, not when it left,
 * so a server that falls behind is charged for the wait it causes.
 */
async function paced(job: LoadJob & { rate: number }): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: job.auths.length * 2 });
  const url = new URL('/api/v1/rentals', job.base);
  const body = JSON.stringify(job.body);
  const total = job.auths.length * job.perClient;
  const interval = 1000 / job.rate;
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  const inflight: Promise<void>[] = [];
  const started = performance.now();
  let lastAnswer = started;
  const fire = (i: number) => {
    const due = started + i * interval;
    inflight.push(
      post(agent, url, job.auths[i % job.auths.length], body).then(
        (status) => {
          lastAnswer = performance.now();
          latencies.push(lastAnswer - due);
          if (status !== 201) failures[String(status)] = (failures[String(status)] ?? 0) + 1;
        },
        () => void (failures['no answer'] = (failures['no answer'] ?? 0) + 1),
      ),
    );
  };
  let sent = 0;
  await new Promise<void>((done) => {
    const tick = () => {
      const dueNow = Math.min(total, Math.floor((performance.now() - started) / interval) + 1);
      while (sent < dueNow) fire(sent++);
      if (sent < total) setTimeout(tick, Math.max(0, started + sent * interval - performance.now()));
      else done();
    };
    tick();
  });
  await Promise.all(inflight);
  agent.destroy();
  return { latencies, failures, seconds: (lastAnswer - started) / 1000 };
}

async function work(job: LoadJob): Promise<LoadResult> {
  if (job.rate) return paced({ ...job, rate: job.rate });
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  let next = 0;
  const started = performance.now();
  // autocannon notices `amount` is reached only at its next one-second tick, so the phase ends at
  // the last answer, not when autocannon returns.
  let lastAnswer = started;
  const result = await autocannon({
    url: new URL('/api/v1/rentals', job.base).toString(),
    method: 'POST',
    connections: job.auths.length,
    amount: job.auths.length * job.perClient,
    // Every request a new Idempotency-Key: autocannon puts a unique id where `[<id>]` stands.
    idReplacement: true,
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': '[<id>]' },
    body: JSON.stringify(job.body),
    timeout: 30,
    setupClient: (client) => {
      client.setHeaders({
        'Content-Type': 'application/json',
        'Idempotency-Key': '[<id>]',
        Authorization: job.auths[next++ % job.auths.length],
      });
      client.on('response', (status: number, _bytes: number, ms: number) => {
        latencies.push(ms);
        lastAnswer = performance.now();
        if (status !== 201) failures[String(status)] = (failures[String(status)] ?? 0) + 1;
      });
    },
  });
  const lost = result.errors + result.timeouts;
  if (lost > 0) failures['no answer'] = lost;
  return { latencies, failures, seconds: (lastAnswer - started) / 1000 };
}

if (parentPort && (workerData as { loadWorker?: boolean } | undefined)?.loadWorker) {
  const port = parentPort;
  port.on('message', (job: LoadJob) =>
    work(job).then(
      (r) => port.postMessage(r),
      (err: unknown) => {
        throw err;
      },
    ),
  );
}
