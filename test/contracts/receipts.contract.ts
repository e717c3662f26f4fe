import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { NewSigningKey, ReceiptsRepository } from '../../src/modules/receipts/receipts.repository.js';
import type { TeardownReceipt } from '../../src/modules/receipts/teardown-receipt.entity.js';

type ReceiptsStore = Store<{ receipts: ReceiptsRepository }>;

const T0 = new Date('2026-05-01T12:00:00.250Z');

/** A pair as the service adds it, sealed (here: random bytes) under SECRETS_KEY id `kid`. */
function newKey(kid: string, o: Partial<NewSigningKey> = {}): NewSigningKey {
  return {
    id: `rk_${randomBytes(8).toString('hex')}`,
    publicKey: randomBytes(32),
    privateKeySealed: randomBytes(72),
    kid,
    createdAt: T0,
    ...o,
  };
}

function newReceipt(o: Partial<TeardownReceipt> = {}): TeardownReceipt {
  return {
    deploymentId: randomUUID(),
    rentalId: randomUUID(),
    body: `{"rentalId":"${randomUUID()}"}`,
    signingKeyId: 'rk_x',
    signature: 'A'.repeat(86),
    issuedAt: T0,
    ...o,
  };
}

/**
 * What every store's receipts repository does, run on MariaDB (test/store/) and on the memory
 * store (test/unit/). Retiring is global (every key active under another id), so each test
 * judges only the keys it made.
 */
export function receiptsContract(kind: string, makeStore: () => Promise<ReceiptsStore>): void {
  describe(`receipts repository (${kind})`, () => {
    let store: ReceiptsStore;
    before(async () => (store = await makeStore()));

    const kid = () => `k-${randomBytes(4).toString('hex')}`;
    const publicOf = async (id: string) => (await store.read((r) => r.receipts.publicKeys())).find((k) => k.id === id);

    it('keeps one active key per SECRETS_KEY id: a second is refused and the first stays, with every field', async () => {
      const k = kid();
      const first = newKey(k);
      assert.equal(await store.read((r) => r.receipts.addKey(first)), true);
      assert.equal(await store.read((r) => r.receipts.addKey(newKey(k))), false);
      const active = await store.read((r) => r.receipts.activeKey(k));
      assert.ok(active);
      assert.deepEqual(
        { ...active, createdAt: active.createdAt.getTime() },
        {
          id: first.id,
          publicKey: first.publicKey,
          privateKeySealed: first.privateKeySealed,
          privateKeyKid: k,
          activeForKid: k,
          createdAt: T0.getTime(),
          retiredAt: null,
        },
      );
      assert.ok(Buffer.isBuffer(active.publicKey) && Buffer.isBuffer(active.privateKeySealed));
      assert.equal(await store.read((r) => r.receipts.activeKey(kid())), null);
    });

    it('retires every key active under another id: private half erased, public half kept, retiredAt stamped', async () => {
      const [old, current] = [kid(), kid()];
      const before = newKey(old);
      const now = newKey(current, { createdAt: new Date(T0.getTime() + 1000) });
      await store.read((r) => r.receipts.addKey(before));
      await store.read((r) => r.receipts.addKey(now));
      const at = new Date(T0.getTime() + 5000);
      assert.ok((await store.read((r) => r.receipts.retireOthers(current, at))) >= 1);
      assert.equal(await store.read((r) => r.receipts.activeKey(old)), null);
      assert.equal((await store.read((r) => r.receipts.activeKey(current)))?.id, now.id);
      const retired = await publicOf(before.id);
      assert.deepEqual(retired && { ...retired, retiredAt: retired.retiredAt?.getTime() }, {
        id: before.id,
        publicKey: before.publicKey,
        createdAt: T0,
        retiredAt: at.getTime(),
      });
      assert.equal((await publicOf(now.id))?.retiredAt, null);
      // The private half is gone: nothing of it is left for re-sealing to find.
      const sealed = await store.read((r) => r.receipts.sealed.signingKeys.underOtherKeys('none', '', 10_000));
      assert.ok(!sealed.some((s) => s.id === before.id));
      assert.ok(sealed.some((s) => s.id === now.id));
      // Retiring again retires nothing more; a new key may be made under the retired key's id.
      assert.equal(await store.read((r) => r.receipts.retireOthers(current, at)), 0);
      assert.equal(await store.read((r) => r.receipts.addKey(newKey(old))), true);
    });

    it('retires one key by its id, once: the private half erased, the others untouched', async () => {
      const [a, b] = [newKey(kid()), newKey(kid())];
      await store.read((r) => r.receipts.addKey(a));
      await store.read((r) => r.receipts.addKey(b));
      const at = new Date(T0.getTime() + 9000);
      assert.equal(await store.read((r) => r.receipts.retireKey(a.id, at)), true);
      assert.equal(await store.read((r) => r.receipts.retireKey(a.id, at)), false);
      assert.equal(await store.read((r) => r.receipts.activeKey(a.kid)), null);
      assert.equal((await publicOf(a.id))?.retiredAt?.getTime(), at.getTime());
      assert.equal(
        (await store.read((r) => r.receipts.activeKey(b.kid)))?.privateKeySealed?.equals(b.privateKeySealed!),
        true,
      );
    });

    it('lists public halves oldest first, never a private half', async () => {
      const later = newKey(kid(), { createdAt: new Date(T0.getTime() + 60_000) });
      const earlier = newKey(kid(), { createdAt: new Date(T0.getTime() - 60_000) });
      await store.read((r) => r.receipts.addKey(later));
      await store.read((r) => r.receipts.addKey(earlier));
      const keys = await store.read((r) => r.receipts.publicKeys());
      const ids = keys.map((k) => k.id).filter((id) => id === later.id || id === earlier.id);
      assert.deepEqual(ids, [earlier.id, later.id]);
      for (const k of keys) assert.deepEqual(Object.keys(k).sort(), ['createdAt', 'id', 'publicKey', 'retiredAt']);
    });

    it('re-seals an active private half in place, guarded on what was read', async () => {
      const k = newKey(kid());
      await store.read((r) => r.receipts.addKey(k));
      const column = (r: { receipts: ReceiptsRepository }) => r.receipts.sealed.signingKeys;
      const [row] = (await store.read((r) => column(r).underOtherKeys('other', '', 10_000))).filter(
        (s) => s.id === k.id,
      );
      assert.deepEqual(row, { id: k.id, sealed: k.privateKeySealed, keyId: k.kid });
      const next = { sealed: randomBytes(72), keyId: 'k-next' };
      assert.equal(await store.read((r) => column(r).replace(row, next)), true);
      assert.equal(
        await store.read((r) => column(r).replace(row, next)),
        false,
        'the row no longer holds what was read',
      );
      const active = await store.read((r) => r.receipts.activeKey(k.kid));
      assert.deepEqual([active?.privateKeySealed, active?.privateKeyKid], [next.sealed, 'k-next']);
      assert.ok(((await store.read((r) => column(r).countsByKey()))['k-next'] ?? 0) >= 1);
    });

    it('stores one receipt per deployment: a second is refused and the first kept', async () => {
      const first = newReceipt();
      assert.equal(await store.transaction((r) => r.receipts.addReceipt(first)), true);
      assert.equal(
        await store.transaction((r) => r.receipts.addReceipt({ ...newReceipt(), deploymentId: first.deploymentId })),
        false,
      );
      const found = await store.read((r) => r.receipts.receiptOf(first.deploymentId));
      assert.deepEqual(found && { ...found }, first);
      assert.equal(await store.read((r) => r.receipts.receiptOf(randomUUID())), null);
    });

    it('writes no receipt when its transaction rolls back', async () => {
      const lost = newReceipt();
      await store.transaction(async (r, tx) => {
        await r.receipts.addReceipt(lost);
        tx.rollBackAtEnd();
      });
      assert.equal(await store.read((r) => r.receipts.receiptOf(lost.deploymentId)), null);
    });
  });
}
