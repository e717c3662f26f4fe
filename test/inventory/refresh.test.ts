import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { InventoryRefresher } from '../../src/modules/inventory/inventory-refresh.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { ProviderRegistry } from '../../src/providers/provider-registry.js';
import { createStore } from '../../src/repositories.js';
import { testDataSource } from '../helpers/db.js';
import { addScriptedCloud, cloudOffer, ScriptedCloud } from './scripted-provider.js';

/** A logger whose JSON lines the test can read. */
function recordingLogger() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: createLogger('info', sink), lines };
}

describe(InventoryRefresher.name, () => {
  let registry: ProviderRegistry;
  let fine: ScriptedCloud;
  let clock: ManualClock;
  before(() => {
    registry = new ProviderRegistry();
    fine = addScriptedCloud(registry, 'fine-cloud');
    clock = new ManualClock();
  });
  after(async () => {
    // Take this suite's offers off the shared cache.
    fine.offers = [];
    const { logger } = recordingLogger();
    await new InventoryRefresher(createStore(await testDataSource()), registry, clock, logger, 600).refreshAll();
  });

  it('gives up on a provider that never answers, as a timeout, without holding back the others', async () => {
    const hanging = new ScriptedCloud('hanging-cloud');
    hanging.listOffers = () => new Promise(() => undefined);
    const withHanging = new ProviderRegistry([
      ...registry.registered(),
      { id: 'hanging-cloud', description: 'never answers', markupPercent: 0, provider: hanging },
    ]);
    fine.offers = [cloudOffer({ key: 'f-1' })];
    const { logger } = recordingLogger();
    const sut = new InventoryRefresher(createStore(await testDataSource()), withHanging, clock, logger, 600, 50);
    const results = await sut.refreshAll();
    assert.deepEqual(
      results.map((r) => [r.provider, r.ok, r.errorClass]),
      [
        ['fine-cloud', true, undefined],
        ['hanging-cloud', false, 'timeout'],
      ],
    );
    assert.equal(
      (await (await testDataSource()).getRepository(Offer).findBy({ provider: 'fine-cloud', available: true })).length,
      1,
    );
  });

  it('takes the offers of a provider that is no longer configured off the list', async () => {
    const retired = new ScriptedCloud('retired-cloud');
    retired.offers = [cloudOffer({ key: 'r-1' })];
    const { logger } = recordingLogger();
    const ds = await testDataSource();
    const before = new ProviderRegistry([
      ...registry.registered(),
      { id: 'retired-cloud', description: 'soon gone', markupPercent: 0, provider: retired },
    ]);
    await new InventoryRefresher(createStore(ds), before, clock, logger, 600).refreshAll();
    assert.equal((await ds.getRepository(Offer).findBy({ provider: 'retired-cloud', available: true })).length, 1);
    // The next refresh runs with PROVIDERS no longer naming it: its fresh rows stop being for sale.
    await new InventoryRefresher(createStore(ds), registry, clock, logger, 600).refreshAll();
    assert.equal((await ds.getRepository(Offer).findBy({ provider: 'retired-cloud', available: true })).length, 0);
  });

  it('logs a GPU name the catalog does not know once per process, and keeps its offers', async () => {
    fine.offers = [
      cloudOffer({ key: 'z-1', name: 'Zeta Accelerator 7' }),
      cloudOffer({ key: 'z-2', name: 'Zeta Accelerator 7', gpuCount: 2 }),
    ];
    const { logger, lines } = recordingLogger();
    const sut = new InventoryRefresher(createStore(await testDataSource()), registry, clock, logger, 600);
    await sut.refreshAll();
    await sut.refreshAll();
    const warned = lines.filter((l) => l.gpuName === 'Zeta Accelerator 7');
    assert.equal(warned.length, 1);
    assert.equal(warned[0].slug, 'zeta-accelerator-7');
    const rows = await (
      await testDataSource()
    )
      .getRepository(Offer)
      .findBy({ provider: 'fine-cloud', available: true });
    assert.deepEqual(
      rows.map((r) => [r.slug, r.name]),
      [
        ['zeta-accelerator-7', 'Zeta Accelerator 7'],
        ['zeta-accelerator-7', 'Zeta Accelerator 7'],
      ],
    );
  });
});
