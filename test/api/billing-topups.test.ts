import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { Checkout } from '../../src/modules/billing/checkout.entity.js';
import { createTestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';
import {
  balanceOf,
  createStripeContext,
  createTopup,
  deliver,
  sessionFor,
  STRIPE_KEY,
  type StripeTestContext,
} from '../helpers/payments.js';

describe('POST /api/v1/billing/topups (Stripe)', () => {
  let ctx: StripeTestContext;
  before(async () => {
    ctx = await createStripeContext();
  });
  after(() => ctx.close());
  afterEach(() => {
    ctx.stripe.simulatedLatencyMs = 0;
  });

  const post = (auth: Record<string, string>, key: string | undefined, body: unknown) => {
    const req = ctx.api.post('/api/v1/billing/topups').set(auth);
    if (key !== undefined) req.set('Idempotency-Key', key);
    return req.send(body as object);
  };

  it('creates a Stripe Checkout Session for the exact amount and answers 201 with the hosted link', async () => {
    const a = await signup(ctx);
    const before = ctx.stripe.requests.length;
    const res = await post(a.auth, randomUUID(), { amountMinor: 2500 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const t = res.body.data;
    assert.match(t.topupId, /^[0-9a-f-]{36}$/);
    assert.equal(t.status, 'OPEN');
    assert.equal(t.amountMinor, 2500);
    assert.equal(t.currency, 'USD');
    assert.equal(t.paidAt, null);

    const calls = ctx.stripe.requests.slice(before);
    assert.equal(calls.length, 1);
    const call = calls[0];
    assert.equal(call.method, 'POST');
    assert.equal(call.path, '/v1/checkout/sessions');
    assert.equal(call.authorization, `Bearer ${STRIPE_KEY}`);
    assert.equal(call.idempotencyKey, `checkout-session:${t.topupId}`);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Stripe's form-encoded body, read as loose JSON
    const p = call.params as any;
    assert.equal(p.mode, 'payment');
    assert.equal(p.line_items[0].quantity, '1');
    assert.equal(p.line_items[0].price_data.currency, 'usd');
    assert.equal(p.line_items[0].price_data.unit_amount, '2500');
    assert.equal(p.line_items[0].price_data.product_data.name, 'Compute credits');
    assert.equal(p.client_reference_id, t.topupId);
    assert.equal(p.metadata.checkout_id, t.topupId);
    assert.equal(p.metadata.purpose, 'TOPUP');
    assert.equal(p.metadata.account_id, a.accountId);
    assert.equal(p.success_url, `http://gpu.test/checkout/${t.topupId}/success`);
    assert.equal(p.cancel_url, `http://gpu.test/checkout/${t.topupId}/cancel`);

    const session = sessionFor(ctx, t.topupId);
    assert.equal(t.paymentUrl, session.url);
    assert.equal(new Date(t.expiresAt).getTime(), session.expires_at * 1000);
    assert.equal(session.amount_total, 2500);
    assert.deepEqual(await balanceOf(ctx, a.accountId), { balance: 0, entries: 0 }, 'a link is not a payment');
  });

  it('replays the same key and body with 200 and the same link, without a second session', async () => {
    const a = await signup(ctx);
    const { key, topup } = await createTopup(ctx, a, 1000);
    const sessions = ctx.stripe.createdSessions.length;
    const again = await post(a.auth, key, { amountMinor: 1000 });
    assert.equal(again.status, 200);
    assert.equal(again.body.data.topupId, topup.topupId);
    assert.equal(again.body.data.paymentUrl, topup.paymentUrl);
    assert.equal(again.body.data.expiresAt, topup.expiresAt);
    assert.equal(ctx.stripe.createdSessions.length, sessions);
  });

  it('answers a changed body under the same key with 409 IDEMPOTENCY_CONFLICT', async () => {
    const a = await signup(ctx);
    const { key } = await createTopup(ctx, a, 1000);
    const res = await post(a.auth, key, { amountMinor: 1001 });
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'IDEMPOTENCY_CONFLICT');
  });

  it('scopes keys to the account: another account may use the same key', async () => {
    const a = await signup(ctx);
    const b = await signup(ctx);
    const key = `shared-${randomUUID()}`;
    const ra = await post(a.auth, key, { amountMinor: 800 });
    const rb = await post(b.auth, key, { amountMinor: 900 });
    assert.equal(ra.status, 201);
    assert.equal(rb.status, 201);
    assert.notEqual(ra.body.data.topupId, rb.body.data.topupId);
  });

  it('requires an Idempotency-Key of 1 to 128 characters without control characters (400 INVALID_REQUEST)', async () => {
    const a = await signup(ctx);
    for (const key of [undefined, '', 'x'.repeat(129), 'has\ttab']) {
      const res = await post(a.auth, key, { amountMinor: 1000 });
      assert.equal(res.status, 400, `key ${JSON.stringify(key)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'INVALID_REQUEST');
    }
    assert.equal((await post(a.auth, 'k'.repeat(128), { amountMinor: 1000 })).status, 201);
    assert.equal((await post(a.auth, 'k', { amountMinor: 1000 })).status, 201);
    assert.equal((await post(a.auth, 'order 42 / attempt 1', { amountMinor: 1000 })).status, 201);
  });

  it('accepts 500 to 50000 cents and rejects anything else with 422 naming amountMinor', async () => {
    const a = await signup(ctx);
    for (const amountMinor of [500, 50000]) {
      assert.equal((await post(a.auth, randomUUID(), { amountMinor })).status, 201, String(amountMinor));
    }
    for (const body of [
      { amountMinor: 499 },
      { amountMinor: 50001 },
      { amountMinor: 1000.5 },
      { amountMinor: null },
      {},
      { amountMinor: 1000, currency: 'EUR' },
    ]) {
      const res = await post(a.auth, randomUUID(), body);
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.match(res.body.error.message, /amountMinor|currency/);
    }
  });

  it('needs the billing scope (403) and a valid key (401)', async () => {
    const a = await signup(ctx);
    const { token } = await ctx.services.store.transaction((r) =>
      ctx.services.keys.create(r.accounts, {
        accountId: a.accountId,
        kind: 'AGENT',
        name: 'no billing',
        scopes: ['read', 'rent', 'manage'],
        origin: 'test',
        maxPerRentalMinor: 500,
        budgetLimitMinor: 500,
        maxConcurrentDeployments: 1,
      }),
    );
    const res = await post({ Authorization: `Bearer ${token}` }, randomUUID(), { amountMinor: 1000 });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'FORBIDDEN');
    const anon = await ctx.api
      .post('/api/v1/billing/topups')
      .set('Idempotency-Key', randomUUID())
      .send({ amountMinor: 1000 });
    assert.equal(anon.status, 401);
  });

  it('answers 410 TOPUP_EXPIRED for a key whose payment session expired unpaid', async () => {
    const a = await signup(ctx);
    const { key, topup } = await createTopup(ctx, a, 1200);
    ctx.clock.advance(new Date(topup.expiresAt).getTime() - ctx.clock.now().getTime() + 1000);
    try {
      const res = await post(a.auth, key, { amountMinor: 1200 });
      assert.equal(res.status, 410);
      assert.equal(res.body.error.code, 'TOPUP_EXPIRED');
      const got = await ctx.api.get(`/api/v1/billing/topups/${topup.topupId}`).set(a.auth);
      assert.equal(got.body.data.status, 'EXPIRED');
    } finally {
      ctx.clock.set(new Date());
    }
    // A new key gets a new link.
    assert.equal((await post(a.auth, randomUUID(), { amountMinor: 1200 })).status, 201);
  });

  it('answers 410 once Stripe reported the session expired', async () => {
    const a = await signup(ctx);
    const { key, topup } = await createTopup(ctx, a, 1300);
    const expired = ctx.stripe.expireSession(sessionFor(ctx, topup.topupId).id);
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.expired', expired))).status, 200);
    const res = await post(a.auth, key, { amountMinor: 1300 });
    assert.equal(res.status, 410);
    assert.equal(res.body.error.code, 'TOPUP_EXPIRED');
  });

  it('replays a paid top-up with 200 and status PAID', async () => {
    const a = await signup(ctx);
    const { key, topup } = await createTopup(ctx, a, 1400);
    const paid = ctx.stripe.completeSession(sessionFor(ctx, topup.topupId).id);
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', paid))).status, 200);
    const res = await post(a.auth, key, { amountMinor: 1400 });
    assert.equal(res.status, 200);
    assert.equal(res.body.data.status, 'PAID');
    assert.ok(res.body.data.paidAt);
    assert.equal((await balanceOf(ctx, a.accountId)).balance, 1400);
  });

  it('turns concurrent requests with one key into one top-up and one Stripe session', async () => {
    const a = await signup(ctx);
    const key = randomUUID();
    ctx.stripe.simulatedLatencyMs = 150;
    const sessionsBefore = ctx.stripe.createdSessions.length;
    const results = await Promise.all(Array.from({ length: 8 }, () => post(a.auth, key, { amountMinor: 2000 })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 201], JSON.stringify(results.map((r) => r.body)));
    assert.equal(new Set(results.map((r) => r.body.data.topupId)).size, 1);
    assert.equal(new Set(results.map((r) => r.body.data.paymentUrl)).size, 1);
    assert.equal(ctx.stripe.createdSessions.length, sessionsBefore + 1);
    const rows = await ctx.services.ds.getRepository(Checkout).countBy({ accountId: a.accountId });
    assert.equal(rows, 1);
  });

  it('converges after a failure between creating the Stripe session and storing it', async () => {
    const a = await signup(ctx);
    const key = randomUUID();
    const sessionsBefore = ctx.stripe.createdSessions.length;
    // Stripe creates the session but every answer is lost (the SDK's own retries included).
    ctx.stripe.dropNextResponses(3);
    const failed = await post(a.auth, key, { amountMinor: 3000 });
    assert.equal(failed.status, 503, JSON.stringify(failed.body));
    assert.equal(failed.body.error.code, 'UNAVAILABLE');
    assert.equal(ctx.stripe.createdSessions.length, sessionsBefore + 1);
    const [row] = await ctx.services.ds.getRepository(Checkout).findBy({ accountId: a.accountId });
    assert.equal(row.status, 'CREATING');
    assert.equal(row.sessionId, null);

    const retry = await post(a.auth, key, { amountMinor: 3000 });
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    assert.equal(retry.body.data.topupId, row.id);
    assert.equal(retry.body.data.paymentUrl, sessionFor(ctx, row.id).url);
    assert.equal(
      ctx.stripe.createdSessions.length,
      sessionsBefore + 1,
      'the retry reused the session Stripe already made',
    );
    const keys = new Set(
      ctx.stripe.requests
        .filter((r) => r.path === '/v1/checkout/sessions')
        .filter((r) => r.params.client_reference_id === row.id)
        .map((r) => r.idempotencyKey),
    );
    assert.deepEqual([...keys], [`checkout-session:${row.id}`]);
  });

  it('shows a top-up to its own account only', async () => {
    const a = await signup(ctx);
    const b = await signup(ctx);
    const { topup } = await createTopup(ctx, a, 1000);
    const mine = await ctx.api.get(`/api/v1/billing/topups/${topup.topupId}`).set(a.auth);
    assert.equal(mine.status, 200);
    assert.equal(mine.body.data.paymentUrl, topup.paymentUrl);
    const theirs = await ctx.api.get(`/api/v1/billing/topups/${topup.topupId}`).set(b.auth);
    assert.equal(theirs.status, 404);
  });
});

describe('POST /api/v1/billing/topups without a usable payment provider', () => {
  it('refuses with 503 in production when no Stripe key is configured, and writes nothing', async () => {
    const ctx = await createTestContext({
      env: {
        NODE_ENV: 'production',
        SECRETS_KEY: randomBytes(32).toString('base64'),
        LOCAL_PROVIDER_ALLOW_PRODUCTION: 'true',
      },
    });
    try {
      const a = await signup(ctx);
      const res = await ctx.api
        .post('/api/v1/billing/topups')
        .set(a.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ amountMinor: 1000 });
      assert.equal(res.status, 503);
      assert.equal(res.body.error.code, 'UNAVAILABLE');
      assert.equal(await ctx.services.ds.getRepository(Checkout).countBy({ accountId: a.accountId }), 0);
      assert.equal((await ctx.api.get(`/pay/${randomUUID()}`)).status, 404);
      // Without its own webhook secret production verifies nothing: Stripe is told to come back later.
      const hook = await ctx.api
        .post('/api/v1/webhooks/stripe')
        .set('Stripe-Signature', 't=1,v1=00')
        .set('Content-Type', 'application/json')
        .send('{}');
      assert.equal(hook.status, 503);
      assert.equal(hook.body.error.code, 'UNAVAILABLE');
    } finally {
      await ctx.close();
    }
  });

  it('will not start with a Stripe key but no webhook secret (the development one is public)', async () => {
    await assert.rejects(createStripeContext({ env: { STRIPE_WEBHOOK_SECRET: '' } }), (err: Error) =>
      /^STRIPE_WEBHOOK_SECRET is required when STRIPE_SECRET_KEY is set/.test(err.message),
    );
  });
});
