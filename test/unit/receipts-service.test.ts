import assert from 'node:assert/strict';
import { createPublicKey, randomBytes, randomUUID } from 'node:crypto';
import { ManualClock } from '../../src/clock.js';
import { AppError } from '../../src/errors/app-error.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import { receiptKeyId, signingKeyBinding } from '../../src/modules/receipts/receipt-keys.js';
import type { ReceiptSigningKey } from '../../src/modules/receipts/receipt-signing-key.entity.js';
import { ReceiptsService, signedReceiptOf, type ReadableRental } from '../../src/modules/receipts/receipts.service.js';
import type { DestructionEvidence } from '../../src/providers/destruction-verifier.js';
import { canonicalJson } from '../../src/vocabulary/receipts.js';
import { verifyReceipt } from '../../clients/sdk/src/receipts.js';
import { newAccount } from '../contracts/accounts.contract.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

const K1 = randomBytes(32);
const K2 = randomBytes(32);
const first = new SecretBox(new Map([['k1', K1]]), 'k1');
const rotated = new SecretBox(
  new Map([
    ['k1', K1],
    ['k2', K2],
  ]),
  'k2',
);

const T0 = new Date('2026-05-01T12:00:00.000Z');
const EVIDENCE: DestructionEvidence = {
  provider: { state: 'gone', providerState: 'destroyed', httpStatus: 404, checkedAt: new Date(T0.getTime() + 1000) },
  ssh: { outcome: 'refused', checkedAt: new Date(T0.getTime() + 2000) },
};
const NOBODY = {} as Principal;

describe(ReceiptsService.name, () => {
  let store: ReturnType<typeof memoryStore>;
  let clock: ManualClock;
  let rentals: Map<string, ReadableRental>;

  beforeEach(() => {
    store = memoryStore();
    clock = new ManualClock(T0);
    rentals = new Map();
  });

  const service = (box: SecretBox) =>
    new ReceiptsService(
      store,
      clock,
      box,
      async (_principal, id) => {
        const r = rentals.get(id);
        if (!r) throw new AppError('NOT_FOUND', 'No rental with this id is visible to this key.');
        return r;
      },
      { issuer: 'https://gpu.example.com' },
    );

  const keyRows = () => store.tables.table<ReceiptSigningKey>('receipt_signing_keys').all();

  /** A credit rental's deployment ended now, its receipt issued by `sut` in one transaction; answers the served receipt. */
  async function issued(sut: ReceiptsService, o: { charges?: number[] } = {}) {
    const account = newAccount();
    const d = {
      id: randomUUID(),
      orderId: randomUUID(),
      providerId: 'vast',
      instanceId: '31337',
      label: 'gpr-test-1',
      startedAt: T0,
    };
    rentals.set(d.orderId, { rentalId: d.orderId, deploymentId: d.id, status: 'TERMINATED', funding: 'CREDITS' });
    const issue = await sut.issuerFor({ funding: 'CREDITS', currency: 'USD' }, EVIDENCE);
    assert.ok(issue);
    await store.transaction(async (r) => {
      await r.accounts.insert(account);
      for (const [i, amountMinor] of (o.charges ?? []).entries())
        await r.ledger.insert({
          accountId: account.id,
          keyId: null,
          rentalId: d.orderId,
          kind: amountMinor < 0 ? 'USAGE' : 'REVERSAL',
          amountMinor,
          balanceAfterMinor: 0,
          externalRef: `t:${d.id}:${i}`,
          description: 'test',
          createdAt: T0,
        });
      await issue(r, d, new Date(T0.getTime() + 3000));
    });
    return { d, served: await sut.forRental(NOBODY, d.orderId) };
  }

  it('signs one key per SECRETS_KEY id, sealed: processes racing to make it keep one', async () => {
    const [a, b] = await Promise.all([service(first).signer(), service(first).signer()]);
    assert.equal(a.keyId, b.keyId);
    const rows = keyRows();
    assert.equal(rows.length, 1);
    const [row] = rows;
    assert.equal(row.id, receiptKeyId(Buffer.from(row.publicKey)));
    assert.match(row.id, /^rk_[a-z2-7]{16}$/);
    assert.equal(row.privateKeyKid, 'k1');
    // The private half is stored only sealed: the plaintext `d` is nowhere in the row's bytes.
    const d = first.open(Buffer.from(row.privateKeySealed!), 'k1', signingKeyBinding(row.id));
    assert.match(d, /^[A-Za-z0-9_-]{43}$/);
    const stored = Buffer.from(row.privateKeySealed!);
    assert.ok(!stored.includes(Buffer.from(d, 'base64url')) && !stored.includes(Buffer.from(d)));
    // It opens only on its own row.
    assert.throws(() => first.open(stored, 'k1', signingKeyBinding('rk_other')));
    // And the pair is a pair: the sealed private half's public key is the stored one.
    const pub = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(row.publicKey).toString('base64url'), d },
      format: 'jwk',
    });
    assert.equal(pub.export({ format: 'jwk' }).x, Buffer.from(row.publicKey).toString('base64url'));
  });

  it('issues a receipt that verifies with the published keys, names what was verified and charged, and never a second', async () => {
    const sut = service(first);
    const { d, served } = await issued(sut, { charges: [-700, -130, 30] });
    assert.deepEqual(served.receipt, {
      version: 1,
      type: 'gpr.teardown-receipt',
      issuer: 'https://gpu.example.com',
      rentalId: d.orderId,
      deploymentId: d.id,
      providerId: 'vast',
      instanceId: '31337',
      label: 'gpr-test-1',
      startedAt: T0.toISOString(),
      endedAt: '2026-05-01T12:00:03.000Z',
      provider: { state: 'gone', providerState: 'destroyed', httpStatus: 404, checkedAt: '2026-05-01T12:00:01.000Z' },
      ssh: { outcome: 'refused', checkedAt: '2026-05-01T12:00:02.000Z' },
      charged: { totalMinor: 800, currency: 'USD' },
      issuedAt: T0.toISOString(),
      keyId: served.signature.keyId,
    });
    const check = verifyReceipt(served, await sut.keySet());
    assert.equal(check.valid, true, JSON.stringify(check));
    // A re-run (a retried job, a crash before commit) writes nothing new: the first stays.
    clock.advance(60_000);
    const again = await sut.issuerFor({ funding: 'CREDITS', currency: 'USD' }, EVIDENCE);
    await store.transaction((r) => again!(r, d, clock.now()));
    assert.deepEqual(await sut.forRental(NOBODY, d.orderId), served);
  });

  it('retires an active key it cannot open (its id reused for another SECRETS_KEY) and signs with a new one', async () => {
    const before = await service(first).signer();
    const reused = new SecretBox(new Map([['k1', randomBytes(32)]]), 'k1');
    const after = await service(reused).signer();
    assert.notEqual(after.keyId, before.keyId);
    const rows = new Map(keyRows().map((k) => [k.id, k]));
    assert.equal(rows.get(before.keyId)?.privateKeySealed, null);
    assert.ok(rows.get(before.keyId)?.retiredAt);
    assert.equal(rows.get(after.keyId)?.activeForKid, 'k1');
  });

  it('issues none for a rental paid by card', async () => {
    assert.equal(await service(first).issuerFor({ funding: 'CARD', currency: 'USD' }, EVIDENCE), null);
    assert.equal(keyRows().length, 0, 'not even a key is made');
  });

  it('rotates with SECRETS_KEY: a new pair under the new id, the old one retired with its private half erased, old receipts still verifying', async () => {
    const before = service(first);
    const old = await issued(before);
    const oldKey = old.served.signature.keyId;
    clock.advance(1000);
    const after = service(rotated);
    const fresh = await issued(after);
    assert.notEqual(fresh.served.signature.keyId, oldKey);
    const rows = new Map(keyRows().map((k) => [k.id, k]));
    const retired = rows.get(oldKey)!;
    assert.deepEqual(
      [retired.privateKeySealed, retired.privateKeyKid, retired.activeForKid, retired.retiredAt],
      [null, null, null, clock.now()],
    );
    assert.equal(rows.get(fresh.served.signature.keyId)?.privateKeyKid, 'k2');
    // After the rotation no signing secret is left under k1.
    assert.deepEqual(await store.read((r) => r.receipts.sealed.signingKeys.countsByKey()), { k2: 1 });
    const keys = await after.keySet();
    assert.deepEqual(
      keys.keys.map((k) => [k.kid, k.retiredAt !== null]),
      [
        [oldKey, true],
        [fresh.served.signature.keyId, false],
      ],
    );
    assert.equal(verifyReceipt(old.served, keys).valid, true, 'a retired key still verifies what it signed');
    assert.equal(verifyReceipt(fresh.served, keys).valid, true);
    // Both keys are published as Ed25519 JWKs with their times.
    for (const k of keys.keys) {
      assert.deepEqual(Object.keys(k).sort(), ['alg', 'createdAt', 'crv', 'kid', 'kty', 'retiredAt', 'use', 'x']);
      assert.equal(Buffer.from(k.x, 'base64url').length, 32);
    }
  });

  it('the signed body is the canonical form, kept byte for byte', async () => {
    const { d, served } = await issued(service(first));
    const row = await store.read((r) => r.receipts.receiptOf(d.id));
    assert.equal(row?.body, canonicalJson(served.receipt));
    assert.deepEqual(signedReceiptOf(row!), served);
    assert.doesNotMatch(row!.body, /\s/);
  });

  it('says why a rental has no receipt, and whether one will come', async () => {
    const sut = service(first);
    const says = async (r: Omit<ReadableRental, 'rentalId'>) => {
      const rentalId = randomUUID();
      rentals.set(rentalId, { ...r, rentalId });
      const err = await sut.forRental(NOBODY, rentalId).then(
        () => assert.fail('no receipt expected'),
        (e: AppError) => e,
      );
      assert.equal(err.code, 'NOT_FOUND');
      return err.message;
    };
    const live = { deploymentId: randomUUID(), funding: 'CREDITS' as const };
    assert.match(await says({ ...live, status: 'ACTIVE' }), /is ACTIVE: .*issued when it becomes TERMINATED/);
    assert.match(await says({ ...live, status: 'TERMINATING' }), /is TERMINATING: .*waitFor=TERMINATED/);
    assert.match(await says({ ...live, status: 'TERMINATED' }), /ended without a verified destruction/);
    assert.match(await says({ ...live, status: 'FAILED' }), /FAILED: .*will have none/);
    assert.match(await says({ deploymentId: null, status: 'PENDING', funding: 'CREDITS' }), /is PENDING/);
    assert.match(await says({ ...live, status: 'TERMINATED', funding: 'CARD' }), /paid by card/);
    await assert.rejects(sut.forRental(NOBODY, randomUUID()), /No rental with this id is visible/);
  });
});
