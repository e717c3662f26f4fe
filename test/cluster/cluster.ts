import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import { freePort, spawnService, type Spawned } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

/** SQL ports of the three Galera nodes scripts/galera-cluster.sh starts. */
export const NODE_PORTS = [3311, 3312, 3313] as const;

/** The suite's database on the cluster, fresh for each run. */
export const clusterDatabase = `gpu_rental_cluster_${Date.now()}_${randomBytes(3).toString('hex')}`;

/** DATABASE_URL of node `n` (0, 1, 2) for the suite's database. */
export function nodeUrl(n: number, database = clusterDatabase): string {
  return `mysql://root@127.0.0.1:${NODE_PORTS[n]}/${database}`;
}

/** Runs scripts/galera-cluster.sh, its progress lines shown in the test output. */
export function galera(...args: string[]): void {
  const r = spawnSync('bash', ['scripts/galera-cluster.sh', ...args], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`scripts/galera-cluster.sh ${args.join(' ')} exited with ${r.status}`);
}

/** A DataSource of the service's entities on node `n`. */
export async function nodeDataSource(n: number, poolSize = 8, database = clusterDatabase): Promise<DataSource> {
  const ds = createDataSource(nodeUrl(n, database), poolSize, entities);
  await ds.initialize();
  return ds;
}

export interface ServiceProcess extends Spawned {
  node: number;
  base: string;
  /** `api`/`worker` and the node, for the logs. */
  label: string;
  stop(): Promise<void>;
}

const running = new Set<ServiceProcess>();
/** Every service process of the run, stopped ones too, with how much of its output was already shown. */
const started: { p: ServiceProcess; shown: number }[] = [];

/** Where each service process's whole output (its pino log and stderr) is written at the end of the run. */
export const LOG_DIR = process.env.CLUSTER_LOG_DIR ?? join('/tmp', 'gpu-rental-cluster-logs', clusterDatabase);

const output = (p: ServiceProcess) => p.stdout() + p.stderr();

/**
 * The last `lines` lines each service process wrote since the previous call (what a failed test
 * needs to see: a 500's cause is logged only by the process that answered it).
 */
export function newServiceOutput(lines = 40): string {
  const parts: string[] = [];
  for (const entry of started) {
    const all = output(entry.p);
    const fresh = all.slice(entry.shown).trimEnd();
    entry.shown = all.length;
    if (!fresh) continue;
    const tail = fresh.split('\n').slice(-lines);
    parts.push(`--- ${entry.p.label} (pid ${entry.p.child.pid}), last ${tail.length} lines ---\n${tail.join('\n')}`);
  }
  return parts.join('\n');
}

/** Marks everything written so far as seen, so the next {@link newServiceOutput} shows one test's lines. */
export function markServiceOutput(): void {
  for (const entry of started) entry.shown = output(entry.p).length;
}

/** Writes each service process's whole output to {@link LOG_DIR}; answers the directory. */
export function saveServiceOutput(): string {
  mkdirSync(LOG_DIR, { recursive: true });
  for (const { p } of started)
    writeFileSync(join(LOG_DIR, `${p.label.replace(/\s+/g, '-')}-${p.child.pid}.log`), output(p));
  return LOG_DIR;
}

/** Starts the service (`--role <role>`) connected to node `n`; resolves once /healthz answers. */
export async function startService(
  n: number,
  role: 'api' | 'worker',
  env: Record<string, string> = {},
  database = clusterDatabase,
): Promise<ServiceProcess> {
  const port = await freePort();
  const svc = spawnService(['--role', role], { DATABASE_URL: nodeUrl(n, database), PORT: String(port), ...env });
  const p: ServiceProcess = Object.assign(svc, {
    node: n,
    base: `http://127.0.0.1:${port}`,
    label: `${role} on node ${n + 1}`,
    async stop() {
      running.delete(p);
      if (svc.child.exitCode === null && svc.child.signalCode === null) svc.child.kill('SIGKILL');
      await svc.exited;
    },
  });
  running.add(p);
  started.push({ p, shown: 0 });
  if (role === 'api') {
    await waitFor(async () => (await fetch(`${p.base}/healthz`)).status === 200, {
      timeoutMs: 90_000,
      what: () => `api on node ${n + 1} (${svc.stderr()})`,
      intervalMs: 200,
    });
  }
  return p;
}

/** Stops every service process still running (end of a file). */
export async function stopServices(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop()));
}

/** A JSON request to a service process; answers status and body. */
export async function call(
  base: string,
  method: string,
  path: string,
  opts: { body?: unknown; headers?: Record<string, string>; raw?: string } = {},
): Promise<{
  status: number;
  body: { data?: Record<string, unknown>; error?: { code: string } } & Record<string, unknown>;
}> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json; charset=utf-8', ...opts.headers },
    body: opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}
