import assert from 'node:assert/strict';
import { reconcilePayments } from '../../src/modules/billing/payments.js';
import { Checkout } from '../../src/modules/billing/checkout.entity.js';
import { PaymentEvent } from '../../src/modules/billing/payment-event.entity.js';
import { signup, type SignedUp } from '../helpers/factories.js';
import {
  balanceOf,
  createStripeContext,
  createTopup,
  deliver,
  sessionFor,
  signature,
  WEBHOOK_SECRET,
  type StripeTestContext,
} from '../helpers/payments.js';

describe('POST /api/v1/webhooks/stripe', () => {
  let ctx: StripeTestContext;
  before(async () => {
    ctx = await createStripeContext();
  });
  after(() => ctx.close());

  /** A signed-up account with one open top-up and its fake Stripe session. */
  async function openTopup(
    amountMinor = 2000,
  ): Promise<{ who: SignedUp; topupId: string; sessionId: string; key: string }> {
    const who = await signup(ctx);
    const { key, topup } = await createTopup(ctx, who, amountMinor);
    return { who, topupId: topup.topupId, sessionId: sessionFor(ctx, topup.topupId).id, key };
  }

  const eventsFor = (checkoutId: string) => ctx.services.ds.getRepository(PaymentEvent).findBy({ checkoutId });
  const checkout = (id: string) => ctx.services.ds.getRepository(Checkout).findOneByOrFail({ id });

  it('credits a paid checkout.session.completed once, visible in the balance with its cause', async () => {
    const { who, topupId, sessionId } = await openTopup(2500);
    const payload = ctx.stripe.eventPayload('checkout.session.completed', ctx.stripe.completeSession(sessionId));
    const res = await deliver(ctx, payload);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.received, true);

    const bal = await ctx.api.get('/api/v1/billing/balance').set(who.auth);
    assert.equal(bal.status, 200);
    assert.equal(bal.body.data.creditsMinor, 2500);
    assert.equal(bal.body.data.entries.length, 1);
    const [entry] = bal.body.data.entries;
    assert.equal(entry.kind, 'TOPUP');
    assert.equal(entry.amountMinor, 2500);
    assert.equal(entry.balanceAfterMinor, 2500);
    assert.equal(entry.reference, `topup:${topupId}`);
    assert.match(entry.description, new RegExp(sessionId));
    assert.ok(!Number.isNaN(Date.parse(entry.createdAt)));
    assert.equal(bal.body.data.nextBefore, null);

    const c = await checkout(topupId);
    assert.equal(c.status, 'PAID');
    assert.equal(c.paidEventId, JSON.parse(payload).id);
    const events = await eventsFor(topupId);
    assert.deepEqual(
      events.map((e) => [e.type, e.outcome]),
      [['checkout.session.completed', 'CREDITED']],
    );
  });

  it('credits once when the same event is delivered 10 times concurrently', async () => {
    const { who, topupId, sessionId } = await openTopup(3100);
    const payload = ctx.stripe.eventPayload('checkout.session.completed', ctx.stripe.completeSession(sessionId));
    const results = await Promise.all(Array.from({ length: 10 }, () => deliver(ctx, payload)));
    assert.deepEqual(
      results.map((r) => r.status),
      Array(10).fill(200),
      JSON.stringify(results.map((r) => r.body)),
    );
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 3100, entries: 1 });
    assert.equal((await eventsFor(topupId)).length, 1);
    // And once more, later, as Stripe retries.
    assert.equal((await deliver(ctx, payload)).status, 200);
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 3100, entries: 1 });
  });

  it('credits once across different events for the same payment', async () => {
    const { who, topupId, sessionId } = await openTopup(1500);
    const paid = ctx.stripe.completeSession(sessionId);
    const first = ctx.stripe.eventPayload('checkout.session.completed', paid);
    const second = ctx.stripe.eventPayload('checkout.session.async_payment_succeeded', paid);
    const results = await Promise.all([
      deliver(ctx, first),
      deliver(ctx, second),
      deliver(ctx, first),
      deliver(ctx, second),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200, 200],
    );
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 1500, entries: 1 });
    const outcomes = (await eventsFor(topupId)).map((e) => e.outcome).sort();
    assert.deepEqual(outcomes, ['ALREADY_PAID', 'CREDITED']);
  });

  it('waits for async_payment_succeeded when the session completed unpaid', async () => {
    const { who, topupId, sessionId } = await openTopup(1700);
    const unpaid = ctx.stripe.completeSession(sessionId, 'unpaid');
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', unpaid))).status, 200);
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
    assert.equal((await checkout(topupId)).status, 'OPEN');
    const paid = { ...unpaid, payment_status: 'paid' };
    assert.equal(
      (await deliver(ctx, ctx.stripe.eventPayload('checkout.session.async_payment_succeeded', paid))).status,
      200,
    );
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 1700, entries: 1 });
  });

  it('marks a failed asynchronous payment FAILED without credit', async () => {
    const { who, topupId, sessionId } = await openTopup(1800);
    const unpaid = ctx.stripe.completeSession(sessionId, 'unpaid');
    assert.equal(
      (await deliver(ctx, ctx.stripe.eventPayload('checkout.session.async_payment_failed', unpaid))).status,
      200,
    );
    assert.equal((await checkout(topupId)).status, 'FAILED');
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
  });

  describe('rejects with 400 and writes nothing', () => {
    async function assertNothingWritten(who: SignedUp, topupId: string) {
      assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
      assert.equal((await checkout(topupId)).status, 'OPEN');
      assert.equal((await eventsFor(topupId)).length, 0);
    }

    it('a payload with one byte changed after signing', async () => {
      const { who, topupId, sessionId } = await openTopup(2000);
      const payload = ctx.stripe.eventPayload('checkout.session.completed', ctx.stripe.completeSession(sessionId), {
        id: `evt_forged_${topupId}`,
      });
      const sig = signature(ctx, payload);
      const tampered = payload.replace('"amount_total": 2000', '"amount_total": 9000');
      assert.notEqual(tampered, payload);
      const res = await deliver(ctx, tampered, sig);
      assert.equal(res.status, 400);
      assert.equal(res.body.error.code, 'INVALID_REQUEST');
      // Even a single flipped byte elsewhere.
      const flipped = payload.slice(0, 10) + (payload[10] === 'a' ? 'b' : 'a') + payload.slice(11);
      assert.equal((await deliver(ctx, flipped, sig)).status, 400);
      await assertNothingWritten(who, topupId);
    });

    it('a signature made with another secret', async () => {
      const { who, topupId, sessionId } = await openTopup(2000);
      const payload = ctx.stripe.eventPayload('checkout.session.completed', ctx.stripe.completeSession(sessionId), {
        id: `evt_forged_${topupId}`,
      });
      const res = await deliver(ctx, payload, signature(ctx, payload, { secret: `${WEBHOOK_SECRET}x` }));
      assert.equal(res.status, 400);
      await assertNothingWritten(who, topupId);
    });

    it('a signature older than 300 seconds', async () => {
      const { who, topupId, sessionId } = await openTopup(2000);
      const payload = ctx.stripe.eventPayload('checkout.session.completed', ctx.stripe.completeSession(sessionId), {
        id: `evt_forged_${topupId}`,
      });
      const now = Math.floor(ctx.clock.now().getTime() / 1000);
      const res = await deliver(ctx, payload, signature(ctx, payload, { timestamp: now - 301 }));
      assert.equal(res.status, 400);
      await assertNothingWritten(who, topupId);
      // The same event signed within the tolerance is accepted.
      assert.equal((await deliver(ctx, payload, signature(ctx, payload, { timestamp: now - 299 }))).status, 200);
      assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 2000, entries: 1 });
    });

    it('a missing signature, a garbled one, or a body that is not the signed JSON', async () => {
      const { who, topupId, sessionId } = await openTopup(2000);
      const payload = ctx.stripe.eventPayload('checkout.session.completed', ctx.stripe.completeSession(sessionId), {
        id: `evt_forged_${topupId}`,
      });
      assert.equal((await deliver(ctx, payload, null)).status, 400);
      assert.equal((await deliver(ctx, payload, 'garbage')).status, 400);
      assert.equal((await deliver(ctx, payload, 't=1,v1=00')).status, 400);
      const form = await ctx.api
        .post('/api/v1/webhooks/stripe')
        .set('Stripe-Signature', signature(ctx, payload))
        .type('form')
        .send({ payload });
      assert.equal(form.status, 415, 'a form is not the JSON that was signed');
      await assertNothingWritten(who, topupId);
    });
  });

  it('closes a top-up on checkout.session.expired', async () => {
    const { who, topupId, sessionId } = await openTopup(1000);
    const res = await deliver(
      ctx,
      ctx.stripe.eventPayload('checkout.session.expired', ctx.stripe.expireSession(sessionId)),
    );
    assert.equal(res.status, 200);
    assert.equal((await checkout(topupId)).status, 'EXPIRED');
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
  });

  it('still credits a payment whose event arrives after the link was marked expired', async () => {
    const { who, topupId, sessionId, key } = await openTopup(1100);
    const paid = ctx.stripe.completeSession(sessionId);
    const expiresAt = (await checkout(topupId)).expiresAt!;
    ctx.clock.set(new Date(expiresAt.getTime() + 1000));
    try {
      const replay = await ctx.api
        .post('/api/v1/billing/topups')
        .set(who.auth)
        .set('Idempotency-Key', key)
        .send({ amountMinor: 1100 });
      assert.equal(replay.status, 410);
      assert.equal((await checkout(topupId)).status, 'EXPIRED');
      assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
    } finally {
      ctx.clock.set(new Date());
    }
    assert.equal((await checkout(topupId)).status, 'PAID');
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 1100, entries: 1 });
  });

  it('acknowledges event types it does not handle and writes nothing', async () => {
    const before = await ctx.services.ds.getRepository(PaymentEvent).count();
    const res = await deliver(
      ctx,
      ctx.stripe.eventPayload('customer.created', { id: 'cus_test_1', object: 'customer' }),
    );
    assert.equal(res.status, 200);
    assert.equal(await ctx.services.ds.getRepository(PaymentEvent).count(), before);
  });

  it('does not credit a signed paid session that disagrees with its top-up', async () => {
    const { who, topupId, sessionId } = await openTopup(2000);
    const paid = { ...ctx.stripe.completeSession(sessionId), amount_total: 200 };
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
    const otherSession = { ...paid, amount_total: 2000, id: 'cs_test_someone_elses' };
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', otherSession))).status, 200);
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
    assert.equal((await checkout(topupId)).status, 'OPEN');
    assert.deepEqual(
      (await eventsFor(topupId)).map((e) => e.outcome),
      ['MISMATCH', 'MISMATCH'],
    );
  });

  it('acknowledges a paid session that names no checkout of ours without crediting anyone', async () => {
    const { who, sessionId } = await openTopup(2000);
    const stranger = { ...ctx.stripe.completeSession(sessionId), metadata: {}, client_reference_id: null };
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', stranger))).status, 200);
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
  });

  it('pages the balance entries newest first', async () => {
    const who = await signup(ctx);
    for (const amount of [600, 700, 800]) {
      const { topup } = await createTopup(ctx, who, amount);
      const paid = ctx.stripe.completeSession(sessionFor(ctx, topup.topupId).id);
      assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
    }
    const first = await ctx.api.get('/api/v1/billing/balance?limit=2').set(who.auth);
    assert.deepEqual(
      first.body.data.entries.map((e: { amountMinor: number }) => e.amountMinor),
      [800, 700],
    );
    assert.equal(first.body.data.creditsMinor, 2100);
    const second = await ctx.api
      .get(`/api/v1/billing/balance?limit=2&before=${first.body.data.nextBefore}`)
      .set(who.auth);
    assert.deepEqual(
      second.body.data.entries.map((e: { amountMinor: number }) => e.amountMinor),
      [600],
    );
    assert.equal(second.body.data.nextBefore, null);
  });

  describe('reconciliation of lost webhooks', () => {
    it('credits a session Stripe reports paid, once, and closes one it reports expired', async () => {
      const paid = await openTopup(1900);
      const lapsed = await openTopup(1950);
      ctx.stripe.completeSession(paid.sessionId);
      ctx.stripe.expireSession(lapsed.sessionId);
      const expiresAt = (await checkout(paid.topupId)).expiresAt!;
      ctx.clock.set(new Date(expiresAt.getTime() + 11 * 60 * 1000));
      try {
        const settled = await reconcilePayments(ctx.services);
        assert.ok(settled >= 2, `settled ${settled}`);
        // The database is shared with other files' checkouts (cancelled orders, refunds owed), which
        // a run settles in pages: drain them, then a further run must find nothing.
        for (let i = 0; i < 20 && (await ctx.services.payments.events.reconcile(500)) > 0; i++);
        assert.equal(await ctx.services.payments.events.reconcile(500), 0, 'nothing left to settle');
      } finally {
        ctx.clock.set(new Date());
      }
      assert.equal((await checkout(paid.topupId)).status, 'PAID');
      assert.deepEqual(await balanceOf(ctx, paid.who.accountId), { balance: 1900, entries: 1 });
      assert.equal((await checkout(lapsed.topupId)).status, 'EXPIRED');
      assert.deepEqual(await balanceOf(ctx, lapsed.who.accountId), { balance: 0, entries: 0 });
      // A late webhook for the reconciled payment changes nothing.
      const late = ctx.stripe.eventPayload('checkout.session.completed', ctx.stripe.sessions.get(paid.sessionId));
      assert.equal((await deliver(ctx, late)).status, 200);
      assert.deepEqual(await balanceOf(ctx, paid.who.accountId), { balance: 1900, entries: 1 });
    });
  });

  describe('the Stripe provider against the fake API', () => {
    it('retrieves and expires sessions, with Stripe-shaped errors for unknown ones', async () => {
      const { sessionId } = await openTopup(2000);
      const provider = ctx.services.payments.provider!;
      const got = await provider.retrieveCheckoutSession(sessionId);
      assert.equal(got?.status, 'open');
      assert.equal(got?.paymentStatus, 'unpaid');
      assert.equal(got?.amountTotal, 2000);
      const expired = await provider.expireCheckoutSession(sessionId, `expire:${sessionId}`);
      assert.equal(expired?.status, 'expired');
      assert.equal(await provider.retrieveCheckoutSession('cs_test_nope'), null);
      await assert.rejects(provider.expireCheckoutSession(sessionId, `expire-again:${sessionId}`), /can be expired/);
    });

    it('is refused by Stripe when an idempotency key is reused with other parameters', async () => {
      const provider = ctx.services.payments.provider!;
      const base = {
        checkoutId: '00000000-0000-4000-8000-000000000001',
        purpose: 'TOPUP' as const,
        accountId: '00000000-0000-4000-8000-000000000002',
        orderId: null,
        amountMinor: 1000,
        currency: 'usd',
        productName: 'Compute credits',
        successUrl: 'http://gpu.test/ok',
        cancelUrl: 'http://gpu.test/no',
        idempotencyKey: `idem-${Date.now()}`,
      };
      const one = await provider.createCheckoutSession(base);
      const same = await provider.createCheckoutSession(base);
      assert.equal(same.id, one.id);
      await assert.rejects(
        provider.createCheckoutSession({ ...base, amountMinor: 1001 }),
        (err: Error & { type?: string }) => {
          assert.equal(err.type, 'StripeIdempotencyError');
          return true;
        },
      );
    });
  });
});
