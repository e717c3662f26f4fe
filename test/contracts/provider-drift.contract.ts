import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { ProviderDriftRepository } from '../../src/modules/inventory/provider-drift.repository.js';
import type { DriftTally } from '../../src/providers/drift-log.js';
import { shapeHash, type Shape } from '../../src/providers/kit/drift.js';

type DriftStore = Store<{ providerDrift: ProviderDriftRepository }>;

/** A time on the server's precision (milliseconds). */
const at = (offsetMs: number) => new Date(Date.UTC(2026, 10, 20, 12, 0, 0) + offsetMs);

function tally(provider: string, shape: Shape, o: Partial<DriftTally> = {}): DriftTally {
  return {
    provider,
    kind: 'unknown_state',
    where: 'instance actual_status',
    shape,
    shapeHash: shapeHash(shape),
    firstSeenAt: at(0),
    lastSeenAt: at(0),
    seen: 1,
    ...o,
  };
}

/**
 * What every store's drift report does, run on MariaDB (test/store/) and on the memory store
 * (test/unit/). Each test records shapes of providers of its own: the MariaDB table is shared by
 * the files of a worker, so reads are narrowed to them.
 */
export function providerDriftContract(kind: string, makeStore: () => Promise<DriftStore>): void {
  describe(`provider drift repository (${kind})`, () => {
    let store: DriftStore;
    let provider: string;
    before(async () => (store = await makeStore()));
    beforeEach(() => (provider = `d-${randomUUID().slice(0, 12)}`));

    const record = (batch: DriftTally[], max = 200) => store.read((r) => r.providerDrift.record(batch, max));
    const listOf = (p: string) => store.read((r) => r.providerDrift.list(p));

    it('keeps one row per provider, kind, call and shape, adding counts and widening first and last seen', async () => {
      const shape = { state: 'hibernating' };
      await record([tally(provider, shape, { firstSeenAt: at(1000), lastSeenAt: at(2000), seen: 2 })]);
      await record([tally(provider, shape, { firstSeenAt: at(500), lastSeenAt: at(1500), seen: 3 })]);
      await record([tally(provider, shape, { firstSeenAt: at(3000), lastSeenAt: at(4000), seen: 1 })]);
      assert.deepEqual(await listOf(provider), [
        {
          provider,
          kind: 'unknown_state',
          where: 'instance actual_status',
          shape,
          firstSeenAt: at(500),
          lastSeenAt: at(4000),
          seen: 6,
        },
      ]);
    });

    it('tells shapes, kinds and calls apart, and lists them in order', async () => {
      const a = { state: 'a' };
      const page = { next_token: 'number' };
      await record([
        tally(provider, { state: 'b' }, { firstSeenAt: at(10) }),
        tally(provider, a, { firstSeenAt: at(20) }),
        tally(provider, page, { kind: 'unknown_page_shape', where: 'GET /api/v1/instances/' }),
        tally(provider, a, { where: 'pod status' }),
      ]);
      const listed = await listOf(provider);
      assert.deepEqual(
        listed.map((r) => [r.kind, r.where, r.shape]),
        [
          ['unknown_page_shape', 'GET /api/v1/instances/', page],
          ['unknown_state', 'instance actual_status', { state: 'b' }],
          ['unknown_state', 'instance actual_status', a],
          ['unknown_state', 'pod status', a],
        ],
      );
    });

    it('keeps at most the bound of shapes per provider, counting on those it has and refusing new ones', async () => {
      const other = `${provider}-x`;
      const first = await record(
        [tally(provider, { state: 's1' }), tally(provider, { state: 's2' }), tally(provider, { state: 's3' })],
        2,
      );
      assert.deepEqual(first, { refused: 1 });
      const again = await record([tally(provider, { state: 's1' }, { seen: 4 }), tally(other, { state: 's3' })], 2);
      assert.deepEqual(again, { refused: 0 }, 'a known shape still counts; another provider has a bound of its own');
      assert.deepEqual(
        (await listOf(provider)).map((r) => [r.shape, r.seen]),
        [
          [{ state: 's1' }, 5],
          [{ state: 's2' }, 1],
        ],
      );
      assert.equal((await listOf(other)).length, 1);
    });

    it("counts each provider's shapes and sightings", async () => {
      await record([
        tally(provider, { state: 'x' }, { seen: 3 }),
        tally(provider, { a: 'number' }, { kind: 'unknown_field_shape', where: 'GET /v2/pods/{id}', seen: 2 }),
      ]);
      const counts = await store.read((r) => r.providerDrift.counts());
      assert.deepEqual(counts.get(provider), { shapes: 2, seen: 5 });
      assert.equal(counts.get(`${provider}-none`), undefined);
    });

    it('lists every provider without a filter', async () => {
      await record([tally(provider, { state: 'y' })]);
      const all = await store.read((r) => r.providerDrift.list());
      assert.ok(all.some((r) => r.provider === provider));
    });
  });
}
