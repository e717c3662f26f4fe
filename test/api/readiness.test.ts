import assert from 'node:assert/strict';
import supertest from 'supertest';
import type { DataSource } from 'typeorm';
import { migrations } from '../../migrations/index.js';
import { createApp } from '../../src/app.js';
import { createServices } from '../../src/container.js';
import { createDatabaseIfMissing, createDataSource, migrate } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import { readinessProbe } from '../../src/readiness.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { databaseBefore } from '../helpers/migrated-before.js';
import { startPrivateMariaDb, type PrivateMariaDb } from '../helpers/private-mariadb.js';
import { waitFor } from '../helpers/wait.js';

describe('GET /readyz', function () {
  this.timeout(90_000);
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('is 200 with every check ok while the database answers, migrations are applied and inventory is fresh', async () => {
    const res = await ctx.api.get('/readyz');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.data, {
      status: 'ready',
      checks: { database: 'ok', migrations: 'ok', inventory: 'ok' },
      providers: { local: 'ok' },
    });
    assert.equal(res.headers['cache-control'], 'no-store');
  });

  it('reports each configured cloud: degraded, not down, while another serves, naming the setting to look at', async () => {
    const statuses = (vast: { status: 'ok' | 'degraded' | 'down'; lastErrorClass: string | null }, runpod = vast) => [
      { id: 'vast', status: vast.status, lastErrorClass: vast.lastErrorClass },
      { id: 'runpod', status: runpod.status, lastErrorClass: runpod.lastErrorClass },
      { id: 'lambda', status: 'ok', lastErrorClass: null },
    ];
    let now = statuses(
      { status: 'down', lastErrorClass: 'auth' },
      { status: 'degraded', lastErrorClass: 'unavailable' },
    );
    const inventory = {
      servableOffers: async () => ({ live: 3, agedOut: false }),
      providerStatuses: async () => now,
    } as unknown as TestContext['services']['inventory'];
    let t = 0;
    const probe = readinessProbe({ ...ctx.services, inventory }, ['api'], { nowMs: () => t });
    const app = supertest(createApp(ctx.services, { readiness: probe }));
    const res = await app.get('/readyz');
    assert.equal(res.status, 200, 'another cloud serves');
    assert.equal(res.body.data.status, 'degraded');
    assert.deepEqual(res.body.data.providers, { vast: 'down', runpod: 'degraded', lambda: 'ok' });
    assert.deepEqual(res.body.data.advice, [
      'vast down: VAST_PROVIDER_API_KEY refused (auth)',
      'runpod degraded: RUNPOD_PROVIDER_API_URL unreachable (unavailable)',
    ]);
    now = statuses({ status: 'ok', lastErrorClass: null });
    t += 2000;
    const back = await app.get('/readyz');
    assert.equal(back.body.data.status, 'ready');
    assert.equal(back.body.data.advice, undefined);
  });

  it('is 503 naming the inventory once its offers are older than OFFER_MAX_AGE_SECONDS, and 200 by itself after a refresh', async () => {
    const stale = await createTestContext();
    try {
      stale.clock.advance(stale.config.inventory.offerMaxAgeSeconds * 1000 + 1000);
      const res = await stale.api.get('/readyz');
      assert.equal(res.status, 503);
      assert.equal(res.body.error.code, 'UNAVAILABLE');
      assert.match(res.body.error.message, /OFFER_MAX_AGE_SECONDS/);
      assert.deepEqual(res.body.checks, { database: 'ok', migrations: 'ok', inventory: 'failed' });
      // A worker-only process does not answer for the inventory, which it is the one to refresh.
      assert.deepEqual(await readinessProbe(stale.services, ['worker'])(), {
        ready: true,
        checks: { database: 'ok', migrations: 'ok' },
      });
      await stale.services.inventory.refresh();
      // An answer serves every caller for a second: the next one after it sees the refresh.
      await waitFor(async () => (await stale.api.get('/readyz')).status === 200, {
        timeoutMs: 30_000,
        what: '/readyz after the refresh',
      });
    } finally {
      await stale.close();
    }
  });

  it('is 503 naming the migrations while some are pending', async () => {
    const before = await databaseBefore(migrations[migrations.length - 1], 'readyz');
    try {
      const services = createServices({
        config: ctx.config,
        ds: before.ds,
        clock: ctx.clock,
        logger: ctx.services.logger,
        providers: ctx.services.providers,
      });
      const res = await supertest(createApp(services)).get('/readyz');
      assert.equal(res.status, 503);
      assert.deepEqual(res.body.checks, { database: 'ok', migrations: 'failed', inventory: 'skipped' });
      assert.match(res.body.error.message, /migrations are pending/);
      await services.eventHub.stop();
    } finally {
      await before.close();
    }
  });

  describe('with a database that goes away', () => {
    let server: PrivateMariaDb;
    let ds: DataSource;
    let own: TestContext;
    before(async () => {
      server = await startPrivateMariaDb([]);
      const url = `${server.url}gpu_rental_readyz_${Date.now().toString(36)}`;
      await createDatabaseIfMissing(url);
      ds = createDataSource(url, 2, entities);
      await ds.initialize();
      await migrate(ds);
      own = await createTestContext({ database: { ds, url } });
    });
    after(async () => {
      await own?.close();
      if (ds?.isInitialized) await ds.destroy();
      await server?.stop();
    });

    it('is 503 naming the database while it is down, /healthz staying 200, and 200 again once it is back', async () => {
      assert.equal((await own.api.get('/readyz')).status, 200);
      await server.halt();
      const down = await waitFor(
        async () => {
          const res = await own.api.get('/readyz');
          return res.status === 503 && res;
        },
        { timeoutMs: 30_000, what: '/readyz once the database is down' },
      );
      assert.deepEqual(down.body.checks, { database: 'failed', migrations: 'skipped', inventory: 'skipped' });
      assert.equal(
        down.body.error.message,
        'Not ready: the database is not reachable.',
        'nothing of what the driver said',
      );
      assert.equal((await own.api.get('/healthz')).status, 200, 'liveness does not depend on the database');
      await server.resume();
      const back = await waitFor(
        async () => {
          const res = await own.api.get('/readyz');
          return res.status === 200 && res;
        },
        { timeoutMs: 30_000, what: '/readyz after the database came back' },
      );
      assert.equal(back.body.data.checks.database, 'ok');
    });
  });
});
