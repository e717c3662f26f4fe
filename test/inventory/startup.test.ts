import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import supertest from 'supertest';
import type { DataSource } from 'typeorm';
import { createApp } from '../../src/app.js';
import { systemClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { createServices } from '../../src/container.js';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import { createLogger } from '../../src/logger.js';
import type { ProviderOffer } from '../../src/providers/provider.js';
import { ProviderRegistry } from '../../src/providers/provider-registry.js';
import { startWorker } from '../../src/worker.js';
import { waitFor } from '../helpers/wait.js';
import { addScriptedCloud, cloudOffer } from './scripted-provider.js';

describe('start-up with a provider that has not answered yet', () => {
  // A database of its own: the worker started here schedules the repeating jobs of a real process.
  const url = (() => {
    const u = new URL(process.env.TEST_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/');
    u.pathname = `/gpu_rental_startup_${randomBytes(4).toString('hex')}`;
    return u.toString();
  })();
  let ds: DataSource;
  before(async () => {
    await createDatabaseIfMissing(url);
    ds = createDataSource(url, 10, entities);
    await ds.initialize();
    await migrate(ds);
  });
  after(async () => {
    await ds.destroy();
    await dropDatabase(url);
  });

  const boot = (registry: ProviderRegistry) => {
    const config = loadConfig({
      DATABASE_URL: url,
      LOG_LEVEL: 'silent',
      PUBLIC_BASE_URL: 'http://gpu.test',
      JOBS_PROCESS_EVERY_MS: '50',
    });
    return createServices({ config, ds, clock: systemClock, logger: createLogger('silent'), providers: registry });
  };

  it('serves the offers MySQL holds at once, and the fresh ones when the provider answers', async () => {
    const registry = new ProviderRegistry();
    const acme = addScriptedCloud(registry, 'acme');
    acme.offers = [
      cloudOffer({ key: 'a-1', pricePerHourMinor: 210 }),
      cloudOffer({ key: 'a-2', pricePerHourMinor: 220 }),
    ];
    // What an earlier run of the worker left in the cache.
    await boot(registry).inventory.refresh();

    const answers: Array<(offers: ProviderOffer[]) => void> = [];
    acme.calls = 0;
    acme.listOffers = () => {
      acme.calls++;
      return new Promise((resolve) => answers.push(resolve));
    };
    const services = boot(registry);
    const api = supertest(createApp(services));
    const worker = await startWorker(services);
    try {
      assert.ok(acme.calls >= 1, 'the start-up refresh has asked the provider');
      assert.equal(answers.length, acme.calls, 'and it has not answered');
      const cached = await api.get('/api/v1/offers');
      assert.equal(cached.status, 200);
      assert.deepEqual(
        cached.body.data.map((o: { pricePerHourMinor: number }) => o.pricePerHourMinor),
        [210, 220],
      );
      assert.equal((await api.get('/healthz')).status, 200);

      const fresh = [cloudOffer({ key: 'a-3', pricePerHourMinor: 199 })];
      for (const answer of answers.splice(0)) answer(fresh);
      await waitFor(
        async () => {
          services.inventory.invalidate();
          const body = (await api.get('/api/v1/offers')).body;
          return body.data.length === 1 && body.data[0].pricePerHourMinor === 199;
        },
        { timeoutMs: 10_000, what: 'the refreshed offers' },
      );
    } finally {
      for (const answer of answers.splice(0)) answer([]);
      await worker.stop();
    }
  });
});
