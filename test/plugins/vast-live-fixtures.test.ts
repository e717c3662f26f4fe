import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { makeVastHarness, type VastHarness } from './vast-harness.js';

const DIR = new URL('../fixtures/providers/vast/', import.meta.url);
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- recorded bodies of many shapes, read field by field
const json = (file: string): any => JSON.parse(readFileSync(new URL(file, DIR), 'utf8'));

/**
 * The recorded Vast answers that matter on the wire, served by the fake and read through the
 * plugin's client; what the parsers alone make of every fixture is test/unit/vast-live-fixtures.test.ts.
 */
describe('vast plugin over the recorded live answers', () => {
  describe('through the client, served by the fake', () => {
    let h: VastHarness;
    beforeEach(async () => {
      h = await makeVastHarness();
    });
    afterEach(async () => h.cleanup());

    for (const file of ['show-instance-null-after-destroy.json', 'show-instance-empty-array-after-destroy.json']) {
      it(`show-instance answering ${file} reads as gone`, async () => {
        h.fake.respondNext('get', 200, json(file));
        assert.deepEqual(await h.provider.get('12345678'), {
          instanceId: '12345678',
          label: '',
          state: 'gone',
          providerState: 'destroyed',
        });
      });
    }

    for (const [file, status] of [
      ['destroy-404-no-such-instance.json', 404],
      ['destroy-200-no-such-instance.json', 200],
    ] as const) {
      it(`destroy answered ${status} ${file} succeeds`, async () => {
        h.fake.respondNext('destroy', status, json(file));
        await h.provider.destroy('12345678');
      });
    }

    for (const file of [
      'show-instance-created-oci-failure.json',
      'show-instance-loading-intended-stopped.json',
      'show-instance-destroyed.json',
    ]) {
      it(`show-instance holding ${file} reads as ${file.includes('destroyed') ? 'gone' : 'failed'}`, async () => {
        h.fake.respondNext('get', 200, { instances: { ...json(file), id: 12345678, label: 'x' } });
        assert.equal((await h.provider.get('12345678')).state, file.includes('destroyed') ? 'gone' : 'failed');
      });
    }
  });
});
