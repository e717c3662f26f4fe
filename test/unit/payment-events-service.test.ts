import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';
import type { Account } from '../../src/modules/accounts/account.entity.js';
import type { Checkout } from '../../src/modules/billing/checkout.entity.js';
import type { CheckoutSessionInfo } from '../../src/modules/billing/payment-provider.js';
import type { RecordedPaymentEvent } from '../../src/modules/billing/payment-events.repository.js';
import { PaymentEventsService, WEBHOOK_TOLERANCE_SECONDS } from '../../src/modules/billing/payment-events.service.js';
import { reconcilePayments } from '../../src/modules/billing/payments.js';
import { loadStripe } from '../../src/modules/billing/stripe-sdk.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import {
  billingWorld,
  checkoutRow,
  deliver,
  principal,
  refusal,
  SESSION_MS,
  signedEvent,
  T0,
  WEBHOOK_SECRET,
  type BillingWorld,
} from '../fakes/billing-services.js';
import { memoryEvents } from '../fakes/store/ledger.js';
import { assertMemoryLedgerConsistent, memoryEntries } from '../helpers/memory-ledger.js';

/** Past a session's expiry by more than reconciliation's grace for the provider's own event. */
const PAST_GRACE_MS = SESSION_MS + 11 * 60 * 1000;

describe('PaymentEventsService (memory store)', () => {
  let w: BillingWorld;
  let agent: Principal;
  beforeEach(async () => {
    w = billingWorld();
    agent = await principal(w);
  });
  afterEach(() => assertMemoryLedgerConsistent(w.store.tables));

  const balance = (accountId = agent.accountId) =>
    w.store.tables.table<Account>('accounts').get(accountId)!.balanceMinor;
  const entries = () => memoryEntries(w.store.tables);
  const recorded = (checkoutId?: string | null) =>
    w.store.tables
      .table<RecordedPaymentEvent>('payment_events')
      .all()
      .filter((e) => checkoutId === undefined || e.checkoutId === checkoutId);
  const outcomes = (checkoutId: string) =>
    recorded(checkoutId)
      .map((e) => e.outcome)
      .sort();
  const sessionOf = (checkoutId: string): CheckoutSessionInfo =>
    structuredClone(w.provider.sessions.get(checkoutRow(w, checkoutId).sessionId!)!);
  /** An OPEN top-up of the agent's account and its provider session. */
  async function openTopup(amountMinor = 2000, who = agent) {
    const { topup } = await w.topups.create(who, randomUUID(), { amountMinor });
    return { id: topup.topupId, session: sessionOf(topup.topupId) };
  }
  /** An OPEN checkout of a card order waiting for its payment (`cancelled`: its owner cancelled it). */
  async function openOrder(o: { cancelled?: boolean; orderId?: string | null } = {}) {
    const orderId = o.orderId === null ? null : w.cardOrders.add(o.orderId, { cancelled: o.cancelled ?? false });
    const inserted = await w.store.transaction((r) =>
      w.sessions.insert(r.checkouts, {
        purpose: 'ORDER',
        accountId: agent.accountId,
        keyId: agent.keyId,
        orderId,
        amountMinor: 1400,
      }),
    );
    const c = await w.sessions.open(inserted, { productName: 'GPU rental' });
    return { id: c.id, orderId, session: sessionOf(c.id) };
  }
  const pay = (session: CheckoutSessionInfo) => w.provider.pay(session.id);

  describe('verification', () => {
    it('refuses every event with 503 while no webhook secret is configured', async () => {
      w = billingWorld({ webhookSecret: null });
      agent = await principal(w);
      const { id, session } = await openTopup();
      const e = signedEvent(w, 'checkout.session.completed', pay(session));
      const err = await refusal(w.events.receiveStripe(e.body, e.signature));
      assert.equal(err.code, 'UNAVAILABLE');
      assert.match(err.message, /STRIPE_WEBHOOK_SECRET/);
      assert.equal(checkoutRow(w, id).status, 'OPEN');
    });

    it('needs the signature header and the body exactly as signed (400 INVALID_REQUEST)', async () => {
      const { session } = await openTopup();
      const e = signedEvent(w, 'checkout.session.completed', pay(session));
      for (const [body, sig] of [
        [e.body, undefined],
        [undefined, e.signature],
        [Buffer.alloc(0), e.signature],
      ] as const) {
        const err = await refusal(w.events.receiveStripe(body, sig));
        assert.equal(err.code, 'INVALID_REQUEST');
      }
      assert.equal(recorded().length, 0);
    });

    it('writes nothing for a body changed after signing, or a signature of another secret or none at all', async () => {
      const { id, session } = await openTopup(2000);
      const e = signedEvent(w, 'checkout.session.completed', pay(session));
      const tampered = Buffer.from(e.body.toString().replace('"amount_total":2000', '"amount_total":9000'));
      assert.notDeepEqual(tampered, e.body);
      const payload = e.body.toString();
      const foreign = loadStripe().webhooks.generateTestHeaderString({
        payload,
        secret: `${WEBHOOK_SECRET}x`,
        timestamp: Math.floor(w.clock.now().getTime() / 1000),
      });
      for (const [body, sig] of [
        [tampered, e.signature],
        [e.body, foreign],
        [e.body, 'garbage'],
        [e.body, 't=1,v1=00'],
      ] as const) {
        const err = await refusal(w.events.receiveStripe(body, sig));
        assert.equal(err.code, 'INVALID_REQUEST');
        assert.match(err.message, /could not be verified/);
      }
      assert.equal(balance(), 0);
      assert.equal(checkoutRow(w, id).status, 'OPEN');
      assert.equal(recorded().length, 0);
    });

    it(`refuses a signature older than ${WEBHOOK_TOLERANCE_SECONDS} seconds as a possible replay`, async () => {
      const { session } = await openTopup(2000);
      const e = signedEvent(w, 'checkout.session.completed', pay(session));
      w.clock.advance((WEBHOOK_TOLERANCE_SECONDS + 1) * 1000);
      assert.equal((await refusal(w.events.receiveStripe(e.body, e.signature))).code, 'INVALID_REQUEST');
      assert.equal(balance(), 0);
      assert.equal(recorded().length, 0);
      w.clock.advance(-2000);
      assert.deepEqual(await w.events.receiveStripe(e.body, e.signature), { received: true });
      assert.equal(balance(), 2000, 'within the tolerance it is accepted');
    });

    it('acknowledges event types it does not handle and records nothing', async () => {
      const { session } = await openTopup();
      assert.deepEqual(await deliver(w, 'customer.created', session).then(() => recorded()), []);
      assert.equal(balance(), 0);
    });

    it('logs a rejected signature without the secret', async () => {
      const lines: string[] = [];
      const logger = createLogger('info', new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
      const events = new PaymentEventsService(w.store, w.clock, logger, w.ledger, w.sessions, {
        webhookSecret: WEBHOOK_SECRET,
        cardOrders: w.cardOrders,
      });
      const { session } = await openTopup();
      const e = signedEvent(w, 'checkout.session.completed', session);
      await refusal(events.receiveStripe(e.body, 't=1,v1=00'));
      await new Promise((resolve) => setImmediate(resolve));
      assert.ok(lines.some((l) => /signature verification failed/.test(l)));
      assert.ok(!lines.join('').includes(WEBHOOK_SECRET));
    });
  });

  describe('top-ups', () => {
    it('credits a paid session once, with its cause, the session in its words and the key that asked', async () => {
      const { id, session } = await openTopup(2500);
      w.clock.advance(7000);
      const eventId = await deliver(w, 'checkout.session.completed', pay(session));
      assert.equal(balance(), 2500);
      const [entry] = entries();
      assert.equal(entry.kind, 'TOPUP');
      assert.equal(entry.amountMinor, 2500);
      assert.equal(entry.balanceAfterMinor, 2500);
      assert.equal(entry.externalRef, `topup:${id}`);
      assert.equal(entry.description, `Card top-up ${id} (stripe ${session.id})`);
      assert.equal(entry.keyId, agent.keyId);
      const c = checkoutRow(w, id);
      assert.equal(c.status, 'PAID');
      assert.equal(c.paidEventId, eventId);
      assert.deepEqual(c.paidAt, new Date(T0.getTime() + 7000));
      assert.deepEqual(
        recorded(id).map((e) => [e.eventId, e.type, e.outcome]),
        [[eventId, 'checkout.session.completed', 'CREDITED']],
      );
    });

    it("writes topup.paid as an account event with the account's new balance", async () => {
      const { session } = await openTopup(1800);
      await deliver(w, 'checkout.session.completed', pay(session));
      const [paid] = memoryEvents(w.store.tables).filter((e) => e.type === 'topup.paid');
      assert.ok(paid);
      assert.equal(paid.accountId, agent.accountId);
      assert.equal(paid.keyId, null);
      assert.deepEqual(paid.data, {
        balance: { creditsMinor: 1800, currency: 'USD', frozen: false },
        billing: { model: 'ACCOUNT_BALANCE', budgetRequired: false },
        amountMinor: 1800,
      });
    });

    it('credits once when the same event is delivered many times at once, and later again', async () => {
      const { id, session } = await openTopup(3100);
      const e = signedEvent(w, 'checkout.session.completed', pay(session));
      const acks = await Promise.all(Array.from({ length: 10 }, () => w.events.receiveStripe(e.body, e.signature)));
      assert.deepEqual(acks, Array(10).fill({ received: true }));
      await w.events.receiveStripe(e.body, e.signature);
      assert.equal(balance(), 3100);
      assert.equal(entries().length, 1);
      assert.deepEqual(outcomes(id), ['CREDITED'], 'a redelivery keeps the first outcome');
      assert.equal(memoryEvents(w.store.tables).filter((x) => x.type === 'topup.paid').length, 1);
    });

    it('credits once across different events for the same payment', async () => {
      const { id, session } = await openTopup(1500);
      const paid = pay(session);
      await deliver(w, 'checkout.session.completed', paid);
      await deliver(w, 'checkout.session.async_payment_succeeded', paid);
      assert.equal(balance(), 1500);
      assert.deepEqual(outcomes(id), ['ALREADY_PAID', 'CREDITED']);
    });

    it('credits once when its transaction loses at commit and runs again', async () => {
      const { id, session } = await openTopup(1500);
      w.store.loseNextCommits(3);
      await deliver(w, 'checkout.session.completed', pay(session));
      assert.equal(balance(), 1500);
      assert.equal(entries().length, 1);
      assert.deepEqual(outcomes(id), ['CREDITED']);
    });

    it('waits for async_payment_succeeded when the session completed unpaid', async () => {
      const { id, session } = await openTopup(1700);
      const unpaid = { ...session, status: 'complete' as const };
      await deliver(w, 'checkout.session.completed', unpaid);
      assert.equal(balance(), 0);
      assert.equal(checkoutRow(w, id).status, 'OPEN');
      assert.deepEqual(outcomes(id), ['AWAITING_ASYNC_PAYMENT']);
      await deliver(w, 'checkout.session.async_payment_succeeded', pay(session));
      assert.equal(balance(), 1700);
      assert.deepEqual(outcomes(id), ['AWAITING_ASYNC_PAYMENT', 'CREDITED']);
    });

    it('marks a failed asynchronous payment FAILED without credit', async () => {
      const { id, session } = await openTopup(1800);
      await deliver(w, 'checkout.session.async_payment_failed', { ...session, status: 'complete' });
      assert.equal(checkoutRow(w, id).status, 'FAILED');
      assert.deepEqual(outcomes(id), ['FAILED']);
      assert.equal(balance(), 0);
    });

    it('closes a top-up on checkout.session.expired, and ignores a second expiry', async () => {
      const { id, session } = await openTopup(1000);
      const expired = { ...session, status: 'expired' as const };
      await deliver(w, 'checkout.session.expired', expired);
      assert.equal(checkoutRow(w, id).status, 'EXPIRED');
      await deliver(w, 'checkout.session.expired', expired);
      assert.deepEqual(outcomes(id), ['EXPIRED', 'IGNORED']);
      assert.equal(balance(), 0);
    });

    it('still credits a payment whose event arrives after the link was closed as expired', async () => {
      const { id, session } = await openTopup(1100);
      const paid = pay(session);
      w.clock.advance(SESSION_MS);
      await w.sessions.expireIfDue(checkoutRow(w, id));
      assert.equal(checkoutRow(w, id).status, 'EXPIRED');
      await deliver(w, 'checkout.session.completed', paid);
      assert.equal(checkoutRow(w, id).status, 'PAID');
      assert.equal(balance(), 1100);
      assert.deepEqual(outcomes(id), ['CREDITED']);
    });

    it('credits nothing for a paid session that disagrees with its top-up, and records each as MISMATCH', async () => {
      const other = await principal(w);
      const { id, session } = await openTopup(2000);
      const paid = pay(session);
      for (const wrong of [
        { ...paid, amountTotal: 200 },
        { ...paid, currency: 'eur' },
        { ...paid, id: 'cs_someone_elses' },
        { ...paid, metadata: { ...paid.metadata, account_id: other.accountId } },
      ])
        await deliver(w, 'checkout.session.completed', wrong);
      assert.equal(balance(), 0);
      assert.equal(checkoutRow(w, id).status, 'OPEN');
      assert.deepEqual(outcomes(id), ['MISMATCH', 'MISMATCH', 'MISMATCH', 'MISMATCH']);
      await deliver(w, 'checkout.session.completed', { ...paid, currency: 'USD' });
      assert.equal(balance(), 2000, 'the currency is compared without case');
    });

    it("ignores an expiry of a session that is not the checkout's own", async () => {
      const { id, session } = await openTopup(1000);
      await deliver(w, 'checkout.session.expired', { ...session, id: 'cs_other', status: 'expired' });
      assert.equal(checkoutRow(w, id).status, 'OPEN');
      assert.deepEqual(outcomes(id), ['MISMATCH']);
    });

    it('acknowledges a paid session that names no checkout of ours, crediting no one', async () => {
      const { session } = await openTopup(2000);
      const paid = pay(session);
      await deliver(w, 'checkout.session.completed', { ...paid, metadata: {}, clientReferenceId: null });
      await deliver(w, 'checkout.session.completed', { ...paid, metadata: { checkout_id: randomUUID() } });
      await deliver(w, 'checkout.session.expired', { ...paid, metadata: {}, clientReferenceId: null });
      assert.equal(balance(), 0);
      assert.deepEqual(
        recorded().map((e) => [e.outcome, e.checkoutId]),
        [
          ['UNKNOWN_CHECKOUT', null],
          ['UNKNOWN_CHECKOUT', null],
          ['UNKNOWN_CHECKOUT', null],
        ],
      );
    });

    it('finds the checkout by the client reference when the metadata lost it', async () => {
      const { id, session } = await openTopup(900);
      await deliver(w, 'checkout.session.completed', { ...pay(session), metadata: {} });
      assert.equal(balance(), 900);
      assert.deepEqual(outcomes(id), ['CREDITED']);
    });
  });

  describe('card orders', () => {
    it('releases a paid order to provisioning and hands it to the rentals module, moving no credits', async () => {
      const { id, orderId, session } = await openOrder();
      await deliver(w, 'checkout.session.completed', pay(session));
      assert.deepEqual(outcomes(id), ['ORDER_PAID']);
      assert.deepEqual(w.cardOrders.calls, [`paid:${orderId}`]);
      assert.equal(w.cardOrders.orders.get(orderId!)!.status, 'PENDING');
      assert.deepEqual(w.handedOff, [orderId]);
      assert.equal(checkoutRow(w, id).status, 'PAID');
      assert.equal(entries().length, 0, 'a card order is paid by card, not from credits');
      assert.equal(w.provider.refunds.length, 0);
    });

    it('hands a paid order off again on each redelivery, paying it once', async () => {
      const { id, orderId, session } = await openOrder();
      const paid = pay(session);
      await deliver(w, 'checkout.session.completed', paid);
      await deliver(w, 'checkout.session.async_payment_succeeded', paid);
      assert.deepEqual(outcomes(id), ['ALREADY_PAID', 'ORDER_PAID']);
      assert.deepEqual(w.cardOrders.calls, [`paid:${orderId}`]);
      assert.deepEqual(w.handedOff, [orderId, orderId], 'at least once');
    });

    it('refunds in full, once, a payment for an order cancelled before it was paid, and starts nothing', async () => {
      const { id, orderId, session } = await openOrder({ cancelled: true });
      const e = signedEvent(w, 'checkout.session.completed', pay(session));
      await w.events.receiveStripe(e.body, e.signature);
      assert.deepEqual(outcomes(id), ['REFUND_DUE']);
      assert.deepEqual(w.cardOrders.calls, [`paidTooLate:${orderId}`, `refunded:${orderId}`]);
      assert.equal(w.cardOrders.orders.get(orderId!)!.status, 'TERMINATED');
      assert.deepEqual(w.handedOff, []);
      assert.deepEqual(
        w.provider.refunds.map((r) => [r.checkoutId, r.amountMinor, r.idempotencyKey]),
        [[id, 1400, `refund:${id}`]],
      );
      const c = checkoutRow(w, id);
      assert.equal(c.status, 'PAID');
      assert.equal(c.refundStatus, 'SUCCEEDED');
      assert.equal(entries().length, 0, 'the card money never touched the balance');
      await w.events.receiveStripe(e.body, e.signature);
      await deliver(w, 'checkout.session.async_payment_succeeded', sessionOf(id));
      assert.equal(w.provider.refunds.length, 1);
    });

    it('refunds a payment that lands after the order expired unpaid', async () => {
      const { id, orderId, session } = await openOrder();
      const paid = pay(session);
      w.clock.advance(SESSION_MS);
      await w.sessions.expireIfDue(checkoutRow(w, id));
      assert.equal(w.cardOrders.orders.get(orderId!)!.status, 'FAILED');
      await deliver(w, 'checkout.session.completed', paid);
      assert.deepEqual(outcomes(id), ['REFUND_DUE']);
      assert.equal(checkoutRow(w, id).refundStatus, 'SUCCEEDED');
      assert.equal(w.cardOrders.orders.get(orderId!)!.status, 'FAILED', 'it stays ended');
    });

    it('owes back a paid checkout that names no order', async () => {
      const { id, session } = await openOrder({ orderId: null });
      await deliver(w, 'checkout.session.completed', pay(session));
      assert.deepEqual(outcomes(id), ['REFUND_DUE']);
      assert.equal(checkoutRow(w, id).refundStatus, 'SUCCEEDED');
      assert.deepEqual(w.cardOrders.calls, []);
    });

    it('acknowledges the payment when the refund fails, and the payments job makes it later, once', async () => {
      const { id, orderId, session } = await openOrder({ cancelled: true });
      w.provider.failRefunds = 2;
      assert.deepEqual(await w.events.receiveStripe(...signedArgs('checkout.session.completed', pay(session))), {
        received: true,
      });
      let c = checkoutRow(w, id);
      assert.equal(c.refundStatus, 'PENDING');
      assert.equal(c.refundAttempts, 1);
      await reconcilePayments({ payments: w, logger: createLogger('silent') });
      assert.equal(checkoutRow(w, id).refundAttempts, 2, 'the job tried again');
      assert.equal(await w.events.reconcile(), 1);
      c = checkoutRow(w, id);
      assert.equal(c.refundStatus, 'SUCCEEDED');
      assert.equal(w.provider.refunds.filter((r) => r.checkoutId === id).length, 3);
      assert.deepEqual(w.cardOrders.calls, [`paidTooLate:${orderId}`, `refunded:${orderId}`]);
      assert.equal(await w.events.reconcile(), 0);
    });

    it('fails an order whose asynchronous payment failed, or ends it as its owner asked', async () => {
      const plain = await openOrder();
      const cancelled = await openOrder({ cancelled: true });
      for (const o of [plain, cancelled])
        await deliver(w, 'checkout.session.async_payment_failed', { ...o.session, status: 'complete' });
      assert.equal(w.cardOrders.orders.get(plain.orderId!)!.status, 'FAILED');
      assert.equal(w.cardOrders.orders.get(cancelled.orderId!)!.status, 'TERMINATED');
      assert.deepEqual(w.cardOrders.calls, [
        `closedUnpaid:${plain.orderId}:FAILED`,
        `closedUnpaid:${cancelled.orderId}:FAILED`,
      ]);
      assert.equal(w.provider.refunds.length, 0, 'nothing was charged');
    });
  });

  describe('closeCancelled', () => {
    it('expires the session of a cancelled unpaid order first, then closes its checkout and ends the order', async () => {
      const o = await openOrder({ cancelled: true });
      const live = await openOrder();
      assert.equal(await w.events.closeCancelled(), 1);
      assert.deepEqual(w.provider.expired, [o.session.id]);
      assert.equal(w.provider.sessions.get(o.session.id)!.status, 'expired');
      assert.equal(checkoutRow(w, o.id).status, 'EXPIRED');
      assert.equal(w.cardOrders.orders.get(o.orderId!)!.status, 'TERMINATED');
      assert.equal(checkoutRow(w, live.id).status, 'OPEN');
      assert.equal(await w.events.closeCancelled(), 0);
    });

    it('closes only the order it is given', async () => {
      const a = await openOrder({ cancelled: true });
      const b = await openOrder({ cancelled: true });
      assert.equal(await w.events.closeCancelled({ orderId: b.orderId! }), 1);
      assert.equal(checkoutRow(w, b.id).status, 'EXPIRED');
      assert.equal(checkoutRow(w, a.id).status, 'OPEN');
      assert.equal(w.provider.sessions.get(a.session.id)!.status, 'open');
    });

    it('leaves the checkout open when the provider cannot expire its session, or it was paid meanwhile', async () => {
      const unreachable = await openOrder({ cancelled: true });
      const paidMeanwhile = await openOrder({ cancelled: true });
      pay(paidMeanwhile.session);
      w.provider.failExpires = 1;
      assert.equal(await w.events.closeCancelled(), 0);
      assert.equal(checkoutRow(w, unreachable.id).status, 'OPEN');
      assert.equal(checkoutRow(w, paidMeanwhile.id).status, 'OPEN');
      // The payment's own event settles the paid one: it is refunded, as the order cannot run.
      await deliver(w, 'checkout.session.completed', sessionOf(paidMeanwhile.id));
      assert.equal(checkoutRow(w, paidMeanwhile.id).refundStatus, 'SUCCEEDED');
      assert.equal(await w.events.closeCancelled(), 1);
      assert.equal(checkoutRow(w, unreachable.id).status, 'EXPIRED');
    });
  });

  describe('reconcile', () => {
    it('credits a session the provider reports paid, once, and closes one it reports expired', async () => {
      const paid = await openTopup(1900);
      const lapsed = await openTopup(1950);
      pay(paid.session);
      await w.provider.expireCheckoutSession(lapsed.session.id);
      w.clock.advance(PAST_GRACE_MS);
      assert.equal(await w.events.reconcile(), 2);
      assert.equal(checkoutRow(w, paid.id).status, 'PAID');
      assert.equal(checkoutRow(w, paid.id).paidEventId, `reconcile:${paid.session.id}`);
      assert.deepEqual(
        recorded(paid.id).map((e) => [e.eventId, e.type, e.outcome]),
        [[`reconcile:${paid.session.id}`, 'reconcile.paid', 'CREDITED']],
      );
      assert.equal(checkoutRow(w, lapsed.id).status, 'EXPIRED');
      assert.deepEqual(
        recorded(lapsed.id).map((e) => [e.type, e.outcome]),
        [['reconcile.expired', 'EXPIRED']],
      );
      assert.equal(balance(), 1900);
      assert.equal(await w.events.reconcile(), 0, 'nothing left to settle');
      await deliver(w, 'checkout.session.completed', sessionOf(paid.id));
      assert.equal(balance(), 1900, 'a late webhook for the reconciled payment changes nothing');
    });

    it("waits out the grace after expiry for the provider's own event", async () => {
      const t = await openTopup(1000);
      pay(t.session);
      w.clock.advance(SESSION_MS + 9 * 60 * 1000);
      assert.equal(await w.events.reconcile(), 0);
      assert.equal(checkoutRow(w, t.id).status, 'OPEN');
      assert.equal(balance(), 0);
    });

    it('leaves sessions still open or completed with a delayed payment to their own events', async () => {
      const open = await openTopup(1000);
      const delayed = await openTopup(1100);
      w.provider.sessions.get(delayed.session.id)!.status = 'complete';
      w.clock.advance(PAST_GRACE_MS);
      assert.equal(await w.events.reconcile(), 0);
      assert.equal(checkoutRow(w, open.id).status, 'OPEN');
      assert.equal(checkoutRow(w, delayed.id).status, 'OPEN');
    });

    it('closes as expired a checkout the provider keeps no record of', async () => {
      const t = await openTopup(1000);
      w.provider.sessions.delete(t.session.id);
      w.clock.advance(PAST_GRACE_MS);
      assert.equal(await w.events.reconcile(), 1);
      assert.equal(checkoutRow(w, t.id).status, 'EXPIRED');
      assert.deepEqual(
        recorded(t.id).map((e) => [e.eventId, e.outcome]),
        [[`reconcile:${t.session.id}`, 'EXPIRED']],
      );
    });

    it('closes a stale checkout of a provider no longer configured without asking the configured one', async () => {
      const t = await openTopup(1000);
      w.store.tables.table<Checkout>('checkouts').update(t.id, { provider: 'local' });
      w.clock.advance(PAST_GRACE_MS);
      assert.equal(await w.events.reconcile(), 1);
      assert.equal(checkoutRow(w, t.id).status, 'EXPIRED');
      assert.equal(balance(), 0);
    });

    it("releases a card order whose payment's webhook was lost", async () => {
      const o = await openOrder();
      pay(o.session);
      w.clock.advance(PAST_GRACE_MS);
      assert.equal(await w.events.reconcile(), 1);
      assert.deepEqual(outcomes(o.id), ['ORDER_PAID']);
      assert.deepEqual(w.handedOff, [o.orderId]);
    });
  });

  /** The arguments of `receiveStripe` for a signed event. */
  function signedArgs(type: string, s: CheckoutSessionInfo): [Buffer, string] {
    const e = signedEvent(w, type, s);
    return [e.body, e.signature];
  }
});
