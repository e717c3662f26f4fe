import assert from 'node:assert/strict';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { InventoryRefresher } from '../../src/modules/inventory/inventory-refresh.js';
import { UPSERT_BATCH_ROWS } from '../../src/modules/inventory/offers.repository.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { ProviderRegistry } from '../../src/providers/provider-registry.js';
import { createStore } from '../../src/repositories.js';
import { testDataSource } from '../helpers/db.js';
import { addScriptedCloud, cloudOffer } from './scripted-provider.js';

describe('inventory refresh in batches', () => {
  const N = 1_234;
  const registry = new ProviderRegistry();
  const bulk = addScriptedCloud(registry, 'bulk-cloud');
  const clock = new ManualClock();

  after(async () => {
    bulk.offers = [];
    await new InventoryRefresher(
      createStore(await testDataSource()),
      registry,
      clock,
      createLogger('silent'),
      600,
    ).refreshAll();
  });

  /** The SQL statements the refresh sends, as the DataSource's query runners report them. */
  async function statementsOf(run: () => Promise<unknown>): Promise<string[]> {
    const ds = await testDataSource();
    const sent: string[] = [];
    const logQuery = ds.logger.logQuery.bind(ds.logger);
    ds.logger.logQuery = (query, parameters, runner) => {
      sent.push(query.replace(/\s+/g, ' ').trim());
      return logQuery(query, parameters, runner);
    };
    try {
      await run();
    } finally {
      ds.logger.logQuery = logQuery;
    }
    return sent;
  }

  it(`writes ${N} offers in a bounded number of statements, and takes vanished ones off the same way`, async () => {
    const ds = await testDataSource();
    const sut = new InventoryRefresher(createStore(ds), registry, clock, createLogger('silent'), 600);
    bulk.offers = Array.from({ length: N }, (_, i) =>
      cloudOffer({ key: `bulk-${i}`, pricePerHourMinor: 100 + i, region: `r-${i % 5}` }),
    );
    const first = await statementsOf(() => sut.refreshAll());
    const batches = Math.ceil(N / UPSERT_BATCH_ROWS);
    assert.equal(first.filter((q) => q.startsWith('INSERT INTO offers')).length, batches);
    // Begin, lock, read, the batches, version, status, commit; then the unconfigured sweep.
    assert.ok(
      first.length <= batches + 12,
      `${first.length} statements: ${first.map((q) => q.slice(0, 40)).join(' | ')}`,
    );
    const live = await ds.getRepository(Offer).findBy({ provider: 'bulk-cloud', available: true });
    assert.equal(live.length, N);
    const sample = live.find((o) => o.providerOfferKey === 'bulk-7')!;
    assert.deepEqual(
      [sample.pricePerHourMinor, sample.costPerHourMinor, sample.region, sample.slug],
      [107, 107, 'r-2', 'h100-sxm'],
    );

    // Half vanish, and one changes region: the rest is upserted in place, the vanished marked unavailable.
    bulk.offers = bulk.offers.slice(0, N / 2).map((o, i) => (i === 7 ? { ...o, region: 'moved' } : o));
    const second = await statementsOf(() => sut.refreshAll());
    assert.ok(second.length <= batches + 12, `${second.length} statements`);
    const after = await ds.getRepository(Offer).findBy({ provider: 'bulk-cloud', available: true });
    assert.equal(after.length, N / 2);
    assert.equal(after.find((o) => o.providerOfferKey === 'bulk-7')!.region, 'moved');
    assert.equal(
      (await ds.getRepository(Offer).findOneBy({ id: sample.id }))!.firstSeenAt.getTime(),
      sample.firstSeenAt.getTime(),
    );
  });
});
