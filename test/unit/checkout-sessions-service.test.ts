import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createLogger } from '../../src/logger.js';
import type { Checkout } from '../../src/modules/billing/checkout.entity.js';
import {
  CheckoutSessionsService,
  type CheckoutDescription,
  type NewCheckout,
} from '../../src/modules/billing/checkout-sessions.service.js';
import type { CheckoutSessionInfo, CheckoutSessionRequest } from '../../src/modules/billing/payment-provider.js';
import {
  billingWorld,
  checkoutRow,
  FakePaymentProvider,
  principal,
  refusal,
  SESSION_MS,
  T0,
  type BillingWorld,
} from '../fakes/billing-services.js';
import { assertMemoryLedgerConsistent } from '../helpers/memory-ledger.js';

const DESCRIPTION: CheckoutDescription = {
  productName: 'GPU rental',
  productDescription: '2 hours of an H100',
  customerEmail: 'owner@example.com',
};

/** A provider whose sessions come back as `shape` makes them. */
class ShapedProvider extends FakePaymentProvider {
  constructor(
    w: BillingWorld,
    private readonly shape: (s: CheckoutSessionInfo) => CheckoutSessionInfo,
  ) {
    super(w.clock);
  }

  override async createCheckoutSession(r: CheckoutSessionRequest): Promise<CheckoutSessionInfo> {
    return this.shape(await super.createCheckoutSession(r));
  }
}

describe('CheckoutSessionsService (memory store)', () => {
  let w: BillingWorld;
  let accountId: string;
  let keyId: string;
  beforeEach(async () => {
    w = billingWorld();
    ({ accountId, keyId } = await principal(w));
  });
  afterEach(() => assertMemoryLedgerConsistent(w.store.tables));

  const logger = createLogger('silent');
  const withProvider = (provider: FakePaymentProvider | null) =>
    new CheckoutSessionsService(w.store, w.clock, logger, provider, 'https://gpu.example', w.cardOrders);
  const insert = (o: Partial<NewCheckout> = {}, sessions = w.sessions) =>
    w.store.transaction((r) =>
      sessions.insert(r.checkouts, { purpose: 'TOPUP', accountId, keyId, amountMinor: 1500, ...o }),
    );
  /** An OPEN checkout; with `orderId` a card order's, the order waiting for its payment. */
  async function opened(o: Partial<NewCheckout> = {}): Promise<Checkout> {
    return w.sessions.open(await insert(o), DESCRIPTION);
  }
  /** A card order's checkout, paid at the provider and recorded as payment events record it. */
  async function paidOrder(o: { cancelled?: boolean } = {}): Promise<{ checkout: Checkout; orderId: string }> {
    const orderId = w.cardOrders.add(undefined, { cancelled: o.cancelled ?? false });
    const c = await opened({ purpose: 'ORDER', orderId, amountMinor: 1400 });
    w.provider.pay(c.sessionId!);
    await w.store.transaction((r) => r.checkouts.markPaid(c.id, `evt_${randomUUID()}`, c.sessionId!, w.clock.now()));
    return { checkout: checkoutRow(w, c.id), orderId };
  }
  const owed = async (checkoutId: string) => {
    await w.store.transaction((r) => w.sessions.markRefundDue(r.checkouts, checkoutId));
    return checkoutRow(w, checkoutId);
  };

  describe('insert', () => {
    it("writes a CREATING checkout for the configured provider, with nothing of the provider's yet", async () => {
      const c = await insert({ amountMinor: 2500 });
      assert.match(c.id, /^[0-9a-f-]{36}$/);
      assert.deepEqual(
        { ...checkoutRow(w, c.id) },
        {
          id: c.id,
          purpose: 'TOPUP',
          accountId,
          keyId,
          orderId: null,
          amountMinor: 2500,
          currency: 'USD',
          status: 'CREATING',
          provider: 'stripe',
          sessionId: null,
          checkoutUrl: null,
          expiresAt: null,
          paidAt: null,
          paidEventId: null,
          refundId: null,
          refundedAt: null,
          refundStatus: null,
          refundRequestedAt: null,
          refundAttempts: 0,
          createdAt: T0,
          updatedAt: T0,
        },
      );
      assert.equal(w.provider.created.length, 0, 'the provider is asked outside the transaction');
    });

    it('refuses with 503 UNAVAILABLE when no payment provider is configured, writing nothing', async () => {
      const err = await refusal(insert({}, withProvider(null)));
      assert.equal(err.code, 'UNAVAILABLE');
      assert.match(err.message, /Card payments are not configured/);
      assert.equal(w.store.tables.table('checkouts').size, 0);
    });
  });

  describe('open', () => {
    it('asks the provider for one session under a key derived from the checkout, and stores it OPEN', async () => {
      const orderId = w.cardOrders.add();
      const c = await insert({ purpose: 'ORDER', orderId, amountMinor: 1999 });
      w.clock.advance(2000);
      const open = await w.sessions.open(c, DESCRIPTION);
      assert.deepEqual(w.provider.created, [
        {
          checkoutId: c.id,
          purpose: 'ORDER',
          accountId,
          orderId,
          amountMinor: 1999,
          currency: 'usd',
          productName: 'GPU rental',
          productDescription: '2 hours of an H100',
          customerEmail: 'owner@example.com',
          successUrl: `https://gpu.example/checkout/${c.id}/success`,
          cancelUrl: `https://gpu.example/checkout/${c.id}/cancel`,
          idempotencyKey: `checkout-session:${c.id}`,
        },
      ]);
      const session = [...w.provider.sessions.values()][0];
      assert.equal(open.status, 'OPEN');
      assert.equal(open.sessionId, session.id);
      assert.equal(open.checkoutUrl, session.url);
      assert.deepEqual(open.expiresAt, session.expiresAt);
      assert.deepEqual(open.updatedAt, new Date(T0.getTime() + 2000));
      assert.deepEqual(checkoutRow(w, c.id), open);
    });

    it('leaves a checkout that is not CREATING as it is, without asking the provider', async () => {
      const c = await opened();
      const again = await w.sessions.open(c, DESCRIPTION);
      assert.equal(again, c);
      assert.equal(w.provider.created.length, 1);
    });

    it('answers 503 when the provider cannot be reached, keeps the row CREATING, and a retry converges', async () => {
      const c = await insert();
      w.provider.failCreates = 1;
      const err = await refusal(w.sessions.open(c, DESCRIPTION));
      assert.equal(err.code, 'UNAVAILABLE');
      assert.match(err.message, /Retry with the same Idempotency-Key; no payment link was lost/);
      assert.equal(checkoutRow(w, c.id).status, 'CREATING');
      const open = await w.sessions.open(checkoutRow(w, c.id), DESCRIPTION);
      assert.equal(open.status, 'OPEN');
      assert.deepEqual([...new Set(w.provider.created.map((r) => r.idempotencyKey))], [`checkout-session:${c.id}`]);
      assert.equal(w.provider.sessions.size, 1);
    });

    it('converges concurrent openers of one checkout on the one session the provider made', async () => {
      const c = await insert();
      const [a, b, d] = await Promise.all([1, 2, 3].map(() => w.sessions.open(c, DESCRIPTION)));
      assert.equal(w.provider.sessions.size, 1);
      assert.equal(a.sessionId, b.sessionId);
      assert.equal(b.sessionId, d.sessionId);
      assert.equal(checkoutRow(w, c.id).sessionId, a.sessionId);
    });

    it('answers 503 for a session without a payment page and keeps the row CREATING', async () => {
      const sessions = withProvider(new ShapedProvider(w, (s) => ({ ...s, url: null })));
      const c = await insert({}, sessions);
      const err = await refusal(sessions.open(c, DESCRIPTION));
      assert.equal(err.code, 'UNAVAILABLE');
      assert.match(err.message, /no payment page/);
      assert.equal(checkoutRow(w, c.id).status, 'CREATING');
    });

    it('stores a session the provider reports expired already as EXPIRED', async () => {
      const sessions = withProvider(new ShapedProvider(w, (s) => ({ ...s, status: 'expired' })));
      const c = await sessions.open(await insert({}, sessions), DESCRIPTION);
      assert.equal(c.status, 'EXPIRED');
      assert.ok(c.sessionId);
    });

    it('refuses a checkout started with a provider no longer configured, without calling the new one', async () => {
      const local = new FakePaymentProvider(w.clock, 'local');
      const c = await insert({}, withProvider(local));
      assert.equal(c.provider, 'local');
      const err = await refusal(w.sessions.open(c, DESCRIPTION));
      assert.equal(err.code, 'UNAVAILABLE');
      assert.match(err.message, /no longer configured; use a new Idempotency-Key/);
      assert.equal(w.provider.created.length, 0);
    });
  });

  describe('expireIfDue and closeUnpaid', () => {
    it('keeps an OPEN checkout until its session lifetime has passed, then records it EXPIRED', async () => {
      const c = await opened();
      w.clock.advance(SESSION_MS - 1);
      assert.equal(await w.sessions.expireIfDue(c), c, 'one millisecond left: still payable');
      w.clock.advance(1);
      const expired = await w.sessions.expireIfDue(c);
      assert.equal(expired.status, 'EXPIRED');
      assert.equal(expired.sessionId, c.sessionId);
      assert.deepEqual(expired.updatedAt, new Date(T0.getTime() + SESSION_MS));
      assert.equal(checkoutRow(w, c.id).status, 'EXPIRED');
    });

    it('leaves CREATING and PAID checkouts alone whatever the time', async () => {
      const creating = await insert();
      const { checkout: paid } = await paidOrder();
      w.clock.advance(10 * SESSION_MS);
      assert.equal((await w.sessions.expireIfDue(creating)).status, 'CREATING');
      assert.equal((await w.sessions.expireIfDue(paid)).status, 'PAID');
      assert.equal(checkoutRow(w, paid.id).status, 'PAID');
    });

    it("fails the card order an expiring checkout was paying, in the checkout's transaction", async () => {
      const orderId = w.cardOrders.add();
      const c = await opened({ purpose: 'ORDER', orderId });
      w.clock.advance(SESSION_MS);
      await w.sessions.expireIfDue(c);
      assert.deepEqual(w.cardOrders.calls, [`closedUnpaid:${orderId}:EXPIRED`]);
      assert.equal(w.cardOrders.orders.get(orderId)!.status, 'FAILED');
    });

    it('ends a cancelled card order as TERMINATED when its asynchronous payment fails', async () => {
      const orderId = w.cardOrders.add(undefined, { cancelled: true });
      const c = await opened({ purpose: 'ORDER', orderId });
      assert.equal(await w.store.transaction((r) => w.sessions.closeUnpaid(r, c.id, 'FAILED')), true);
      assert.equal(checkoutRow(w, c.id).status, 'FAILED');
      assert.equal(w.cardOrders.orders.get(orderId)!.status, 'TERMINATED');
    });

    it('takes the session it is told of when the checkout had none yet', async () => {
      const c = await insert();
      await w.store.transaction((r) => w.sessions.closeUnpaid(r, c.id, 'EXPIRED', 'cs_told'));
      assert.equal(checkoutRow(w, c.id).sessionId, 'cs_told');
      const open = await opened();
      await w.store.transaction((r) => w.sessions.closeUnpaid(r, open.id, 'EXPIRED', 'cs_other'));
      assert.equal(checkoutRow(w, open.id).sessionId, open.sessionId, 'a known session is kept');
    });

    it('closes nothing already paid or closed, nor a checkout that does not exist', async () => {
      const { checkout: paid } = await paidOrder();
      const closed = await opened();
      await w.store.transaction((r) => w.sessions.closeUnpaid(r, closed.id, 'EXPIRED'));
      for (const id of [paid.id, closed.id, randomUUID()])
        assert.equal(await w.store.transaction((r) => w.sessions.closeUnpaid(r, id, 'FAILED')), false, id);
      assert.equal(checkoutRow(w, paid.id).status, 'PAID');
      assert.equal(checkoutRow(w, closed.id).status, 'EXPIRED');
    });
  });

  describe('refunds', () => {
    it('records a refund as owed once: the first request time stands', async () => {
      const { checkout } = await paidOrder();
      assert.equal((await owed(checkout.id)).refundStatus, 'PENDING');
      w.clock.advance(60_000);
      const again = await owed(checkout.id);
      assert.equal(again.refundStatus, 'PENDING');
      assert.deepEqual(again.refundRequestedAt, T0);
    });

    it('refunds what is owed in full under a key derived from the checkout, and completes the order', async () => {
      const { checkout, orderId } = await paidOrder();
      await owed(checkout.id);
      w.clock.advance(1000);
      assert.equal(await w.sessions.settleRefund(checkout.id), 'REFUNDED');
      assert.deepEqual(w.provider.refunds, [
        {
          sessionId: checkout.sessionId,
          checkoutId: checkout.id,
          orderId,
          amountMinor: 1400,
          idempotencyKey: `refund:${checkout.id}`,
        },
      ]);
      const row = checkoutRow(w, checkout.id);
      assert.equal(row.refundStatus, 'SUCCEEDED');
      assert.match(row.refundId!, /^re_/);
      assert.deepEqual(row.refundedAt, new Date(T0.getTime() + 1000));
      assert.equal(row.status, 'PAID');
      assert.deepEqual(w.cardOrders.calls, [`refunded:${orderId}`]);
      assert.equal(w.store.tables.table('ledger_entries').size, 0, 'card money never became credits');
    });

    it('answers REFUNDED again without asking the provider once the refund was made', async () => {
      const { checkout } = await paidOrder();
      await owed(checkout.id);
      await w.sessions.settleRefund(checkout.id);
      assert.equal(await w.sessions.settleRefund(checkout.id), 'REFUNDED');
      assert.equal(w.provider.refunds.length, 1);
    });

    it('has nothing to do for a checkout that owes nothing, is unpaid, or does not exist', async () => {
      const { checkout } = await paidOrder();
      const open = await opened();
      await w.store.transaction((r) => r.checkouts.markRefundPending(open.id, w.clock.now()));
      for (const id of [checkout.id, open.id, randomUUID()])
        assert.equal(await w.sessions.settleRefund(id), 'NOT_DUE', id);
      assert.equal(w.provider.refunds.length, 0);
    });

    it('counts a refund the provider turns away, keeps it owed, and rethrows for the job to retry', async () => {
      const { checkout, orderId } = await paidOrder();
      await owed(checkout.id);
      w.provider.failRefunds = 2;
      for (const attempts of [1, 2]) {
        await assert.rejects(w.sessions.settleRefund(checkout.id), /can take no refund now/);
        const row = checkoutRow(w, checkout.id);
        assert.equal(row.refundStatus, 'PENDING');
        assert.equal(row.refundAttempts, attempts);
      }
      assert.equal(await w.sessions.settleRefund(checkout.id), 'REFUNDED');
      assert.equal(checkoutRow(w, checkout.id).refundAttempts, 2);
      assert.deepEqual(w.cardOrders.calls, [`refunded:${orderId}`]);
    });

    it('counts a failed or cancelled refund as not made, and a pending one as made', async () => {
      const { checkout } = await paidOrder();
      await owed(checkout.id);
      for (const status of ['failed', 'canceled'] as const) {
        w.provider.refundStatus = status;
        await assert.rejects(w.sessions.settleRefund(checkout.id), new RegExp(`is ${status}`));
      }
      assert.equal(checkoutRow(w, checkout.id).refundAttempts, 2);
      w.provider.refundStatus = 'pending';
      assert.equal(await w.sessions.settleRefund(checkout.id), 'REFUNDED');
      assert.equal(checkoutRow(w, checkout.id).refundStatus, 'SUCCEEDED');
    });

    it('leaves a payment taken through another provider to a person, and counts each try', async () => {
      const { checkout } = await paidOrder();
      await owed(checkout.id);
      const local = withProvider(new FakePaymentProvider(w.clock, 'local'));
      await assert.rejects(local.settleRefund(checkout.id), /not configured now; refund it by hand/);
      await assert.rejects(withProvider(null).settleRefund(checkout.id), /Card payments are not configured/);
      assert.equal(checkoutRow(w, checkout.id).refundAttempts, 2);
      assert.equal(w.provider.refunds.length, 0);
    });

    it('logs failed refunds at warn, and at error from the fifth attempt on', async () => {
      const lines: { level: string; attempts?: number; checkoutId?: string }[] = [];
      const logged = createLogger('info', { write: (l: string) => void lines.push(JSON.parse(l)) });
      const sessions = new CheckoutSessionsService(
        w.store,
        w.clock,
        logged,
        w.provider,
        'https://gpu.example',
        w.cardOrders,
      );
      const { checkout } = await paidOrder();
      await owed(checkout.id);
      w.provider.failRefunds = 6;
      for (let i = 0; i < 6; i++) await assert.rejects(sessions.settleRefund(checkout.id));
      assert.deepEqual(
        lines.filter((l) => l.checkoutId === checkout.id).map((l) => [l.attempts, l.level]),
        [
          [1, 'warn'],
          [2, 'warn'],
          [3, 'warn'],
          [4, 'warn'],
          [5, 'error'],
          [6, 'error'],
        ],
      );
    });

    it('retries owed refunds oldest first, counting those made and passing over those that fail', async () => {
      const first = await paidOrder();
      const second = await paidOrder();
      const third = await paidOrder();
      for (const o of [second, first, third]) {
        await owed(o.checkout.id);
        w.clock.advance(1000);
      }
      w.provider.failRefunds = 1;
      assert.equal(await w.sessions.settleDueRefunds(), 2);
      assert.deepEqual(
        w.provider.refunds.map((r) => r.checkoutId),
        [second.checkout.id, first.checkout.id, third.checkout.id],
      );
      assert.equal(checkoutRow(w, second.checkout.id).refundStatus, 'PENDING', 'the oldest failed this time');
      assert.equal(await w.sessions.settleDueRefunds(1), 1);
      assert.equal(await w.sessions.settleDueRefunds(), 0);
    });

    it("refunds a failed card order's payment on request, and says when nothing was paid", async () => {
      const unpaid = w.cardOrders.add();
      await opened({ purpose: 'ORDER', orderId: unpaid });
      assert.equal(await w.sessions.refundOrder(unpaid), 'NOTHING_PAID');
      assert.equal(await w.sessions.refundOrder(randomUUID()), 'NOTHING_PAID');
      const { checkout, orderId } = await paidOrder();
      assert.equal(await w.sessions.refundOrder(orderId), 'REFUNDED');
      assert.equal(await w.sessions.refundOrder(orderId), 'REFUNDED');
      assert.equal(w.provider.refunds.length, 1);
      assert.equal(checkoutRow(w, checkout.id).refundStatus, 'SUCCEEDED');
    });

    it("marks a card order's paid checkout as owing its refund, in the caller's transaction", async () => {
      const unpaid = w.cardOrders.add();
      await opened({ purpose: 'ORDER', orderId: unpaid });
      assert.equal(await w.store.transaction((r) => w.sessions.markOrderRefundDue(r.checkouts, unpaid)), false);
      const { checkout, orderId } = await paidOrder();
      assert.equal(await w.store.transaction((r) => w.sessions.markOrderRefundDue(r.checkouts, orderId)), true);
      assert.equal(checkoutRow(w, checkout.id).refundStatus, 'PENDING');
      assert.equal(w.provider.refunds.length, 0, 'the refund itself follows the commit');
    });
  });

  describe('reads', () => {
    it("finds a checkout, a card order's checkout and its payment state as last committed", async () => {
      const orderId = w.cardOrders.add(undefined, { status: 'AWAITING_PAYMENT' });
      const c = await opened({ purpose: 'ORDER', orderId });
      assert.deepEqual(await w.sessions.find(c.id), c);
      assert.equal(await w.sessions.find(randomUUID()), null);
      assert.deepEqual(await w.store.read((r) => w.sessions.checkoutOfOrder(r.checkouts, orderId)), c);
      assert.deepEqual(await w.sessions.orderState(orderId), {
        awaitingPayment: true,
        cancelled: false,
        status: 'AWAITING_PAYMENT',
      });
      assert.equal(await w.sessions.orderState(randomUUID()), null);
    });
  });
});
