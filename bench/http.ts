/*
 * Public inventory reads under load: the real app (5,000 offers from the local provider, on a
 * throwaway database) against a bare Express 5 app that serves the bytes the real app sent,
 * both in this process; the load runs in a worker thread (autocannon) with 32 connections.
 * Prints req/s and p50/p99 latency as min/median/max over the repetitions, and ours/bare.
 * Also times the refresh that writes the 5,000 offers.
 *
 *   npm run bench:http      # BENCH_SECONDS=<per run, default 3> BENCH_REPEAT=<default 3> BENCH_OFFERS=<default 5000>
 *   BENCH_DATABASE_URL=mysql://root@127.0.0.1:3306/ (the server; a fresh database is made and dropped)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import express from 'express';
import { createApp } from '../src/app.js';
import { systemClock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { createServices } from '../src/container.js';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../src/db/data-source.js';
import { entities } from '../src/entities.js';
import { createLogger } from '../src/logger.js';
import { createProviderRegistry } from '../src/providers/provider-registry.js';
import { runBench } from './processes.js';

const CONNECTIONS = 32;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 3);
const OFFERS = Number(process.env.BENCH_OFFERS ?? 5000);

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
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        // Every header but those of the connection and the length, which Express sets itself.
        const skip = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
        const h = Object.fromEntries(Object.entries(res.headers).flatMap(([k, v]) => (skip.has(k) || v === undefined ? [] : [[k, String(v)]])));
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

/**
 * The baseline: Express 5 with nothing but a handler that replays what the real app sent (its
 * headers, security and CORS ones included, and its body; the request id is the captured one).
 */
function bareApp(routes: Map<string, Forms>) {
  const app = express();
  app.set('etag', false);
  app.disable('x-powered-by');
  for (const [path, forms] of routes) {
    app.get(path, (req, res) => {
      if (req.headers['if-none-match'] === forms.identity.headers.etag) return void res.status(304).set(forms.notModified.headers).end();
      const form = /\bgzip\b/.test(req.headers['accept-encoding'] ?? '') ? forms.gzip : forms.identity;
      res.set(form.headers).send(form.body);
    });
  }
  return app;
}

async function listen(app: express.Express): Promise<{ http: Server; base: string }> {
  const http = app.listen(0, '127.0.0.1');
  await new Promise((r) => http.once('listening', r));
  return { http, base: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };
}

interface Run {
  rps: number;
  p50: number;
  p99: number;
}

async function load(url: string, headers: Record<string, string>, expect: '2xx' | '3xx', seconds: number): Promise<Run> {
  const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds, headers, workers: 1 });
  const unexpected = r.errors + r.timeouts + (expect === '2xx' ? r['3xx'] : r['2xx']) + r['4xx'] + r['5xx'];
  if (unexpected > 0 || r[expect] === 0) throw new Error(`${url}: ${r[expect]} ${expect}, ${unexpected} other answers or errors`);
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99 };
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { min: s[0], median: s[Math.floor(s.length / 2)], max: s[s.length - 1] };
};
const fmt = (xs: number[], digits = 0) => {
  const { min, median, max } = stats(xs);
  return `${median.toFixed(digits)} (${min.toFixed(digits)}–${max.toFixed(digits)})`;
};

async function main(): Promise<void> {
  await createDatabaseIfMissing(databaseUrl);
  const ds = createDataSource(databaseUrl, 10, entities);
  await ds.initialize();
  await migrate(ds);
  const config = loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'silent', LOCAL_PROVIDER_INVENTORY: inventoryFile() });
  const logger = createLogger(config.logLevel);
  const providers = await createProviderRegistry(config.providers, { logger, clock: systemClock, dataSource: ds, production: false, labelPrefix: 'gpb-' });
  const services = createServices({ config, ds, clock: systemClock, logger, providers });
  const servers: Server[] = [];
  try {
    const refreshMs: number[] = [];
    for (let i = 0; i < REPEAT; i++) {
      const t = performance.now();
      const [result] = await services.inventory.refresh();
      refreshMs.push(performance.now() - t);
      if (!result.ok || result.offers !== OFFERS) throw new Error(`refresh: ${JSON.stringify(result)}`);
    }
    services.inventory.invalidate();

    const ours = await listen(createApp(services));
    servers.push(ours.http);
    const routes = new Map<string, Forms>();
    for (const path of ['/api/v1/offers', '/api/v1/gpus']) {
      const identity = await capture(ours.base + path);
      const gzip = await capture(ours.base + path, { 'Accept-Encoding': 'gzip' });
      const notModified = await capture(ours.base + path, { 'If-None-Match': identity.headers.etag });
      if (identity.status !== 200 || gzip.status !== 200 || notModified.status !== 304) throw new Error(`${path}: ${identity.status} ${gzip.status} ${notModified.status}`);
      routes.set(path, { identity, gzip, notModified });
    }
    const bare = await listen(bareApp(routes));
    servers.push(bare.http);
    const offers = routes.get('/api/v1/offers')!;
    const gpus = routes.get('/api/v1/gpus')!;
    if (offers.gzip.headers['content-encoding'] !== 'gzip') throw new Error('offers were not sent gzip-encoded');

    const scenarios: Array<{ name: string; path: string; headers: Record<string, string>; expect: '2xx' | '3xx' }> = [
      { name: 'offers 200 identity', path: '/api/v1/offers', headers: {}, expect: '2xx' },
      { name: 'offers 200 gzip', path: '/api/v1/offers', headers: { 'Accept-Encoding': 'gzip' }, expect: '2xx' },
      { name: 'offers 304', path: '/api/v1/offers', headers: { 'If-None-Match': offers.identity.headers.etag }, expect: '3xx' },
      { name: 'gpus 200', path: '/api/v1/gpus', headers: {}, expect: '2xx' },
      { name: 'gpus 304', path: '/api/v1/gpus', headers: { 'If-None-Match': gpus.identity.headers.etag }, expect: '3xx' },
    ];
    const results = new Map(scenarios.map((s) => [s.name, { ours: [] as Run[], bare: [] as Run[] }]));
    for (const s of scenarios) {
      for (const base of [ours.base, bare.base]) await load(base + s.path, s.headers, s.expect, 1); // warm-up
    }
    for (let rep = 0; rep < REPEAT; rep++) {
      for (const s of scenarios) {
        // Interleaved, so drift in the machine's load falls on both sides alike.
        results.get(s.name)!.ours.push(await load(ours.base + s.path, s.headers, s.expect, SECONDS));
        results.get(s.name)!.bare.push(await load(bare.base + s.path, s.headers, s.expect, SECONDS));
      }
    }

    console.log(`\nGET inventory, ${OFFERS} offers, ${CONNECTIONS} connections, ${REPEAT} × ${SECONDS} s per side; median (min–max)`);
    console.log(`body sizes: offers ${offers.identity.body.length} B identity, ${offers.gzip.body.length} B gzip; gpus ${gpus.identity.body.length} B\n`);
    const rows = [['scenario', 'ours req/s', 'bare req/s', 'ours/bare', 'ours p50 ms', 'bare p50 ms', 'ours p99 ms', 'bare p99 ms']];
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
    const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => row[c].length)));
    for (const row of rows) console.log(`| ${row.map((cell, c) => cell.padEnd(widths[c])).join(' | ')} |`);
    console.log(`\nrefresh of ${OFFERS} offers (first insert, then unchanged): ${refreshMs.map((ms) => `${ms.toFixed(0)} ms`).join(', ')}`);
  } finally {
    for (const s of servers) s.close();
    await providers.close();
    await ds.destroy();
    await dropDatabase(databaseUrl);
  }
}

// autocannon's own worker thread ends with the process.
runBench(main);
