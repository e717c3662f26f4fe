import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { IdempotencyRepository } from '../../src/modules/idempotency/idempotency.repository.js';
import { claimOrReplay, idempotentRequest, priorUse } from '../../src/modules/idempotency/idempotency.js';
import { ManualClock } from '../../src/clock.js';

type IdempotencyStore = Store<{ idempotency: IdempotencyRepository }>;

/**
 * What every store's idempotency repository does, run on MariaDB (test/store/) and on the memory
 * store (test/unit/): the unit tier's services stand on the same behaviour as production's.
 */
export function idempotencyContract(kind: string, makeStore: () => Promise<IdempotencyStore>): void {
  describe(`idempotency repository (${kind})`, () => {
    let store: IdempotencyStore;
    let scope: string;
    const clock = new ManualClock(new Date('2026-05-01T00:00:00Z'));
    before(async () => (store = await makeStore()));
    beforeEach(() => (scope = `contract:${randomUUID()}`));

    it('inserts a record once per (scope, key) and finds it', async () => {
      const row = { scope, idemKey: 'k1', requestHash: 'h'.repeat(64), resourceId: null, createdAt: clock.now() };
      const first = await store.transaction((r) => r.idempotency.insert(row));
      assert.ok(first);
      assert.equal(await store.transaction((r) => r.idempotency.insert({ ...row, requestHash: 'x'.repeat(64) })), null);
      const found = await store.read((r) => r.idempotency.find(scope, 'k1'));
      assert.equal(found?.id, first.id);
      assert.equal(found?.requestHash, 'h'.repeat(64));
      assert.equal(found?.createdAt.getTime(), clock.now().getTime());
      assert.equal(await store.read((r) => r.idempotency.find(scope, 'k2')), null);
      assert.equal(await store.read((r) => r.idempotency.find(`${scope}:other`, 'k1')), null);
    });

    it('records the resource a claim created, and a replay answers it', async () => {
      const request = idempotentRequest(scope, 'k', { a: 1 });
      let created = 0;
      const steps = {
        create: async () => ({ resourceId: `res-${++created}`, result: 'made' }),
        replay: (id: string) => `replayed ${id}`,
      };
      assert.equal(await store.transaction((r) => claimOrReplay(r.idempotency, clock, request, steps)), 'made');
      assert.equal(
        await store.transaction((r) => claimOrReplay(r.idempotency, clock, request, steps)),
        'replayed res-1',
      );
      assert.equal(created, 1);
      assert.equal(await store.read((r) => priorUse(r.idempotency, request)), 'res-1');
    });

    it('refuses the same key with another body as IDEMPOTENCY_CONFLICT', async () => {
      const steps = { create: async () => ({ resourceId: 'r', result: 1 }), replay: () => 2 };
      await store.transaction((r) =>
        claimOrReplay(r.idempotency, clock, idempotentRequest(scope, 'k', { a: 1 }), steps),
      );
      const other = idempotentRequest(scope, 'k', { a: 2 });
      await assert.rejects(
        store.transaction((r) => claimOrReplay(r.idempotency, clock, other, steps)),
        (e: { code?: string }) => e.code === 'IDEMPOTENCY_CONFLICT',
      );
      await assert.rejects(
        store.read((r) => priorUse(r.idempotency, other)),
        (e: { code?: string }) => e.code === 'IDEMPOTENCY_CONFLICT',
      );
    });

    it('leaves the key free when the transaction that claimed it rolls back', async () => {
      const request = idempotentRequest(scope, 'k', {});
      await assert.rejects(
        store.transaction((r) =>
          claimOrReplay(r.idempotency, clock, request, {
            create: async () => {
              throw new Error('the create failed');
            },
            replay: () => 'replayed',
          }),
        ),
        /the create failed/,
      );
      assert.equal(await store.read((r) => priorUse(r.idempotency, request)), null);
      const ended = await store.transaction(async (r, tx) => {
        tx.rollBackAtEnd();
        return claimOrReplay(r.idempotency, clock, request, {
          create: async () => ({ resourceId: 'x', result: 'made, then rolled back' }),
          replay: () => 'replayed',
        });
      });
      assert.equal(ended, 'made, then rolled back');
      assert.equal(await store.read((r) => priorUse(r.idempotency, request)), null);
    });
  });
}
