import { LABEL_PREFIX } from '../../src/modules/rentals/lifecycle/labels.js';
import type { RentalHandoff } from '../../src/modules/billing/rental-handoff.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Express } from 'express';
import supertest from 'supertest';
import { createApp, type AppOptions } from '../../src/app.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createServices, type Services } from '../../src/container.js';
import { createLogger } from '../../src/logger.js';
import { DriftLog } from '../../src/providers/drift-log.js';
import {
  createProviderRegistry,
  type HostedProviderDeps,
  type ProviderRegistry,
} from '../../src/providers/provider-registry.js';
import { defaultInventory } from '../../plugins/local/default-inventory.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import type { DataSource } from 'typeorm';
import { testDatabaseUrl, testDataSource } from './db.js';
import { sandboxUidEnv } from './sandbox-uids.js';

export interface TestContext {
  config: Config;
  services: Services;
  app: Express;
  api: supertest.Agent;
  clock: ManualClock;
  inventoryPath: string;
  /** Rewrites the local provider's inventory file and refreshes the cache. */
  setInventory(offers: LocalInventoryOffer[]): Promise<void>;
  close(): Promise<void>;
}

export interface ContextOptions {
  env?: Record<string, string>;
  offers?: LocalInventoryOffer[];
  app?: AppOptions;
  /**
   * Builds the provider registry from the parsed provider configs instead of loading the plugins
   * with their production timings (cloud plugins against fakes need short rate-limit intervals).
   */
  registry?: (configs: Config['providers'], deps: HostedProviderDeps) => Promise<ProviderRegistry>;
  /** Replaces the hand-off of paid card orders to rentals; null drops them. */
  rentalHandoff?: RentalHandoff | null;
  /** A migrated DataSource on another server (and its URL), instead of the run's shared test database. */
  database?: { ds: DataSource; url: string };
  /** Receives every log line at debug level (tests that look for what must never be logged). */
  logTo?: (line: string) => void;
  /** The authority a test's https client metadata documents are signed by. */
  clientMetadataCa?: string;
}

/** The same wiring as main.ts, on the run's test database, with a movable clock. */
export async function createTestContext(opts: ContextOptions = {}): Promise<TestContext> {
  const ds = opts.database?.ds ?? (await testDataSource());
  const dir = mkdtempSync(join(tmpdir(), 'gpu-rental-test-'));
  const inventoryPath = join(dir, 'inventory.json');
  writeFileSync(inventoryPath, JSON.stringify({ offers: opts.offers ?? defaultInventory.offers }));
  const config = loadConfig({
    DATABASE_URL: opts.database?.url ?? testDatabaseUrl,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    PUBLIC_BASE_URL: 'http://gpu.test',
    LOCAL_PROVIDER_INVENTORY: inventoryPath,
    ...sandboxUidEnv(opts.database?.url),
    SIGNUP_RATE_PER_MINUTE: '1000000',
    SIGNUP_RATE_PER_ADDRESS_PER_MINUTE: '1000000',
    // Every test client is 127.0.0.1, on the real clock; tests of this limit set their own.
    AGENT_SETUP_RATE_PER_MINUTE: '1000000',
    OAUTH_RATE_PER_MINUTE: '1000000',
    ...opts.env,
  });
  const logger = opts.logTo
    ? createLogger('debug', {
        write: (chunk: string) =>
          void String(chunk)
            .split('\n')
            .filter(Boolean)
            .forEach((l) => opts.logTo!(l)),
      })
    : createLogger(config.logLevel);
  const clock = new ManualClock();
  // One drift log for every plugin of the context: a registry a test builds takes it (`deps.drift`).
  const drift = new DriftLog({ logger, now: () => clock.now() });
  const deps: HostedProviderDeps = {
    logger,
    clock,
    dataSource: ds,
    production: false,
    labelPrefix: LABEL_PREFIX,
    drift,
  };
  const providers = opts.registry
    ? await opts.registry(config.providers, deps)
    : await createProviderRegistry(config.providers, deps);
  const services = createServices({
    config,
    ds,
    clock,
    logger,
    providers,
    rentalHandoff: opts.rentalHandoff,
    clientMetadataCa: opts.clientMetadataCa,
  });
  const app = createApp(services, opts.app);
  const ctx: TestContext = {
    config,
    services,
    app,
    api: supertest.agent(app),
    clock,
    inventoryPath,
    async setInventory(offers) {
      writeFileSync(inventoryPath, JSON.stringify({ offers }));
      await services.inventory.refresh();
      services.inventory.invalidate();
    },
    async close() {
      await services.eventHub.stop();
      await providers.close();
    },
  };
  await services.inventory.refresh();
  services.inventory.invalidate();
  return ctx;
}
