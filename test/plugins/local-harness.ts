import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import localPlugin from '../../plugins/local/index.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import type { LocalProvider } from '../../plugins/local/local-provider.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { OfferRef, ProviderDeps } from '../../src/providers/provider.js';
import { testDataSource } from '../helpers/db.js';
import { sandboxUidOptions } from '../helpers/sandbox-uids.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

const common = {
  category: 'datacenter',
  cpuCores: 8,
  memoryGb: 32,
  storageGb: 100,
  pricePerHourMinor: 100,
  maximumDurationSeconds: 86400,
  provisionSeconds: 0.2,
};

/** One offer per behaviour the local provider can simulate; keys name the behaviour. */
export const TEST_OFFERS: LocalInventoryOffer[] = [
  { ...common, key: 'h100-1x', name: 'NVIDIA H100 SXM', vramGb: 80, gpuCount: 1 },
  { ...common, key: 'a100-2x', name: 'NVIDIA A100 80GB', vramGb: 80, gpuCount: 2 },
  { ...common, key: 'instant', name: 'NVIDIA L4', vramGb: 24, gpuCount: 1, provisionSeconds: 0 },
  { ...common, key: 'unavailable', name: 'NVIDIA L40S', vramGb: 48, gpuCount: 1, create: 'unavailable' },
  { ...common, key: 'ambiguous-created', name: 'NVIDIA L40S', vramGb: 48, gpuCount: 1, create: 'ambiguous-created' },
  { ...common, key: 'ambiguous-none', name: 'NVIDIA L40S', vramGb: 48, gpuCount: 1, create: 'ambiguous-none' },
  { ...common, key: 'fail', name: 'NVIDIA L40S', vramGb: 48, gpuCount: 1, create: 'fail' },
  { ...common, key: 'sold-out', name: 'NVIDIA L40S', vramGb: 48, gpuCount: 1, available: false },
  { ...common, key: 'destroy-ignore', name: 'NVIDIA RTX A6000', vramGb: 48, gpuCount: 1, destroy: 'ignore' },
  { ...common, key: 'destroy-ghost', name: 'NVIDIA RTX A6000', vramGb: 48, gpuCount: 1, destroy: 'ghost' },
];

export interface LocalHarness {
  ds: DataSource;
  deps: ProviderDeps;
  provider: LocalProvider;
  inventoryPath: string;
  labelPrefix: string;
  /** A fresh label under this harness's prefix. */
  label(): string;
  /** The OfferRef the host would pass for an inventory key. */
  offer(key: string): OfferRef;
  /** Rewrites the inventory file (the provider re-reads it on every call). */
  writeInventory(offers: LocalInventoryOffer[]): Promise<void>;
  /** Another provider on the same database and inventory: a restarted or second worker process. */
  newProvider(overrides?: Partial<ProviderDeps>): Promise<LocalProvider>;
  /** Destroys every instance under the prefix, closes every provider, removes the temp dir. */
  cleanup(): Promise<void>;
}

export async function makeLocalHarness(
  opts: { clock?: Clock; offers?: LocalInventoryOffer[] } = {},
): Promise<LocalHarness> {
  const ds = await testDataSource();
  const dir = await mkdtemp(join(tmpdir(), 'local-provider-test-'));
  const inventoryPath = join(dir, 'inventory.json');
  const offers = opts.offers ?? TEST_OFFERS;
  const writeInventory = (o: LocalInventoryOffer[]) => writeFile(inventoryPath, JSON.stringify({ offers: o }));
  await writeInventory(offers);
  const labelPrefix = `t${randomBytes(4).toString('hex')}-`;
  const deps: ProviderDeps = {
    logger: createLogger('silent'),
    clock: opts.clock ?? systemClock,
    dataSource: ds,
    production: false,
    labelPrefix,
    drift: IGNORE_DRIFT,
  };
  const options = localPlugin.validateOptions({ INVENTORY: inventoryPath, ...sandboxUidOptions() });
  const providers: LocalProvider[] = [];
  const newProvider = async (overrides: Partial<ProviderDeps> = {}) => {
    const p = (await localPlugin.create(options, { ...deps, ...overrides })) as LocalProvider;
    providers.push(p);
    return p;
  };
  const provider = await newProvider();
  return {
    ds,
    deps,
    provider,
    inventoryPath,
    labelPrefix,
    label: () => `${labelPrefix}${randomUUID().slice(0, 13)}`,
    offer: (key) => {
      const o = offers.find((x) => x.key === key);
      return { id: randomUUID(), key, name: o?.name ?? key, gpuCount: o?.gpuCount ?? 1 };
    },
    writeInventory,
    newProvider,
    async cleanup() {
      await writeInventory(offers.map((o) => ({ ...o, destroy: 'ok' })));
      const rows: { id: string }[] = await ds.query('SELECT id FROM local_provider_instances WHERE label LIKE ?', [
        `${labelPrefix}%`,
      ]);
      for (const r of rows) await provider.destroy(r.id);
      await Promise.all(providers.map((p) => p.close()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
