import assert from 'node:assert/strict';
import vastPlugin from '../../plugins/vast/index.js';
import { VastProvider } from '../../plugins/vast/provider.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { createProviderRegistry, loadPlugin } from '../../src/providers/provider-registry.js';
import { testDataSource } from '../helpers/db.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

// The state table and the option checks are unit tests (test/unit/vast-tables.test.ts); these build the provider, whose deps hold a DataSource.
describe('vast options: the plugin and the registry', () => {
  it('the plugin builds a provider with the documented capabilities', async () => {
    const deps = {
      logger: createLogger('silent'),
      clock: systemClock,
      dataSource: await testDataSource(),
      production: true,
      labelPrefix: 'x-',
      drift: IGNORE_DRIFT,
    };
    const p = await vastPlugin.create(vastPlugin.validateOptions({ API_KEY: 'k' }), deps);
    assert.ok(p instanceof VastProvider);
    assert.equal(p.id, vastPlugin.id);
    assert.deepEqual(p.capabilities, { labels: true, sshKeyPerInstance: true, listInstances: true });
    await p.close?.();
    const loaded = await loadPlugin('vast');
    assert.deepEqual([loaded.id, loaded.description], [vastPlugin.id, vastPlugin.description]);
    assert.throws(() => loaded.validateOptions({}), /VAST_PROVIDER_API_KEY/);
  });

  it('starts through the registry, which refuses an unknown VAST_PROVIDER_ name', async () => {
    const deps = {
      logger: createLogger('silent'),
      clock: systemClock,
      dataSource: await testDataSource(),
      production: false,
      labelPrefix: 'x-',
    };
    const config = [{ id: 'vast', options: { API_KEY: 'k', DISK_GB: '48' }, markupPercent: 15 }];
    const registry = await createProviderRegistry(config, deps);
    assert.deepEqual(
      registry.all().map((p) => p.id),
      ['vast'],
    );
    await registry.close();
    await assert.rejects(
      createProviderRegistry([{ id: 'vast', options: { APIKEY: 'k' }, markupPercent: 0 }], deps),
      /VAST_PROVIDER_APIKEY is not an option/,
    );
  });
});
