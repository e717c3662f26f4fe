import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import supertest from 'supertest';
import { createApp } from '../../src/app.js';
import { createServices, type Services } from '../../src/container.js';
import { createLogger } from '../../src/logger.js';
import { Checkout } from '../../src/modules/billing/checkout.entity.js';
import { LocalPaymentProvider } from '../../src/modules/billing/local-payment-provider.js';
import { PaymentEvent } from '../../src/modules/billing/payment-event.entity.js';
import { reconcilePayments } from '../../src/modules/billing/payments.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import {
  balanceOf,
  createStripeContext,
  deliver,
  sessionFor,
  STRIPE_KEY,
  WEBHOOK_SECRET,
  type StripeTestContext,
} from '../helpers/payments.js';
import { queuedJobs } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'week',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 299,
    maximumDurationSeconds: 7 * 86400,
  },
];

/** The service as production wires it, logging into `lines`, on a test context's database and clock. */
function withCapturedLogs(ctx: TestContext): {
  services: Services;
  api: supertest.Agent;
  lines: Record<string, unknown>[];
} {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  const services = createServices({
    config: ctx.config,
    ds: ctx.services.ds,
    clock: ctx.clock,
    logger: createLogger('info', stream),
    providers: ctx.services.providers,
  });
  return { services, api: supertest.agent(createApp(services)), lines };
}

interface CardOrder {
  who: SignedUp;
  orderId: string;
  checkoutId: string;
  amountMinor: number;
  deploymentId: string;
}

async function cardOrder(
  t: { api: supertest.Agent; services: Services },
  offerId: string,
  budgetMinor = 900,
): Promise<CardOrder> {
  const up = await t.api.post('/api/v1/signup').set('Idempotency-Key', randomUUID()).send({});
  assert.equal(up.status, 201, JSON.stringify(up.body));
  const who: SignedUp = {
    token: up.body.data.token,
    accountId: up.body.data.account.user.id,
    keyId: up.body.data.account.key.id,
    auth: { Authorization: `Bearer ${up.body.data.token}` },
  };
  assert.equal(
    (
      await t.api
        .put('/api/v1/me/email')
        .set(who.auth)
        .send({ email: `card+${who.accountId.slice(0, 8)}@example.com` })
    ).status,
    200,
  );
  const res = await t.api
    .post('/api/v1/orders/checkout')
    .set(who.auth)
    .set('Idempotency-Key', randomUUID())
    .send({ offerId, budgetMinor });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const { orderId } = res.body.data;
  const c = await t.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
  const d = await t.services.ds.getRepository(Deployment).findOneByOrFail({ orderId });
  return { who, orderId, checkoutId: c.id, amountMinor: c.amountMinor, deploymentId: d.id };
}

async function cancel(t: { api: supertest.Agent }, o: CardOrder): Promise<void> {
  const res = await t.api.post(`/api/v1/deployments/${o.deploymentId}/terminate`).set(o.who.auth);
  assert.ok(res.status >= 200 && res.status < 300, `${res.status} ${JSON.stringify(res.body)}`);
}

describe('Card payments for orders that can no longer run', () => {
  let ctx: StripeTestContext;
  let t: ReturnType<typeof withCapturedLogs>;
  let offerId: string;
  before(async () => {
    ctx = await createStripeContext({ offers: OFFERS });
    t = withCapturedLogs(ctx);
    offerId = (await ctx.services.ds.getRepository(Offer).findOneByOrFail({ providerOfferKey: 'week' })).id;
  });
  after(() => ctx.close());
  afterEach(() => {
    ctx.stripe.rateLimitedRefunds = 0;
    ctx.stripe.simulatedLatencyMs = 0;
  });

  const checkoutRow = (id: string) => ctx.services.ds.getRepository(Checkout).findOneByOrFail({ id });
  const orderRow = (id: string) => ctx.services.ds.getRepository(Order).findOneByOrFail({ id });
  const refundsOf = (intent: string) => ctx.stripe.refunds.filter((r) => r.payment_intent === intent);
  const pay = (o: CardOrder) => ctx.stripe.completeSession(sessionFor(ctx, o.checkoutId).id);
  const deliverTo = (payload: string) => deliver({ ...ctx, api: t.api }, payload);

  it('refunds a payment for an order cancelled before it was paid, once, logs it at warn, and starts nothing', async () => {
    const o = await cardOrder(t, offerId);
    await cancel(t, o);
    const paid = pay(o);
    const payload = ctx.stripe.eventPayload('checkout.session.completed', paid);
    const res = await deliverTo(payload);
    assert.equal(res.status, 200, JSON.stringify(res.body));

    const refunds = refundsOf(paid.payment_intent!);
    assert.equal(refunds.length, 1);
    assert.equal(refunds[0].amount, o.amountMinor);
    assert.equal(refunds[0].metadata.order_id, o.orderId);
    const refundCalls = ctx.stripe.requests.filter((r) => r.path === '/v1/refunds' && r.method === 'POST');
    assert.ok(refundCalls.length >= 1 && refundCalls.every((r) => r.idempotencyKey === `refund:${o.checkoutId}`));

    const c = await checkoutRow(o.checkoutId);
    assert.equal(c.status, 'PAID');
    assert.equal(c.refundStatus, 'SUCCEEDED');
    assert.equal(c.refundId, refunds[0].id);
    const order = await orderRow(o.orderId);
    assert.equal(order.status, 'TERMINATED', 'the order ends as its owner asked');
    assert.equal(order.reversalStatus, 'SUCCEEDED');
    const d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: o.deploymentId });
    assert.equal(d.status, 'TERMINATED');
    assert.equal(d.startedAt, null);
    assert.deepEqual(await queuedJobs(ctx, o.deploymentId), [], 'no provisioning is queued');
    const rental = await t.api.get(`/api/v1/rentals/${o.orderId}`).set(o.who.auth);
    assert.equal(rental.body.data.status, 'TERMINATED');
    assert.equal(rental.body.data.reversalStatus, 'SUCCEEDED');
    assert.deepEqual(
      await balanceOf(ctx, o.who.accountId),
      { balance: 0, entries: 0 },
      'the card money never touched the balance',
    );
    const events = await ctx.services.ds.getRepository(PaymentEvent).findBy({ checkoutId: o.checkoutId });
    assert.deepEqual(
      events.map((e) => e.outcome),
      ['REFUND_DUE'],
    );

    const warned = t.lines.find(
      (l) => l.level === 'warn' && l.orderId === o.orderId && l.amountMinor === o.amountMinor,
    );
    assert.ok(warned, 'a warn line names the order and the amount');
    const logs = JSON.stringify(t.lines);
    assert.ok(!logs.includes(STRIPE_KEY) && !logs.includes(WEBHOOK_SECRET), 'no secrets in the log');

    // Stripe redelivers: nothing more moves.
    assert.equal((await deliverTo(payload)).status, 200);
    assert.equal(refundsOf(paid.payment_intent!).length, 1);

    const page = await t.api.get(`/checkout/${o.checkoutId}/success`);
    assert.match(page.text, /Payment refunded/);
    assert.doesNotMatch(page.text, /being prepared/);
  });

  it('makes one refund when the payment is delivered many times at once, as different events too', async () => {
    const o = await cardOrder(t, offerId, 1200);
    await cancel(t, o);
    const paid = pay(o);
    const completed = ctx.stripe.eventPayload('checkout.session.completed', paid);
    const succeeded = ctx.stripe.eventPayload('checkout.session.async_payment_succeeded', paid);
    ctx.stripe.simulatedLatencyMs = 30;
    const results = await Promise.all(
      [completed, succeeded, completed, succeeded, completed, completed].map(deliverTo),
    );
    assert.deepEqual(
      results.map((r) => r.status),
      Array(6).fill(200),
      JSON.stringify(results.map((r) => r.body)),
    );
    assert.equal(refundsOf(paid.payment_intent!).length, 1);
    assert.equal((await checkoutRow(o.checkoutId)).refundStatus, 'SUCCEEDED');
    assert.equal((await orderRow(o.orderId)).status, 'TERMINATED');
  });

  it('refunds a payment that lands after the order expired unpaid, and says so on the order', async () => {
    const o = await cardOrder(t, offerId, 600);
    // Our side closes the checkout at its expiry; the customer's payment completes at Stripe regardless.
    ctx.clock.advance(25 * 3600 * 1000);
    try {
      await t.services.payments.sessions.expireIfDue(await checkoutRow(o.checkoutId));
    } finally {
      ctx.clock.set(new Date());
    }
    const paid = pay(o);
    const failed = await orderRow(o.orderId);
    assert.equal(failed.status, 'FAILED');
    assert.equal(failed.failureCode, 'PAYMENT_EXPIRED');

    assert.equal((await deliverTo(ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
    assert.equal(refundsOf(paid.payment_intent!).length, 1);
    assert.equal(refundsOf(paid.payment_intent!)[0].amount, o.amountMinor);
    const order = await orderRow(o.orderId);
    assert.equal(order.status, 'FAILED');
    assert.equal(order.reversalStatus, 'SUCCEEDED');
    assert.match(order.failureReason!, /refunded to the card/);
    assert.deepEqual(await queuedJobs(ctx, o.deploymentId), []);
  });

  it('keeps a refund Stripe turns away owed, and the payments job retries it until it is made, once', async () => {
    const o = await cardOrder(t, offerId, 700);
    await cancel(t, o);
    const paid = pay(o);
    ctx.stripe.rateLimitedRefunds = 1000;
    assert.equal(
      (await deliverTo(ctx.stripe.eventPayload('checkout.session.completed', paid))).status,
      200,
      'the payment is recorded; the refund is our own to finish',
    );
    assert.equal(refundsOf(paid.payment_intent!).length, 0);
    let c = await checkoutRow(o.checkoutId);
    assert.equal(c.refundStatus, 'PENDING');
    assert.equal(c.refundAttempts, 1);
    assert.equal((await orderRow(o.orderId)).reversalStatus, 'PENDING');
    assert.equal((await t.api.get(`/api/v1/rentals/${o.orderId}`).set(o.who.auth)).body.data.reversalStatus, 'PENDING');

    await reconcilePayments({ payments: t.services.payments, logger: t.services.logger });
    assert.equal((await checkoutRow(o.checkoutId)).refundAttempts, 2, 'the job tried again');
    assert.equal(refundsOf(paid.payment_intent!).length, 0);

    ctx.stripe.rateLimitedRefunds = 0;
    await reconcilePayments({ payments: t.services.payments, logger: t.services.logger });
    await reconcilePayments({ payments: t.services.payments, logger: t.services.logger });
    assert.equal(refundsOf(paid.payment_intent!).length, 1);
    c = await checkoutRow(o.checkoutId);
    assert.equal(c.refundStatus, 'SUCCEEDED');
    assert.equal(c.refundId, refundsOf(paid.payment_intent!)[0].id);
    assert.equal((await orderRow(o.orderId)).reversalStatus, 'SUCCEEDED');
  });

  it('converges on the refund Stripe made when its answer was lost and the idempotency key has since expired', async () => {
    const o = await cardOrder(t, offerId, 800);
    await cancel(t, o);
    const paid = pay(o);
    // The first try and the SDK's two retries all reach Stripe, which refunds once; no answer comes back.
    ctx.stripe.dropNextResponses(3, '/v1/refunds');
    assert.equal((await deliverTo(ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
    assert.equal(refundsOf(paid.payment_intent!).length, 1, 'Stripe refunded');
    assert.equal((await checkoutRow(o.checkoutId)).refundStatus, 'PENDING', 'but we could not know');

    // A day later Stripe no longer knows the key: the retry asks anew and is told it is already refunded.
    ctx.stripe.forgetIdempotencyKeys();
    await reconcilePayments({ payments: t.services.payments, logger: t.services.logger });
    const refunds = refundsOf(paid.payment_intent!);
    assert.equal(refunds.length, 1);
    const c = await checkoutRow(o.checkoutId);
    assert.equal(c.refundStatus, 'SUCCEEDED');
    assert.equal(c.refundId, refunds[0].id);
    assert.ok(
      ctx.stripe.requests.some(
        (r) => r.method === 'GET' && r.path === '/v1/refunds' && r.params.payment_intent === paid.payment_intent,
      ),
    );
  });

  it('expires the Stripe session of a cancelled unpaid order, so it can no longer be paid', async () => {
    const o = await cardOrder(t, offerId, 900);
    await cancel(t, o);
    assert.equal((await orderRow(o.orderId)).status, 'AWAITING_PAYMENT');
    await reconcilePayments({ payments: t.services.payments, logger: t.services.logger });
    assert.equal(sessionFor(ctx, o.checkoutId).status, 'expired');
    assert.ok(
      ctx.stripe.requests.some(
        (r) =>
          r.path === `/v1/checkout/sessions/${sessionFor(ctx, o.checkoutId).id}/expire` &&
          r.idempotencyKey === `expire:${o.checkoutId}`,
      ),
    );
    assert.equal((await checkoutRow(o.checkoutId)).status, 'EXPIRED');
    const order = await orderRow(o.orderId);
    assert.equal(order.status, 'TERMINATED');
    assert.equal(order.reversalStatus, null, 'nothing was charged');

    // One order at a time, right after its cancellation; others are left to the job.
    const [a, b] = [await cardOrder(t, offerId, 600), await cardOrder(t, offerId, 600)];
    await cancel(t, a);
    await cancel(t, b);
    assert.equal(await t.services.payments.events.closeCancelled({ orderId: b.orderId }), 1);
    assert.equal((await checkoutRow(b.checkoutId)).status, 'EXPIRED');
    assert.equal((await checkoutRow(a.checkoutId)).status, 'OPEN');
    assert.equal(sessionFor(ctx, a.checkoutId).status, 'open');
  });
});

describe('Development payment page and cancelled card orders', () => {
  let ctx: TestContext;
  let offerId: string;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    offerId = (await ctx.services.ds.getRepository(Offer).findOneByOrFail({ providerOfferKey: 'week' })).id;
  });
  after(() => ctx.close());

  it('refuses payment for a cancelled order, and refunds one whose payment arrives anyway', async () => {
    const o = await cardOrder(ctx, offerId);
    const path = `/pay/${o.checkoutId}`;
    assert.equal((await ctx.api.get(path)).status, 200);
    await cancel(ctx, o);
    const page = await ctx.api.get(path);
    assert.equal(page.status, 410);
    assert.match(page.text, /cancelled/);
    assert.equal((await ctx.api.post(path)).status, 410);
    assert.equal(
      (await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ id: o.checkoutId })).status,
      'OPEN',
      'nothing was paid',
    );

    // The payment raced the cancellation past the page's check: it is refunded, not kept.
    const provider = ctx.services.payments.provider as LocalPaymentProvider;
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ id: o.checkoutId });
    const payload = provider.paidEvent(c);
    const res = await ctx.api
      .post('/api/v1/webhooks/stripe')
      .set('Content-Type', 'application/json')
      .set('Stripe-Signature', provider.sign(payload))
      .send(payload);
    assert.equal(res.status, 200);
    const after = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ id: o.checkoutId });
    assert.equal(after.refundStatus, 'SUCCEEDED');
    assert.match(after.refundId!, /^re_local_/);
    assert.equal((await ctx.services.ds.getRepository(Order).findOneByOrFail({ id: o.orderId })).status, 'TERMINATED');
    assert.deepEqual(await queuedJobs(ctx, o.deploymentId), []);
  });
});
