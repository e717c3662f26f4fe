import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { systemClock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { createServices } from '../src/container.js';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../src/db/data-source.js';
import { entities } from '../src/entities.js';
import { createLogger } from '../src/logger.js';
import { createProviderRegistry } from '../src/providers/provider-registry.js';
// @ts-expect-error plain ESM script without types
import { buildIsFresh } from '../scripts/freshness.mjs';
import { endChild, exited, ownChild, productionNodeFlags, runBench } from './processes.js';

const CONNECTIONS = 32;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 3);
const OFFERS = Number(process.env.BENCH_OFFERS ?? 5000);
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'silent';
const NODE_FLAGS =
  process.env.BENCH_NODE_OPTIONS === undefined
    ? productionNodeFlags()
    : process.env.BENCH_NODE_OPTIONS.split(/\s+/).filter(Boolean);
const ROOT = resolve(import.meta.dirname, '..');
const PROBE = join(ROOT, 'bench', 'child-probe.mjs');

const server = new URL(process.env.BENCH_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/');
server.pathname = `/gpu_rental_bench_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
const databaseUrl = server.toString();

const MODELS = [
  { name: 'NVIDIA H100 SXM', category: 'datacenter', vramGb: 80, price: 299 },
  { name: 'NVIDIA H100 PCIe', category: 'datacenter', vramGb: 80, price: 249 },
  { name: 'NVIDIA A100 SXM4 80GB', category: 'datacenter', vramGb: 80, price: 179 },
  { name: 'NVIDIA A100 SXM4 40GB', category: 'datacenter', vramGb: 40, price: 129 },
  { name: 'NVIDIA L40S', category: 'datacenter', vramGb: 48, price: 99 },
  { name: 'NVIDIA L4', category: 'datacenter', vramGb: 24, price: 49 },
  { name: 'NVIDIA GeForce RTX 4090', category: 'consumer', vramGb: 24, price: 44 },
  { name: 'NVIDIA RTX A6000', category: 'workstation', vramGb: 48, price: 79 },
];

function inventoryFile(): string {
  const offers = Array.from({ length: OFFERS }, (_, i) => {
    const m = MODELS[i % MODELS.length];
    const gpuCount = [1, 2, 4, 8][Math.floor(i / MODELS.length) % 4];
    return {
      key: `bench-${i}`,
      name: m.name,
      category: m.category,
      vramGb: m.vramGb,
      gpuCount,
      cpuCores: 8 * gpuCount,
      memoryGb: 64 * gpuCount,
      storageGb: 200 + (i % 13) * 50,
      pricePerHourMinor: m.price * gpuCount + (i % 97),
      maximumDurationSeconds: 86400 * (1 + (i % 7)),
    };
  });
  const path = join(mkdtempSync(join(tmpdir(), 'gpu-rental-bench-')), 'inventory.json');
  writeFileSync(path, JSON.stringify({ offers }));
  return path;
}

interface Captured {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** One response as sent: headers that matter to a client, and the body still encoded. */
async function capture(url: string, headers: Record<string, string> = {}): Promise<Captured> {
  return new Promise((resolve, reject) => {
    request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        // Every header but those of the connection and the length, which Express sets itself.
        const skip = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
        const h = Object.fromEntries(
          Object.entries(res.headers).flatMap(([k, v]) => (skip.has(k) || v === undefined ? [] : [[k, String(v)]])),
        );
        resolve({ status: res.statusCode!, headers: h, body: Buffer.concat(chunks) });
      });
    })
      .on('error', reject)
      .end();
  });
}

interface Forms {
  identity: Captured;
  gzip: Captured;
  notModified: Captured;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

/** The resident set of a process now and its peak so far (VmRSS, VmHWM), in bytes. */
function residentSet(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

interface Idle {
  /** RSS once started, before anything else happens. */
  rss: number;
  /** The same after a full garbage collection, with the parts V8 reports. */
  gc: NodeJS.MemoryUsage;
}

/** Memory of a forked process idle: RSS as it stands, then process.memoryUsage() after a GC (bench/child-probe.mjs). */
async function idleMemory(child: ChildProcess): Promise<Idle> {
  await new Promise((r) => setTimeout(r, 1000));
  const rss = residentSet(child.pid!).rss;
  const gc = await new Promise<NodeJS.MemoryUsage>((resolve) => {
    const onMessage = (m: { memory?: NodeJS.MemoryUsage }) => {
      if (!m.memory) return;
      child.off('message', onMessage);
      resolve(m.memory);
    };
    child.on('message', onMessage);
    child.send('memory');
  });
  return { rss, gc };
}

/** The service from dist/ with one or more roles, as production runs it, plus the probe. */
function forkService(roles: string, port: number, logLevel: string, inventory: string): ChildProcess {
  return ownChild(
    fork(join(ROOT, 'dist', 'src', 'main.js'), ['--role', roles], {
      cwd: ROOT,
      execArgv: [...NODE_FLAGS, '--expose-gc', '--import', PROBE],
      env: {
        PATH: process.env.PATH,
        NODE_ENV: 'production',
        DATABASE_URL: databaseUrl,
        PORT: String(port),
        HOST: '127.0.0.1',
        PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
        LOG_LEVEL: logLevel,
        SECRETS_KEY: randomBytes(32).toString('base64'),
        LOCAL_PROVIDER_INVENTORY: inventory,
        LOCAL_PROVIDER_ALLOW_PRODUCTION: 'true',
      },
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    }),
  );
}

/** Resolves with the first stdout line `test` accepts; fails when the process exits first. */
function lineOf(child: ChildProcess, test: (line: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      if (test(line)) resolve(line);
    });
    void exited(child).then(() =>
      reject(new Error(`process ${child.pid} exited (${child.exitCode ?? child.signalCode}) before it was ready`)),
    );
  });
}

async function healthy(base: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`);
    const status = await new Promise<number>((r) =>
      request(`${base}/healthz`, (res) => (res.resume(), r(res.statusCode!)))
        .on('error', () => r(0))
        .end(),
    );
    if (status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the service did not answer /healthz within 60 s');
}

interface Run {
  rps: number;
  p50: number;
  p99: number;
  /** RSS samples of the process under load, every 50 ms. */
  rss: number[];
  /** The largest of each part of process.memoryUsage() seen under load (asked every 250 ms). */
  parts: NodeJS.MemoryUsage;
}

interface Side {
  base: string;
  child: ChildProcess;
}

async function load(
  side: Side,
  path: string,
  headers: Record<string, string>,
  expect: '2xx' | '3xx',
  seconds: number,
): Promise<Run> {
  const rss: number[] = [];
  const parts: NodeJS.MemoryUsage = { rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };
  const onMessage = (m: { memory?: NodeJS.MemoryUsage }) => {
    for (const k of Object.keys(parts) as Array<keyof NodeJS.MemoryUsage>)
      parts[k] = Math.max(parts[k], m.memory?.[k] ?? 0);
  };
  side.child.on('message', onMessage);
  const rssTimer = setInterval(() => rss.push(residentSet(side.child.pid!).rss), 50);
  const partsTimer = setInterval(() => side.child.send('memory-now'), 250);
  try {
    const r = await autocannon({
      url: side.base + path,
      connections: CONNECTIONS,
      duration: seconds,
      headers,
      workers: 1,
    });
    const unexpected = r.errors + r.timeouts + (expect === '2xx' ? r['3xx'] : r['2xx']) + r['4xx'] + r['5xx'];
    if (unexpected > 0 || r[expect] === 0)
      throw new Error(`${path}: ${r[expect]} ${expect}, ${unexpected} other answers or errors`);
    return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, rss, parts };
  } finally {
    clearInterval(rssTimer);
    clearInterval(partsTimer);
    side.child.off('message', onMessage);
  }
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { min: s[0], median: s[Math.floor(s.length / 2)], max: s[s.length - 1] };
};
const fmt = (xs: number[], digits = 0) => {
  const { min, median, max } = stats(xs);
  return `${median.toFixed(digits)} (${min.toFixed(digits)}–${max.toFixed(digits)})`;
};
const mb = (bytes: number) => (bytes / 1048576).toFixed(0);
const MB_ROUND = (bytes: number) => Number((bytes / 1048576).toFixed(1));

function table(rows: string[][]): void {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => row[c].length)));
  for (const row of rows) console.log(`| ${row.map((cell, c) => cell.padEnd(widths[c])).join(' | ')} |`);
}

async function main(): Promise<void> {
  if (!buildIsFresh(ROOT)) {
    console.error('bench: dist/ is older than the sources; building it (npm run build)');
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit', cwd: ROOT });
    if (r.status !== 0) throw new Error('the build failed');
  }
  await createDatabaseIfMissing(databaseUrl);
  const ds = createDataSource(databaseUrl, 10, entities);
  await ds.initialize();
  await migrate(ds);
  const inventory = inventoryFile();
  const config = loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', LOCAL_PROVIDER_INVENTORY: inventory });
  const logger = createLogger(config.logLevel);
  const providers = await createProviderRegistry(config.providers, {
    logger,
    clock: systemClock,
    dataSource: ds,
    production: false,
    labelPrefix: 'gpb-',
  });
  const services = createServices({ config, ds, clock: systemClock, logger, providers });
  const children: ChildProcess[] = [];
  try {
    const refreshMs: number[] = [];
    for (let i = 0; i < REPEAT; i++) {
      const t = performance.now();
      const [result] = await services.inventory.refresh();
      refreshMs.push(performance.now() - t);
      if (!result.ok || result.offers !== OFFERS) throw new Error(`refresh: ${JSON.stringify(result)}`);
    }

    const ourPort = await freePort();
    const oursChild = forkService('api', ourPort, LOG_LEVEL, inventory);
    children.push(oursChild);
    const ours: Side = { base: `http://127.0.0.1:${ourPort}`, child: oursChild };
    await healthy(ours.base, oursChild);
    const oursIdle = await idleMemory(oursChild);

    const routes = new Map<string, Forms>();
    for (const path of ['/api/v1/offers', '/api/v1/gpus']) {
      const identity = await capture(ours.base + path);
      const gzip = await capture(ours.base + path, { 'Accept-Encoding': 'gzip' });
      const notModified = await capture(ours.base + path, { 'If-None-Match': identity.headers.etag });
      if (identity.status !== 200 || gzip.status !== 200 || notModified.status !== 304)
        throw new Error(`${path}: ${identity.status} ${gzip.status} ${notModified.status}`);
      routes.set(path, { identity, gzip, notModified });
    }
    const formsFile = join(mkdtempSync(join(tmpdir(), 'gpu-rental-bench-')), 'forms.json');
    const encoded = Object.fromEntries(
      [...routes].map(([path, forms]) => [
        path,
        Object.fromEntries(
          Object.entries(forms).map(([k, c]: [string, Captured]) => [
            k,
            { headers: c.headers, body: c.body.toString('base64') },
          ]),
        ),
      ]),
    );
    writeFileSync(formsFile, JSON.stringify(encoded));
    const bareChild = ownChild(
      fork(join(ROOT, 'bench', 'bare-express.mjs'), [formsFile], {
        cwd: ROOT,
        execArgv: ['--expose-gc', '--import', PROBE],
        stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      }),
    );
    children.push(bareChild);
    const barePort = Number(await lineOf(bareChild, (l) => /^\d+$/.test(l)));
    const bare: Side = { base: `http://127.0.0.1:${barePort}`, child: bareChild };
    const bareIdle = await idleMemory(bareChild);

    const offers = routes.get('/api/v1/offers')!;
    const gpus = routes.get('/api/v1/gpus')!;
    if (offers.gzip.headers['content-encoding'] !== 'gzip') throw new Error('offers were not sent gzip-encoded');

    const scenarios: Array<{ name: string; path: string; headers: Record<string, string>; expect: '2xx' | '3xx' }> = [
      { name: 'offers 200 identity', path: '/api/v1/offers', headers: {}, expect: '2xx' },
      { name: 'offers 200 gzip', path: '/api/v1/offers', headers: { 'Accept-Encoding': 'gzip' }, expect: '2xx' },
      {
        name: 'offers 304',
        path: '/api/v1/offers',
        headers: { 'If-None-Match': offers.identity.headers.etag },
        expect: '3xx',
      },
      { name: 'gpus 200', path: '/api/v1/gpus', headers: {}, expect: '2xx' },
      {
        name: 'gpus 304',
        path: '/api/v1/gpus',
        headers: { 'If-None-Match': gpus.identity.headers.etag },
        expect: '3xx',
      },
    ];
    const results = new Map(scenarios.map((s) => [s.name, { ours: [] as Run[], bare: [] as Run[] }]));
    for (const s of scenarios) {
      for (const side of [ours, bare]) await load(side, s.path, s.headers, s.expect, 1); // warm-up
    }
    for (let rep = 0; rep < REPEAT; rep++) {
      for (const s of scenarios) {
        // Interleaved, so drift in the machine's load falls on both sides alike.
        results.get(s.name)!.ours.push(await load(ours, s.path, s.headers, s.expect, SECONDS));
        results.get(s.name)!.bare.push(await load(bare, s.path, s.headers, s.expect, SECONDS));
      }
    }
    const peaks = { ours: residentSet(oursChild.pid!).peak, bare: residentSet(bareChild.pid!).peak };

    console.log(
      `\nGET inventory, ${OFFERS} offers, ${CONNECTIONS} connections, ${REPEAT} × ${SECONDS} s per side; median (min–max)`,
    );
    console.log(
      `ours: node dist/src/main.js --role api, NODE_ENV=production, LOG_LEVEL=${LOG_LEVEL}${NODE_FLAGS.length ? `, node ${NODE_FLAGS.join(' ')}` : ''}; bare: node bench/bare-express.mjs`,
    );
    console.log(
      `body sizes: offers ${offers.identity.body.length} B identity, ${offers.gzip.body.length} B gzip; gpus ${gpus.identity.body.length} B\n`,
    );
    const rows = [
      ['scenario', 'ours req/s', 'bare req/s', 'ours/bare', 'ours p50 ms', 'bare p50 ms', 'ours p99 ms', 'bare p99 ms'],
    ];
    for (const s of scenarios) {
      const r = results.get(s.name)!;
      const ratios = r.ours.map((o, i) => o.rps / r.bare[i].rps);
      rows.push([
        s.name,
        fmt(r.ours.map((x) => x.rps)),
        fmt(r.bare.map((x) => x.rps)),
        fmt(ratios, 2),
        fmt(r.ours.map((x) => x.p50)),
        fmt(r.bare.map((x) => x.p50)),
        fmt(r.ours.map((x) => x.p99)),
        fmt(r.bare.map((x) => x.p99)),
      ]);
    }
    table(rows);

    // Memory: RSS from /proc (what the machine gives the process), V8's parts after a GC.
    const offersRuns = (side: 'ours' | 'bare') =>
      scenarios.filter((s) => s.path === '/api/v1/offers').flatMap((s) => results.get(s.name)![side]);
    const underLoad = (side: 'ours' | 'bare') => stats(offersRuns(side).flatMap((r) => r.rss));
    const loadOurs = underLoad('ours');
    const loadBare = underLoad('bare');
    console.log(
      `\nresident memory (RSS, MB) of each process; under load: sampled every 50 ms during the offers runs; peak: the process's high-water mark (VmHWM)\n`,
    );
    const ratio = (a: number, b: number) => (a / b).toFixed(2);
    table([
      ['', 'ours', 'bare', 'ours/bare'],
      ['idle, after start', mb(oursIdle.rss), mb(bareIdle.rss), ratio(oursIdle.rss, bareIdle.rss)],
      ['idle, after a GC', mb(oursIdle.gc.rss), mb(bareIdle.gc.rss), ratio(oursIdle.gc.rss, bareIdle.gc.rss)],
      ['offers load, median', mb(loadOurs.median), mb(loadBare.median), ratio(loadOurs.median, loadBare.median)],
      ['offers load, max sampled', mb(loadOurs.max), mb(loadBare.max), ratio(loadOurs.max, loadBare.max)],
      ['peak (VmHWM)', mb(peaks.ours), mb(peaks.bare), ratio(peaks.ours, peaks.bare)],
    ]);
    const parts = (m: NodeJS.MemoryUsage) =>
      `heapUsed ${MB_ROUND(m.heapUsed)}, heapTotal ${MB_ROUND(m.heapTotal)}, external ${MB_ROUND(m.external)}, arrayBuffers ${MB_ROUND(m.arrayBuffers)}`;
    console.log(`\nidle after a GC, MB: ours ${parts(oursIdle.gc)}; bare ${parts(bareIdle.gc)}`);
    const largest = (side: 'ours' | 'bare') => {
      const m: NodeJS.MemoryUsage = { rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };
      for (const r of offersRuns(side))
        for (const k of Object.keys(m) as Array<keyof NodeJS.MemoryUsage>) m[k] = Math.max(m[k], r.parts[k]);
      return m;
    };
    console.log(`offers load, largest seen, MB: ours ${parts(largest('ours'))}; bare ${parts(largest('bare'))}`);
    await Promise.all(children.splice(0).map((c) => endChild(c)));

    // The other roles idle, one process each, as deployed; the worker refreshes the same inventory.
    const roleRows = [['roles', 'idle RSS MB, after start', 'after a GC', 'heapUsed', 'heapTotal', 'external']];
    for (const roles of ['api', 'worker', 'api,worker,bot']) {
      const port = await freePort();
      const child = forkService(roles, port, 'info', inventory);
      children.push(child);
      if (roles.includes('worker')) await lineOf(child, (l) => l.includes('inventory loaded'));
      if (roles.includes('api')) await healthy(`http://127.0.0.1:${port}`, child);
      const idle = await idleMemory(child);
      child.stdout!.resume();
      roleRows.push([
        roles,
        mb(idle.rss),
        mb(idle.gc.rss),
        mb(idle.gc.heapUsed),
        mb(idle.gc.heapTotal),
        mb(idle.gc.external),
      ]);
      await endChild(child);
    }
    console.log(`\nidle memory by role (LOG_LEVEL=info, no bot token)\n`);
    table(roleRows);
    console.log(
      `\nrefresh of ${OFFERS} offers (first insert, then unchanged): ${refreshMs.map((ms) => `${ms.toFixed(0)} ms`).join(', ')}`,
    );
  } finally {
    await Promise.all(children.map((c) => endChild(c)));
    await providers.close();
    await ds.destroy();
    await dropDatabase(databaseUrl);
  }
}

// autocannon's own worker thread ends with the process.
runBench(main);
