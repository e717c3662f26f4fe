import assert from 'node:assert/strict';
import localPlugin from '../../plugins/local/index.js';
import { parseInventory, type LocalInventoryOffer } from '../../plugins/local/inventory.js';

/** The first of test/plugins/local-harness.ts's TEST_OFFERS, without that harness's database. */
const OFFER: LocalInventoryOffer = {
  key: 'h100-1x',
  name: 'NVIDIA H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  cpuCores: 8,
  memoryGb: 32,
  storageGb: 100,
  pricePerHourMinor: 100,
  maximumDurationSeconds: 86400,
  provisionSeconds: 0.2,
};

describe('LocalProvider plugin loading', () => {
  it('rejects unknown options and bad destroy modes with messages naming them', () => {
    assert.throws(() => localPlugin.validateOptions({ INVENTROY: 'x' }), /LOCAL_PROVIDER_INVENTROY/);
    assert.throws(
      () => parseInventory({ offers: [{ ...OFFER, destroy: 'maybe' }] }, 'inv.json'),
      /offers\[0\].*"destroy" must be one of ok, ignore, ghost/,
    );
    assert.equal(parseInventory({ offers: [OFFER] }, 'inv.json').offers[0].destroy, 'ok');
  });

  it('takes a block of sandbox uids above the accounts of a distribution, the default 200000-299999, and refuses one it cannot use', () => {
    assert.deepEqual(localPlugin.validateOptions({}).sandboxUids, { first: 200_000, last: 299_999 });
    assert.deepEqual(
      localPlugin.validateOptions({ SANDBOX_UID_FIRST: '400000', SANDBOX_UID_COUNT: '500' }).sandboxUids,
      { first: 400_000, last: 400_499 },
    );
    assert.throws(() => localPlugin.validateOptions({ SANDBOX_UID_FIRST: '1000' }), /LOCAL_PROVIDER_SANDBOX_UID_FIRST/);
    assert.throws(() => localPlugin.validateOptions({ SANDBOX_UID_COUNT: '0' }), /LOCAL_PROVIDER_SANDBOX_UID_COUNT/);
    assert.throws(
      () => localPlugin.validateOptions({ SANDBOX_UID_FIRST: '4294967290', SANDBOX_UID_COUNT: '10' }),
      /runs past uid 4294967294/,
    );
  });
});
