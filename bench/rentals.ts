/*
 * Rental admission under load: POST /api/v1/rentals from 32 concurrent clients, one per account,
 * against the in-process app on a throwaway database; then, if the provisioning job exists, the
 * time from admission to the provider create call with a worker running.
 *
 *   npm run bench:rentals                 # BENCH_REQUESTS=<per client, default 50>
 *   BENCH_DATABASE_URL=mysql://root@127.0.0.1:3306/ (the server; a fresh database is made and dropped)
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../src/app.js';
import { systemClock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { createServices, type Services } from '../src/container.js';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../src/db/data-source.js';
import { createLogger } from '../src/logger.js';
import { Account } from '../src/modules/accounts/account.entity.js';
import { Offer } from '../src/modules/inventory/offer.entity.js';
import { createProviderRegistry } from '../src/providers/provider-registry.js';
import { RENTAL_JOBS } from '../src/jobs/job-queue.js';

const CLIENTS = 32;
const PER_CLIENT = Number(process.env.BENCH_REQUESTS ?? 50);
const PROVISION_SAMPLES = Number(process.env.BENCH_PROVISION_SAMPLES ?? 32);

const server = new URL(process.env.BENCH_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/');
server.pathname = `/gpu_rental_bench_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
const databaseUrl = server.toString();

const dir = mkdtempSync(join(tmpdir(), 'gpu-rental-bench-'));
const inventoryPath = join(dir, 'inventory.json');
writeFileSync(
  inventoryPath,
  JSON.stringify({
    offers: [
      { key: 'h100-a', name: 'NVIDIA H100 SXM', category: 'datacenter', vramGb: 80, gpuCount: 1, pricePerHourMinor: 300, maximumDurationSeconds: 86400, provisionSeconds: 0 },
      { key: 'h100-b', name: 'NVIDIA H100 SXM', category: 'datacenter', vramGb: 80, gpuCount: 1, pricePerHourMinor: 350, maximumDurationSeconds: 86400, provisionSeconds: 0 },
      { key: 'h100-c', name: 'NVIDIA H100 SXM', category: 'datacenter', vramGb: 80, gpuCount: 1, pricePerHourMinor: 400, maximumDurationSeconds: 86400, provisionSeconds: 0 },
    ],
  }),
);

interface Client {
  auth: string;
  accountId: string;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main(): Promise<void> {
  await createDatabaseIfMissing(databaseUrl);
  const ds = createDataSource(databaseUrl, 40);
  await ds.initialize();
  await migrate(ds);
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'silent',
    LOCAL_PROVIDER_INVENTORY: inventoryPath,
    SIGNUP_RATE_PER_MINUTE: '1000000',
    JOBS_PROCESS_EVERY_MS: '50',
  });
  const logger = createLogger(config.logLevel);
  const providers = await createProviderRegistry(config.providers, { logger, clock: systemClock, dataSource: ds, production: false, labelPrefix: 'gpb-' });
  const services: Services = createServices({ config, ds, clock: systemClock, logger, providers });
  await services.inventory.refresh();
  services.inventory.invalidate();
  const app = createApp(services);
  const http = app.listen(0, '127.0.0.1');
  await new Promise((r) => http.once('listening', r));
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const [offer] = await ds.getRepository(Offer).find({ order: { pricePerHourMinor: 'ASC' }, take: 1 });

  try {
    const clients = await makeClients(services, base, 'ACCOUNT_BALANCE');
    const legacy = await makeClients(services, base, 'LEGACY_PREPAID');
    // JIT and connection pool warm-up, not reported.
    await phase('warm-up', base, clients, () => ({ offerId: offer.id }), 5, true);
    console.log(`rental admission: ${CLIENTS} concurrent clients across ${CLIENTS} accounts, ${PER_CLIENT} requests each, in-process app, MariaDB`);
    await phase('metered (ACCOUNT_BALANCE, by offer id)', base, clients, () => ({ offerId: offer.id }));
    await phase('metered (ACCOUNT_BALANCE, by GPU intent)', base, clients, () => ({ gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 }));
    await phase('legacy prepaid (ledger debit, by offer id)', base, legacy, () => ({ offerId: offer.id, budgetMinor: 600 }));
    await provisioningLatency(services, base, offer.id);
  } finally {
    http.close();
    await providers.close();
    await ds.destroy();
    await dropDatabase(databaseUrl);
  }
}

async function makeClients(services: Services, base: string, billingModel: 'ACCOUNT_BALANCE' | 'LEGACY_PREPAID'): Promise<Client[]> {
  return Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      const res = await fetch(`${base}/api/v1/signup`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() },
        body: '{}',
      });
      const { data } = (await res.json()) as { data: { account: { user: { id: string } } } };
      const accountId = data.account.user.id;
      await services.ds.getRepository(Account).update({ id: accountId }, { billingModel });
      const { token } = await services.ds.transaction(async (m) => {
        await services.ledger.post(m, { accountId, kind: 'TOPUP', amountMinor: 10_000_000, externalRef: `bench:${accountId}`, description: 'bench credit' });
        return services.keys.create(m, {
          accountId,
          kind: 'AGENT',
          name: 'bench',
          scopes: ['read', 'rent', 'manage'],
          origin: 'bench',
          maxPerRentalMinor: 1_000_000,
          budgetLimitMinor: 100_000_000,
          maxConcurrentDeployments: 100_000,
        });
      });
      return { auth: `Bearer ${token}`, accountId };
    }),
  );
}

async function phase(name: string, base: string, clients: Client[], body: () => object, perClient = PER_CLIENT, quiet = false): Promise<void> {
  const latencies: number[] = [];
  const failures = new Map<string, number>();
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  await Promise.all(
    clients.map(async (c) => {
      for (let i = 0; i < perClient; i++) {
        const t0 = performance.now();
        const res = await fetch(`${base}/api/v1/rentals`, {
          method: 'POST',
          headers: { Authorization: c.auth, 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() },
          body: JSON.stringify(body()),
        });
        const text = await res.text();
        latencies.push(performance.now() - t0);
        if (res.status !== 201) {
          const key = `${res.status} ${(JSON.parse(text) as { error?: { code?: string } }).error?.code ?? ''}`;
          failures.set(key, (failures.get(key) ?? 0) + 1);
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  const ok = latencies.length - [...failures.values()].reduce((a, b) => a + b, 0);
  if (quiet) return;
  console.log(
    `  ${name}: ${ok}/${latencies.length} admitted in ${seconds.toFixed(2)} s = ${(ok / seconds).toFixed(0)} admissions/s; ` +
      `latency p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms; ` +
      `node CPU ${(((cpu.user + cpu.system) / 1e6 / seconds) * 100).toFixed(0)}% of one core` +
      (failures.size ? `; failures ${JSON.stringify(Object.fromEntries(failures))}` : ''),
  );
}

/**
 * Admission to the provider create call, with a worker in this process: the attempt row is
 * written just before the create call, so its time minus the order's creation time is the wait.
 */
async function provisioningLatency(services: Services, base: string, offerId: string): Promise<void> {
  const hasJob = services.jobDefinitions.some((d) => d.name === RENTAL_JOBS.provision);
  const jobs = (services as { jobs?: unknown }).jobs;
  if (!hasJob || !jobs) {
    console.log(`  admission -> provider create: not measured (${!jobs ? 'no job queue on Services' : `no ${RENTAL_JOBS.provision} job defined`} yet)`);
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
    const [client] = await makeClients(services, base, 'ACCOUNT_BALANCE');
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
    const deployments: { id: string }[] = await services.ds.query(`SELECT id FROM deployments WHERE order_id IN (?)`, [rentalIds]);
    for (const d of deployments) {
      await fetch(`${base}/api/v1/deployments/${d.id}/terminate`, { method: 'POST', headers: { Authorization: client.auth } });
    }
    await new Promise((r) => setTimeout(r, 2000));
  } finally {
    await worker.stop();
  }
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  // Agenda and SSH timers of the in-process worker would otherwise keep the process alive.
  .finally(() => process.exit());
