import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Checkout } from '../../src/modules/billing/checkout.entity.js';
import type { IdempotencyRecord } from '../../src/modules/idempotency/idempotency-record.entity.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import { toTopupDto } from '../../src/modules/billing/topups.service.js';
import {
  billingWorld,
  checkoutRow,
  deliver,
  principal,
  refusal,
  SESSION_MS,
  T0,
  type BillingWorld,
} from '../fakes/billing-services.js';
import { assertMemoryLedgerConsistent } from '../helpers/memory-ledger.js';

describe('TopupsService (memory store)', () => {
  let w: BillingWorld;
  let agent: Principal;
  beforeEach(async () => {
    w = billingWorld();
    agent = await principal(w);
  });
  afterEach(() => assertMemoryLedgerConsistent(w.store.tables));

  const checkouts = () => w.store.tables.table<Checkout>('checkouts').all();
  const records = () => w.store.tables.table<IdempotencyRecord>('idempotency_records').all();
  const create = (amountMinor = 1500, key: string | undefined = randomUUID(), who: Principal = agent) =>
    w.topups.create(who, key, { amountMinor });
  /** The session the provider made for a checkout. */
  const sessionOf = (checkoutId: string) => w.provider.sessions.get(checkoutRow(w, checkoutId).sessionId!)!;

  describe('create', () => {
    it('answers 201 with an OPEN link for exactly the amount, and credits nothing', async () => {
      const { status, topup } = await create(1500);
      assert.equal(status, 201);
      const row = checkoutRow(w, topup.topupId);
      const session = sessionOf(topup.topupId);
      assert.deepEqual(topup, {
        topupId: row.id,
        status: 'OPEN',
        amountMinor: 1500,
        currency: 'USD',
        paymentUrl: session.url,
        expiresAt: new Date(T0.getTime() + SESSION_MS).toISOString(),
        createdAt: T0.toISOString(),
        paidAt: null,
      });
      assert.equal(row.purpose, 'TOPUP');
      assert.equal(row.accountId, agent.accountId);
      assert.equal(row.keyId, agent.keyId);
      assert.equal(w.store.tables.table('ledger_entries').size, 0, 'a link is not a payment');
    });

    it('describes the credits in fixed words, so a retry sends the provider the same request', async () => {
      await create(123456);
      const [request] = w.provider.created;
      assert.equal(request.purpose, 'TOPUP');
      assert.equal(request.productName, 'Compute credits');
      assert.equal(
        request.productDescription,
        'USD 1,234.56 of GPU compute credits. Credits are non-transferable and non-withdrawable.',
      );
      assert.equal(request.amountMinor, 123456);
      assert.equal(request.currency, 'usd');
      assert.equal(request.customerEmail, undefined);
    });

    it('replays the same key and body with 200 and the same link, asking the provider nothing', async () => {
      const key = randomUUID();
      const first = await create(1000, key);
      const again = await create(1000, key);
      assert.equal(again.status, 200);
      assert.deepEqual(again.topup, first.topup);
      assert.equal(w.provider.created.length, 1);
      assert.equal(checkouts().length, 1);
    });

    it('refuses the same key with another amount as 409 IDEMPOTENCY_CONFLICT', async () => {
      const key = randomUUID();
      await create(1000, key);
      assert.equal((await refusal(create(1001, key))).code, 'IDEMPOTENCY_CONFLICT');
      assert.equal(checkouts().length, 1);
    });

    it("keeps each account's keys apart, and the owner bot's apart from the account's own keys", async () => {
      const other = await principal(w);
      const key = 'shared-key';
      const mine = await create(800, key);
      const theirs = await create(900, key, other);
      const bot = await w.topups.create({ accountId: agent.accountId, keyId: null }, key, { amountMinor: 700 });
      assert.deepEqual([mine.status, theirs.status, bot.status], [201, 201, 201]);
      assert.equal(new Set([mine.topup.topupId, theirs.topup.topupId, bot.topup.topupId]).size, 3);
      assert.equal(checkoutRow(w, bot.topup.topupId).keyId, null);
      assert.deepEqual(
        records()
          .map((r) => r.scope)
          .sort(),
        [`topup-bot:${agent.accountId}`, `topup:${agent.accountId}`, `topup:${other.accountId}`].sort(),
      );
    });

    it('needs an Idempotency-Key of 1 to 128 printable characters (400), and writes nothing without one', async () => {
      for (const key of [undefined, '', 'x'.repeat(129), 'has\ttab']) {
        const err = await refusal(w.topups.create(agent, key, { amountMinor: 1000 }));
        assert.equal(err.code, 'INVALID_REQUEST', JSON.stringify(key));
        assert.match(err.message, /Idempotency-Key/);
      }
      assert.equal(checkouts().length, 0);
      assert.equal((await create(1000, 'k'.repeat(128))).status, 201);
      assert.equal((await create(1000, 'order 42 / attempt 1')).status, 201);
    });

    it('refuses with 503 when no payment provider is configured, before claiming the key', async () => {
      w = billingWorld({ provider: null });
      agent = await principal(w);
      const err = await refusal(create(1000));
      assert.equal(err.code, 'UNAVAILABLE');
      assert.equal(checkouts().length, 0);
      assert.equal(records().length, 0);
    });

    it('commits the claim only with its checkout: a failed insert leaves the key free', async () => {
      const ghost = { accountId: randomUUID(), keyId: randomUUID() };
      const key = randomUUID();
      await assert.rejects(w.topups.create(ghost, key, { amountMinor: 1000 }), /fk_checkouts_account/);
      assert.equal(records().length, 0);
      assert.equal(checkouts().length, 0);
    });

    it('converges after the provider failed: the retry finds the checkout CREATING and gets the one session', async () => {
      const key = randomUUID();
      w.provider.failCreates = 1;
      const err = await refusal(create(3000, key));
      assert.equal(err.code, 'UNAVAILABLE');
      const [row] = checkouts();
      assert.equal(row.status, 'CREATING');
      assert.equal(row.sessionId, null);
      const retry = await create(3000, key);
      assert.equal(retry.status, 200, 'the first request created the top-up');
      assert.equal(retry.topup.topupId, row.id);
      assert.equal(retry.topup.status, 'OPEN');
      assert.equal(retry.topup.paymentUrl, sessionOf(row.id).url);
      assert.deepEqual([...new Set(w.provider.created.map((r) => r.idempotencyKey))], [`checkout-session:${row.id}`]);
      assert.equal(w.provider.sessions.size, 1);
    });

    it('turns concurrent requests with one key into one top-up, one 201 and one provider session', async () => {
      const key = randomUUID();
      const results = await Promise.all(Array.from({ length: 6 }, () => create(2000, key)));
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 200, 200, 200, 201]);
      assert.equal(new Set(results.map((r) => r.topup.paymentUrl)).size, 1);
      assert.equal(checkouts().length, 1);
      assert.equal(w.provider.sessions.size, 1);
    });

    it('answers 410 TOPUP_EXPIRED for a key whose link lapsed unpaid; a new key gets a new link', async () => {
      const key = randomUUID();
      const { topup } = await create(1200, key);
      w.clock.advance(SESSION_MS);
      const err = await refusal(create(1200, key));
      assert.equal(err.code, 'TOPUP_EXPIRED');
      assert.match(err.message, /expired unpaid. Ask again with a new Idempotency-Key/);
      assert.equal(checkoutRow(w, topup.topupId).status, 'EXPIRED');
      assert.equal((await create(1200)).status, 201);
    });

    it('answers 410 TOPUP_EXPIRED, saying the payment failed, for a key whose asynchronous payment failed', async () => {
      const key = randomUUID();
      const { topup } = await create(1200, key);
      await deliver(w, 'checkout.session.async_payment_failed', sessionOf(topup.topupId));
      assert.equal(checkoutRow(w, topup.topupId).status, 'FAILED');
      const err = await refusal(create(1200, key));
      assert.equal(err.code, 'TOPUP_EXPIRED');
      assert.match(err.message, /The payment for this Idempotency-Key failed/);
    });

    it('replays a paid top-up with 200, status PAID and when it was paid', async () => {
      const key = randomUUID();
      const { topup } = await create(1400, key);
      w.clock.advance(30_000);
      await deliver(w, 'checkout.session.completed', w.provider.pay(sessionOf(topup.topupId).id));
      w.clock.advance(SESSION_MS);
      const again = await create(1400, key);
      assert.equal(again.status, 200);
      assert.equal(again.topup.status, 'PAID');
      assert.equal(again.topup.paidAt, new Date(T0.getTime() + 30_000).toISOString());
      assert.equal(w.store.tables.table('ledger_entries').size, 1);
    });
  });

  describe('get', () => {
    it('shows a top-up to the key that asked for it and to the owner, not to other keys or accounts', async () => {
      const { topup } = await create(1000);
      const owner = await principal(w, 'OWNER', agent.accountId);
      const sibling = await principal(w, 'AGENT', agent.accountId);
      const stranger = await principal(w, 'OWNER');
      assert.deepEqual(await w.topups.get(agent, topup.topupId), topup);
      assert.deepEqual(await w.topups.get(owner, topup.topupId), topup);
      for (const who of [sibling, stranger]) {
        const err = await refusal(w.topups.get(who, topup.topupId));
        assert.equal(err.code, 'NOT_FOUND');
      }
      assert.equal((await refusal(w.topups.get(agent, randomUUID()))).code, 'NOT_FOUND');
    });

    it('reports a link past its lifetime as EXPIRED, and records it so', async () => {
      const { topup } = await create(1000);
      w.clock.advance(SESSION_MS + 1);
      assert.equal((await w.topups.get(agent, topup.topupId)).status, 'EXPIRED');
      assert.equal(checkoutRow(w, topup.topupId).status, 'EXPIRED');
    });

    it('shows no card order checkout as a top-up', async () => {
      const orderId = w.cardOrders.add();
      const c = await w.store.transaction((r) =>
        w.sessions.insert(r.checkouts, {
          purpose: 'ORDER',
          accountId: agent.accountId,
          keyId: agent.keyId,
          orderId,
          amountMinor: 900,
        }),
      );
      assert.equal((await refusal(w.topups.get(agent, c.id))).code, 'NOT_FOUND');
    });
  });

  it('shows a checkout as a top-up: its id, status, amount, link, and times in ISO form', () => {
    const paidAt = new Date('2026-05-02T00:00:00.000Z');
    const dto = toTopupDto({
      id: 'c-1',
      status: 'PAID',
      amountMinor: 700,
      currency: 'USD',
      checkoutUrl: null,
      expiresAt: null,
      createdAt: T0,
      paidAt,
    } as Checkout);
    assert.deepEqual(dto, {
      topupId: 'c-1',
      status: 'PAID',
      amountMinor: 700,
      currency: 'USD',
      paymentUrl: null,
      expiresAt: null,
      createdAt: T0.toISOString(),
      paidAt: paidAt.toISOString(),
    });
  });
});
