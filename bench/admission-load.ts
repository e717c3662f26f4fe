/*
 * The HTTP side of `bench:rentals`, in a worker thread of its own: clients sending admissions
 * one after another, all clients at once, over keep-alive connections. Out of the server's
 * thread, like a real caller, so the server's event loop carries only the service (as
 * autocannon does for bench:http).
 */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { parentPort, Worker, workerData } from 'node:worker_threads';

/** What the load worker is asked to do. */
export interface LoadJob {
  base: string;
  auths: string[];
  perClient: number;
  body: object;
}

/** What it measured: one latency per request, and the failures by label. */
export interface LoadResult {
  latencies: number[];
  failures: Record<string, number>;
  seconds: number;
}

/** Runs `job` in a fresh worker thread and resolves with its measurements. */
export function runLoad(job: LoadJob): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    // The worker runs this same file, so it registers tsx's loader first, as the parent has.
    const boot = `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(import.meta.url)}); })`;
    const w = new Worker(boot, { eval: true, workerData: job });
    w.once('message', (r: LoadResult) => resolve(r));
    w.once('error', reject);
    w.once('exit', (code) => code !== 0 && reject(new Error(`load worker exited with ${code}`)));
  });
}

function post(agent: Agent, url: URL, auth: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: { Authorization: auth, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Idempotency-Key': randomUUID() },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function work(job: LoadJob): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: job.auths.length });
  const url = new URL('/api/v1/rentals', job.base);
  const body = JSON.stringify(job.body);
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  const started = performance.now();
  await Promise.all(
    job.auths.map(async (auth) => {
      for (let i = 0; i < job.perClient; i++) {
        const t0 = performance.now();
        const res = await post(agent, url, auth, body);
        latencies.push(performance.now() - t0);
        if (res.status !== 201) {
          const label = `${res.status} ${(JSON.parse(res.text) as { error?: { code?: string } }).error?.code ?? ''}`;
          failures[label] = (failures[label] ?? 0) + 1;
        }
      }
    }),
  );
  agent.destroy();
  return { latencies, failures, seconds: (performance.now() - started) / 1000 };
}

if (parentPort && workerData) {
  const port = parentPort;
  work(workerData as LoadJob).then(
    (r) => port.postMessage(r),
    (err: unknown) => {
      throw err;
    },
  );
}
