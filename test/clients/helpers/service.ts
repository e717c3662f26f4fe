import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dropDatabase } from '../../../src/db/data-source.js';
import type { LocalInventoryOffer } from '../../../plugins/local/inventory.js';
import { childDatabaseUrl } from '../../helpers/db.js';
import { freePort, spawnService, type Spawned } from '../../helpers/process.js';
import { settledWithin, waitFor } from '../../helpers/wait.js';

/** The GPU name the client tests rent by: an exact model name of the inventory below. */
export const TEST_GPU = process.env.GPR_TEST_GPU ?? 'H100 SXM';

export const CLIENT_TEST_OFFERS: LocalInventoryOffer[] = [
  {
    key: 'c-h100-sxm',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 299,
    maximumDurationSeconds: 86400,
    provisionSeconds: 1,
  },
  {
    key: 'c-h100-pcie',
    name: 'NVIDIA H100 PCIe',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 249,
    maximumDurationSeconds: 86400,
    provisionSeconds: 1,
  },
  {
    key: 'c-l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 48,
    maximumDurationSeconds: 86400,
    provisionSeconds: 1,
    // An offer that bills internet traffic per GB, as many Vast hosts do.
    trafficPrice: { upMicroUsdPerGb: 30_000, downMicroUsdPerGb: 4560 },
  },
];

export interface RunningService {
  baseUrl: string;
  svc: Spawned;
  stop(): Promise<void>;
}

/**
 * The whole service (api + worker, local provider, development payment page) as `npm start` runs
 * it, on a database of its own, with fast job polling so a rental goes ACTIVE in a few seconds.
 */
export async function startService(env: Record<string, string> = {}): Promise<RunningService> {
  const dir = mkdtempSync(join(tmpdir(), 'gpr-svc-'));
  const inventory = join(dir, 'inventory.json');
  writeFileSync(inventory, JSON.stringify({ offers: CLIENT_TEST_OFFERS }));
  // Of the run's family: dropped at the end of the run even if this service's stop() never runs.
  const databaseUrl = childDatabaseUrl('clients');
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const svc = spawnService([], {
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    PUBLIC_BASE_URL: baseUrl,
    LOCAL_PROVIDER_INVENTORY: inventory,
    RENTAL_POLL_MS: '100',
    JOBS_PROCESS_EVERY_MS: '100',
    RELEASES_DIR: join(dir, 'releases'),
    ...env,
  });
  const stop = async () => {
    svc.child.kill('SIGTERM');
    if (!(await settledWithin(svc.exited, 15_000))) {
      svc.child.kill('SIGKILL');
      await svc.exited;
    }
    await dropDatabase(databaseUrl);
  };
  try {
    await waitFor(
      async () => {
        const r = (await (await fetch(`${baseUrl}/api/v1/offers`)).json()) as { data?: unknown[] };
        return (r.data?.length ?? 0) >= CLIENT_TEST_OFFERS.length;
      },
      { timeoutMs: 45_000, what: () => `the service at ${baseUrl} (${svc.stderr().slice(-500)})` },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { baseUrl, svc, stop };
}

/** Pays a top-up the way a human does on the development payment page: the form's POST. */
export async function payTopup(paymentUrl: string): Promise<void> {
  const res = await fetch(paymentUrl, { method: 'POST', redirect: 'manual' });
  if (res.status !== 303) throw new Error(`paying ${paymentUrl} answered ${res.status}: ${await res.text()}`);
}

/** A closed port on this machine: connecting to it is refused at once. */
export async function closedPortUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}
