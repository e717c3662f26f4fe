import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { budgetTooSmallMessage } from '../../src/vocabulary/budget-hints.js';
import { Checkout } from '../../src/modules/billing/checkout.entity.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import type { RentalHandoff } from '../../src/modules/billing/rental-handoff.js';
import { lifecycleDepsOf } from '../../src/container.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { signup, type SignedUp } from '../helpers/factories.js';
import { balanceOf, createStripeContext, deliver, sessionFor, type StripeTestContext } from '../helpers/payments.js';
import { queuedJobs } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'two-hours',
    name: 'NVIDIA H200',
    category: 'datacenter',
    vramGb: 141,
    gpuCount: 1,
    pricePerHourMinor: 700,
    maximumDurationSeconds: 7200,
  },
  {
    key: 'week',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 299,
    maximumDurationSeconds: 7 * 86400,
  },
  {
    key: 'half-hour',
    name: 'NVIDIA B200',
    category: 'datacenter',
    vramGb: 192,
    gpuCount: 1,
    pricePerHourMinor: 900,
    maximumDurationSeconds: 1800,
  },
  {
    key: 'sold-out',
    name: 'NVIDIA GB200',
    category: 'datacenter',
    vramGb: 192,
    gpuCount: 1,
    pricePerHourMinor: 1200,
    maximumDurationSeconds: 86400,
  },
];

describe('POST /api/v1/orders/checkout', () => {
  let ctx: StripeTestContext;
  const offerId: Record<string, string> = {};
  /** Where paid card orders go in these tests; unset, they wait in PENDING. */
  let handoff: RentalHandoff | undefined;
  before(async () => {
    ctx = await createStripeContext({
      offers: OFFERS,
      rentalHandoff: { cardOrderPaid: async (id) => handoff?.cardOrderPaid(id) },
    });
    for (const o of await ctx.services.ds.getRepository(Offer).find()) offerId[o.providerOfferKey] = o.id;
    assert.ok(offerId['two-hours'] && offerId.week && offerId['sold-out']);
    // Cached once, then gone from the provider: the cache still knows it, marked unavailable.
    await ctx.setInventory(OFFERS.map((o) => (o.key === 'sold-out' ? { ...o, available: false } : o)));
  });
  after(() => ctx.close());
  afterEach(() => {
    handoff = undefined;
  });

  const checkout = (who: SignedUp, body: unknown, key = randomUUID()) =>
    ctx.api
      .post('/api/v1/orders/checkout')
      .set(who.auth)
      .set('Idempotency-Key', key)
      .send(body as object);

  async function withEmail(): Promise<SignedUp> {
    // Every unpaid card order holds one of the key's concurrency slots; these tests make several.
    const who = await signup(ctx, { maxConcurrentDeployments: 20 });
    const res = await ctx.api
      .put('/api/v1/me/email')
      .set(who.auth)
      .send({ email: `owner+${who.accountId.slice(0, 8)}@example.com` });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return who;
  }

  describe('PUT /api/v1/me/email', () => {
    it('sets the e-mail with a billing-scoped key and shows it on the account', async () => {
      const who = await signup(ctx);
      const res = await ctx.api.put('/api/v1/me/email').set(who.auth).send({ email: 'human@example.com' });
      assert.equal(res.status, 200);
      assert.equal(res.body.data.email, 'human@example.com');
      const me = await ctx.api.get('/api/v1/me').set(who.auth);
      assert.equal(me.body.data.user.email, 'human@example.com');
    });

    it('refuses keys that are neither owner keys nor billing-scoped (403), and malformed addresses (422)', async () => {
      const who = await signup(ctx);
      const { token } = await ctx.services.store.transaction((r) =>
        ctx.services.keys.create(r.accounts, {
          accountId: who.accountId,
          kind: 'AGENT',
          name: 'setup-code agent',
          scopes: ['read', 'rent', 'manage'],
          origin: 'test',
          maxPerRentalMinor: 500,
          budgetLimitMinor: 500,
          maxConcurrentDeployments: 1,
        }),
      );
      const forbidden = await ctx.api
        .put('/api/v1/me/email')
        .set('Authorization', `Bearer ${token}`)
        .send({ email: 'a@example.com' });
      assert.equal(forbidden.status, 403);
      assert.equal(forbidden.body.error.code, 'FORBIDDEN');
      for (const email of ['not-an-address', 'a@b', `${'x'.repeat(250)}@example.com`]) {
        const res = await ctx.api.put('/api/v1/me/email').set(who.auth).send({ email });
        assert.equal(res.status, 422, email);
        assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      }
    });
  });

  it('needs an e-mail on the account: 422 EMAIL_REQUIRED, and nothing is created', async () => {
    const who = await signup(ctx);
    const res = await checkout(who, { offerId: offerId.week, budgetMinor: 1000 });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'EMAIL_REQUIRED');
    assert.equal(await ctx.services.ds.getRepository(Order).countBy({ accountId: who.accountId }), 0);
  });

  it('enforces budgetMinor between 500 and floor(price * maximumDurationSeconds / 3600) for the offer', async () => {
    const who = await withEmail();
    const cases: [string, number, number, string][] = [
      ['two-hours', 499, 422, 'BUDGET_TOO_SMALL'], // the floor of every rental
      ['two-hours', 0, 422, 'BUDGET_TOO_SMALL'],
      ['two-hours', 1401, 422, 'VALIDATION_FAILED'],
      ['half-hour', 500, 422, 'VALIDATION_FAILED'], // its maximum, 450, is below the minimum
      ['two-hours', 500, 422, 'BUDGET_TOO_SMALL'], // not one whole hour at 700
      ['two-hours', 1400, 201, ''],
      ['two-hours', 700, 201, ''],
      ['week', 500, 201, ''],
      ['week', 50232, 201, ''],
      ['week', 50233, 422, 'VALIDATION_FAILED'],
    ];
    for (const [key, budgetMinor, status, code] of cases) {
      const res = await checkout(who, { offerId: offerId[key], budgetMinor });
      assert.equal(res.status, status, `${key} ${budgetMinor}: ${JSON.stringify(res.body)}`);
      if (code) {
        assert.equal(res.body.error.code, code, `${key} ${budgetMinor}`);
        assert.match(res.body.error.message, /budgetMinor/);
      }
    }
    const invalid = await checkout(who, { offerId: 'nope', budgetMinor: 1000 });
    assert.equal(invalid.status, 422);
    const extra = await checkout(who, { offerId: offerId.week, budgetMinor: 1000, hours: 3 });
    assert.equal(extra.status, 422);
  });

  it('refuses a budget under the 500-cent floor as a credit rental does: 422 BUDGET_TOO_SMALL, the same message', async () => {
    const who = await withEmail();
    for (const budgetMinor of [499, 5, -1]) {
      const card = await checkout(who, { offerId: offerId.week, budgetMinor });
      const credits = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ offerId: offerId.week, budgetMinor });
      for (const res of [card, credits]) {
        assert.equal(res.status, 422, JSON.stringify(res.body));
        assert.equal(res.body.error.code, 'BUDGET_TOO_SMALL');
      }
      assert.equal(card.body.error.message, budgetTooSmallMessage(budgetMinor, 299));
      assert.equal(card.body.error.message, credits.body.error.message);
    }
    assert.equal(await ctx.services.ds.getRepository(Order).countBy({ accountId: who.accountId }), 0);
  });

  it('answers 422 naming offerId for an offer that is not currently offered', async () => {
    const who = await withEmail();
    for (const id of [offerId['sold-out'], randomUUID()]) {
      const res = await checkout(who, { offerId: id, budgetMinor: 1200 });
      assert.equal(res.status, 422);
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.match(res.body.error.message, /offerId: .* is not currently offered/);
    }
  });

  it('creates an AWAITING_PAYMENT card-funded LEGACY_PREPAID order of whole hours and a Stripe checkout for it', async () => {
    const who = await withEmail();
    const res = await checkout(who, { offerId: offerId.week, budgetMinor: 1000 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { orderId, checkoutUrl, quote } = res.body.data;
    assert.deepEqual(quote, { hourlyPriceMinor: 299, durationSeconds: 3 * 3600, totalMinor: 897, currency: 'USD' });

    const order = await ctx.services.ds.getRepository(Order).findOneByOrFail({ id: orderId });
    assert.equal(order.status, 'AWAITING_PAYMENT');
    assert.equal(order.funding, 'CARD');
    assert.equal(order.billingModel, 'LEGACY_PREPAID');
    assert.equal(order.requestKind, 'OFFER');
    assert.equal(order.offerId, offerId.week);
    assert.equal(order.keyId, who.keyId);
    assert.equal(order.budgetMinor, 1000);
    assert.equal(order.totalMinor, 897);
    assert.equal(order.durationSeconds, 10800);
    const dep = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ orderId });
    assert.equal(dep.status, 'AWAITING_PAYMENT');
    assert.equal(dep.billingModel, 'LEGACY_PREPAID');
    assert.equal(dep.hoursPurchased, 3);
    assert.equal(dep.durationSeconds, 10800);

    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
    const session = sessionFor(ctx, c.id);
    assert.equal(checkoutUrl, session.url);
    assert.equal(session.amount_total, 897);
    assert.equal(session.currency, 'usd');
    assert.equal(session.mode, 'payment');
    assert.equal(session.customer_email, `owner+${who.accountId.slice(0, 8)}@example.com`);
    assert.equal(session.metadata.order_id, orderId);
    assert.equal(session.metadata.purpose, 'ORDER');
    assert.deepEqual(
      await balanceOf(ctx, who.accountId),
      { balance: 0, entries: 0 },
      'card orders never touch credits',
    );
  });

  it('returns the same order for the same key and body, and 409 IDEMPOTENCY_CONFLICT for a changed body', async () => {
    const who = await withEmail();
    const key = randomUUID();
    const first = await checkout(who, { offerId: offerId.week, budgetMinor: 1500 }, key);
    assert.equal(first.status, 201);
    const sessions = ctx.stripe.createdSessions.length;
    const again = await checkout(who, { budgetMinor: 1500, offerId: offerId.week }, key);
    assert.equal(again.status, 201);
    assert.deepEqual(again.body.data, first.body.data);
    assert.equal(ctx.stripe.createdSessions.length, sessions);
    const changed = await checkout(who, { offerId: offerId.week, budgetMinor: 1600 }, key);
    assert.equal(changed.status, 409);
    assert.equal(changed.body.error.code, 'IDEMPOTENCY_CONFLICT');
    assert.equal(await ctx.services.ds.getRepository(Order).countBy({ accountId: who.accountId }), 1);
    const missingKey = await ctx.api
      .post('/api/v1/orders/checkout')
      .set(who.auth)
      .send({ offerId: offerId.week, budgetMinor: 1500 });
    assert.equal(missingKey.status, 400);
    const anon = await ctx.api
      .post('/api/v1/orders/checkout')
      .set('Idempotency-Key', key)
      .send({ offerId: offerId.week, budgetMinor: 1500 });
    assert.equal(anon.status, 401);
  });

  it('moves a paid order to PENDING, hands it to rentals, and posts no ledger entry', async () => {
    const who = await withEmail();
    const handed: string[] = [];
    handoff = { cardOrderPaid: async (id) => void handed.push(id) };
    const res = await checkout(who, { offerId: offerId['two-hours'], budgetMinor: 1400 });
    const { orderId } = res.body.data;
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
    const paid = ctx.stripe.completeSession(sessionFor(ctx, c.id).id);
    const payload = ctx.stripe.eventPayload('checkout.session.completed', paid);
    const results = await Promise.all([deliver(ctx, payload), deliver(ctx, payload), deliver(ctx, payload)]);
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200],
    );

    assert.equal((await ctx.services.ds.getRepository(Order).findOneByOrFail({ id: orderId })).status, 'PENDING');
    assert.equal((await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ orderId })).status, 'PENDING');
    assert.equal((await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId })).status, 'PAID');
    assert.ok(handed.length >= 1 && handed.every((id) => id === orderId), JSON.stringify(handed));
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
  });

  it('leaves a paid order PENDING when no rentals hook is wired', async () => {
    const who = await withEmail();
    const { orderId } = (await checkout(who, { offerId: offerId.week, budgetMinor: 600 })).body.data;
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
    assert.equal(
      (
        await deliver(
          ctx,
          ctx.stripe.eventPayload('checkout.session.completed', ctx.stripe.completeSession(sessionFor(ctx, c.id).id)),
        )
      ).status,
      200,
    );
    assert.equal((await ctx.services.ds.getRepository(Order).findOneByOrFail({ id: orderId })).status, 'PENDING');
  });

  it('answers 500 while the rentals hook fails, so Stripe redelivers until it succeeds', async () => {
    const who = await withEmail();
    const { orderId } = (await checkout(who, { offerId: offerId.week, budgetMinor: 900 })).body.data;
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
    const payload = ctx.stripe.eventPayload(
      'checkout.session.completed',
      ctx.stripe.completeSession(sessionFor(ctx, c.id).id),
    );
    handoff = {
      cardOrderPaid: async () => {
        throw new Error('queue down');
      },
    };
    assert.equal((await deliver(ctx, payload)).status, 500);
    assert.equal(
      (await ctx.services.ds.getRepository(Order).findOneByOrFail({ id: orderId })).status,
      'PENDING',
      'the payment itself is recorded',
    );
    const handed: string[] = [];
    handoff = { cardOrderPaid: async (id) => void handed.push(id) };
    assert.equal((await deliver(ctx, payload)).status, 200);
    assert.deepEqual(handed, [orderId]);
  });

  it('fails an unpaid order when its checkout expires, with a customer-safe reason', async () => {
    const who = await withEmail();
    const { orderId } = (await checkout(who, { offerId: offerId.week, budgetMinor: 700 })).body.data;
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
    const expired = ctx.stripe.expireSession(sessionFor(ctx, c.id).id);
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.expired', expired))).status, 200);
    const order = await ctx.services.ds.getRepository(Order).findOneByOrFail({ id: orderId });
    assert.equal(order.status, 'FAILED');
    assert.equal(order.failureCode, 'PAYMENT_EXPIRED');
    assert.match(order.failureReason!, /Nothing was charged/);
    assert.equal(order.reversalStatus, 'SUCCEEDED', 'nothing was charged, so nothing is owed back');
    assert.equal((await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ orderId })).status, 'FAILED');
  });

  it('refunds the card in full, once, when a paid rental fails; a refused refund stays PENDING until the reconciler retries', async () => {
    // The provider has no capacity for "week" any more; the cached offer (and its id) is unchanged.
    await ctx.setInventory(
      OFFERS.map((o) =>
        o.key === 'sold-out'
          ? { ...o, available: false }
          : o.key === 'week'
            ? { ...o, create: 'unavailable' as const }
            : o,
      ),
    );
    const life = createRentalLifecycle(lifecycleDepsOf(ctx.services), { stuckAfterMs: 60_000 });
    const who = await withEmail();
    async function paidOrder(budgetMinor: number) {
      const { orderId } = (await checkout(who, { offerId: offerId.week, budgetMinor })).body.data;
      const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
      const paid = ctx.stripe.completeSession(sessionFor(ctx, c.id).id);
      assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
      const d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ orderId });
      return { orderId, checkoutId: c.id, amount: c.amountMinor, intent: paid.payment_intent!, deploymentId: d.id };
    }
    const rental = async (id: string) => (await ctx.api.get(`/api/v1/rentals/${id}`).set(who.auth)).body.data;
    try {
      const a = await paidOrder(900);
      await life.provision(a.deploymentId);
      await life.provision(a.deploymentId);
      const failed = await rental(a.orderId);
      assert.equal(failed.status, 'FAILED');
      assert.equal(failed.failureReason !== null, true);
      assert.equal(failed.reversalStatus, 'SUCCEEDED');
      const refunds = ctx.stripe.refunds.filter((r) => r.payment_intent === a.intent);
      assert.equal(refunds.length, 1, 'refunded once across two runs');
      assert.equal(refunds[0].amount, a.amount);
      assert.equal(refunds[0].metadata.order_id, a.orderId);
      const refundCalls = ctx.stripe.requests.filter((r) => r.path === '/v1/refunds');
      assert.ok(refundCalls.every((r) => r.idempotencyKey === `refund:${a.checkoutId}`));
      assert.equal(
        (await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ id: a.checkoutId })).refundId,
        refunds[0].id,
      );
      assert.deepEqual(
        await balanceOf(ctx, who.accountId),
        { balance: 0, entries: 0 },
        'card money never becomes credits',
      );

      ctx.stripe.refuseRefunds = true;
      const b = await paidOrder(600);
      await life.provision(b.deploymentId);
      assert.equal((await rental(b.orderId)).reversalStatus, 'PENDING');
      assert.equal(ctx.stripe.refunds.filter((r) => r.payment_intent === b.intent).length, 0);
      ctx.stripe.refuseRefunds = false;
      ctx.clock.advance(61_000);
      const { redriven } = await life.reconcile();
      assert.ok(redriven.includes(b.deploymentId), JSON.stringify(redriven));
      await life.provision(b.deploymentId);
      assert.equal((await rental(b.orderId)).reversalStatus, 'SUCCEEDED');
      assert.equal(ctx.stripe.refunds.filter((r) => r.payment_intent === b.intent).length, 1);
    } finally {
      ctx.stripe.refuseRefunds = false;
      await ctx.setInventory(OFFERS.map((o) => (o.key === 'sold-out' ? { ...o, available: false } : o)));
    }
  });

  it('re-drives a paid card order whose provision job was lost', async () => {
    const life = createRentalLifecycle(lifecycleDepsOf(ctx.services), { stuckAfterMs: 60_000 });
    const who = await withEmail();
    // No hand-off in this test: the paid order's provision job is lost, as in a crash after commit.
    const { orderId } = (await checkout(who, { offerId: offerId.week, budgetMinor: 900 })).body.data;
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
    const paid = ctx.stripe.completeSession(sessionFor(ctx, c.id).id);
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
    const d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ orderId });
    assert.equal(d.status, 'PENDING');
    assert.ok(d.statusChangedAt, 'the move to PENDING is stamped');
    assert.deepEqual(await queuedJobs(ctx, d.id), []);
    assert.equal((await life.reconcile()).redriven.includes(d.id), false, 'not before the bound');
    ctx.clock.advance(61_000);
    try {
      assert.ok((await life.reconcile()).redriven.includes(d.id));
      assert.deepEqual(await queuedJobs(ctx, d.id), [{ name: 'rental.provision', deploymentId: d.id }]);
      // A row written before every status change was stamped counts from its last update.
      await ctx.services.ds.query(`DELETE FROM agenda_jobs WHERE unique_key = ?`, [d.id]);
      await ctx.services.ds.getRepository(Deployment).update({ id: d.id }, { statusChangedAt: null });
      assert.ok((await life.reconcile()).redriven.includes(d.id));
      assert.deepEqual(await queuedJobs(ctx, d.id), [{ name: 'rental.provision', deploymentId: d.id }]);
    } finally {
      ctx.clock.set(new Date());
    }
  });
});
