import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Checkout } from '../../src/modules/billing/checkout.entity.js';
import { LocalPaymentProvider } from '../../src/modules/billing/local-payment-provider.js';
import { PaymentEvent } from '../../src/modules/billing/payment-event.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';
import {
  balanceOf,
  createStripeContext,
  createTopup,
  deliver,
  sessionFor,
  type StripeTestContext,
} from '../helpers/payments.js';

const pathOf = (url: string) => new URL(url).pathname;

describe('Development checkout (no Stripe key)', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('hands out a link to the service’s own payment page, clearly marked as development', async () => {
    assert.ok(ctx.services.payments.provider instanceof LocalPaymentProvider);
    const who = await signup(ctx);
    const { topup } = await createTopup(ctx, who, 1234);
    assert.equal(topup.paymentUrl, `http://gpu.test/pay/${topup.topupId}`);
    const page = await ctx.api.get(pathOf(topup.paymentUrl));
    assert.equal(page.status, 200);
    assert.match(page.headers['content-type'], /text\/html/);
    assert.match(page.headers['content-security-policy'], /default-src 'none'/);
    assert.equal(page.headers['cache-control'], 'no-store');
    assert.match(page.text, /<html lang="en">/);
    assert.match(page.text, /Development payment page/);
    assert.match(page.text, /\$12\.34/);
    assert.match(page.text, /Compute credits/);
    assert.match(page.text, new RegExp(`<form method="post" action="/pay/${topup.topupId}">`));
    assert.doesNotMatch(page.text, /<script|https?:\/\/(?!gpu\.test)/, 'no scripts, no external assets');
  });

  it('credits the balance through the signed webhook when the human pays, once', async () => {
    const who = await signup(ctx);
    const { topup } = await createTopup(ctx, who, 2000);
    const pay = await ctx.api.post(pathOf(topup.paymentUrl));
    assert.equal(pay.status, 303, pay.text);
    assert.equal(pay.headers.location, `/checkout/${topup.topupId}/success`);
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 2000, entries: 1 });
    const [event] = await ctx.services.ds.getRepository(PaymentEvent).findBy({ checkoutId: topup.topupId });
    assert.match(event.eventId, /^evt_local_/);
    assert.equal(event.outcome, 'CREDITED');

    const success = await ctx.api.get(pay.headers.location);
    assert.equal(success.status, 200);
    assert.match(success.text, /Payment received/);
    assert.match(success.text, /\$20\.00 of compute credits were added/);

    // Paying again, or going back to the page, moves nothing.
    assert.equal((await ctx.api.post(pathOf(topup.paymentUrl))).status, 303);
    assert.match((await ctx.api.get(pathOf(topup.paymentUrl))).text, /Already paid/);
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 2000, entries: 1 });
    const topupNow = await ctx.api.get(`/api/v1/billing/topups/${topup.topupId}`).set(who.auth);
    assert.equal(topupNow.body.data.status, 'PAID');
  });

  it('says in plain words that a cancelled payment charged nothing, and links back while the link is valid', async () => {
    const who = await signup(ctx);
    const { topup } = await createTopup(ctx, who, 900);
    const page = await ctx.api.get(`/checkout/${topup.topupId}/cancel`);
    assert.equal(page.status, 200);
    assert.match(page.text, /Payment cancelled/);
    assert.match(page.text, /Nothing was charged/);
    assert.match(page.text, new RegExp(`href="${topup.paymentUrl}"`));
    const pending = await ctx.api.get(`/checkout/${topup.topupId}/success`);
    assert.match(pending.text, /waiting for the card processor/);
    assert.match(pending.text, /http-equiv="refresh"/);
  });

  it('refuses to take payment on an expired link', async () => {
    const who = await signup(ctx);
    const { topup } = await createTopup(ctx, who, 800);
    ctx.clock.advance(25 * 3600 * 1000);
    try {
      const page = await ctx.api.get(pathOf(topup.paymentUrl));
      assert.equal(page.status, 410);
      assert.match(page.text, /expired/);
      assert.equal((await ctx.api.post(pathOf(topup.paymentUrl))).status, 410);
    } finally {
      ctx.clock.set(new Date());
    }
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
  });

  it('answers unknown or malformed payment ids with a plain 404 page', async () => {
    for (const path of [
      `/pay/${randomUUID()}`,
      '/pay/not-an-id',
      `/checkout/${randomUUID()}/success`,
      `/checkout/${randomUUID()}/cancel`,
    ]) {
      const res = await ctx.api.get(path);
      assert.equal(res.status, 404, path);
      assert.match(res.text, /could not find this payment/);
    }
    assert.equal((await ctx.api.post(`/pay/${randomUUID()}`)).status, 404);
  });

  it('rejects a webhook signed with anything but this process’s webhook secret', async () => {
    const who = await signup(ctx);
    const { topup } = await createTopup(ctx, who, 700);
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ id: topup.topupId });
    const forger = new LocalPaymentProvider({
      publicBaseUrl: 'http://gpu.test',
      webhookSecret: 'whsec_guess',
      clock: ctx.clock,
    });
    const payload = forger.paidEvent(c);
    const res = await deliver(ctx, payload, forger.sign(payload));
    assert.equal(res.status, 400);
    assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 0 });
  });
});

describe('Return pages after a Stripe checkout', () => {
  let ctx: StripeTestContext;
  before(async () => {
    ctx = await createStripeContext();
  });
  after(() => ctx.close());

  it('explain what happened, and the development page does not exist', async () => {
    const who = await signup(ctx);
    const { topup } = await createTopup(ctx, who, 1500);
    assert.match(topup.paymentUrl, /^https:\/\/checkout\.stripe\.com\//);
    assert.equal((await ctx.api.get(`/pay/${topup.topupId}`)).status, 404);
    assert.equal((await ctx.api.post(`/pay/${topup.topupId}`)).status, 404);
    assert.match((await ctx.api.get(`/checkout/${topup.topupId}/success`)).text, /Confirming your payment/);
    const paid = ctx.stripe.completeSession(sessionFor(ctx, topup.topupId).id);
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
    const success = await ctx.api.get(`/checkout/${topup.topupId}/success`);
    assert.match(success.text, /Payment received/);
    assert.match(
      (await ctx.api.get(`/checkout/${topup.topupId}/cancel`)).text,
      /already completed, so nothing was cancelled/,
    );
  });
});
