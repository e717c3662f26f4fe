import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { FakeStripeServer } from '../fakes/stripe-server.js';
import { createTestContext, type ContextOptions, type TestContext } from './context.js';
import type { SignedUp } from './factories.js';

export const STRIPE_KEY = 'sk_test_51FakeKeyForTheLocalStripeServer';
export const WEBHOOK_SECRET = 'whsec_test_local_fake_webhook_signing_secret';

export interface StripeTestContext extends TestContext {
  stripe: FakeStripeServer;
}

/** A test context whose payments go through the real Stripe SDK to a local fake Stripe. */
export async function createStripeContext(opts: ContextOptions = {}): Promise<StripeTestContext> {
  const stripe = await FakeStripeServer.start({ secretKey: STRIPE_KEY });
  let ctx: TestContext;
  try {
    ctx = await createTestContext({
      ...opts,
      env: {
        STRIPE_SECRET_KEY: STRIPE_KEY,
        STRIPE_API_URL: stripe.url,
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        ...opts.env,
      },
    });
  } catch (err) {
    await stripe.close();
    throw err;
  }
  const closeContext = ctx.close.bind(ctx);
  return Object.assign(ctx, {
    stripe,
    async close() {
      await closeContext();
      await stripe.close();
    },
  });
}

/** Signs a payload as Stripe does, by default with the configured secret at the context's clock. */
export function signature(
  ctx: TestContext,
  payload: string,
  opts: { secret?: string; timestamp?: number } = {},
): string {
  return Stripe.webhooks.generateTestHeaderString({
    payload,
    secret: opts.secret ?? ctx.config.stripe.webhookSecret,
    timestamp: opts.timestamp ?? Math.floor(ctx.clock.now().getTime() / 1000),
  });
}

/** Delivers a webhook body with the given Stripe-Signature header (signed correctly by default). */
export function deliver(ctx: TestContext, payload: string, sig: string | null = signature(ctx, payload)) {
  const req = ctx.api.post('/api/v1/webhooks/stripe').set('Content-Type', 'application/json; charset=utf-8');
  if (sig !== null) req.set('Stripe-Signature', sig);
  return req.send(payload);
}

export async function createTopup(ctx: TestContext, who: SignedUp, amountMinor: number, key = randomUUID()) {
  const res = await ctx.api
    .post('/api/v1/billing/topups')
    .set(who.auth)
    .set('Idempotency-Key', key)
    .send({ amountMinor });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return {
    key,
    topup: res.body.data as {
      topupId: string;
      paymentUrl: string;
      expiresAt: string;
      status: string;
      amountMinor: number;
    },
  };
}

/** The fake's session for a top-up or card checkout id. */
export function sessionFor(ctx: StripeTestContext, checkoutId: string) {
  const s = ctx.stripe.createdSessions.find((x) => x.client_reference_id === checkoutId);
  assert.ok(s, `no fake Stripe session for ${checkoutId}`);
  return s;
}

export async function balanceOf(ctx: TestContext, accountId: string): Promise<{ balance: number; entries: number }> {
  const [row] = await ctx.services.ds.query(
    `SELECT a.balance_minor AS balance, (SELECT COUNT(*) FROM ledger_entries e WHERE e.account_id = a.id) AS entries FROM accounts a WHERE a.id = ?`,
    [accountId],
  );
  return { balance: Number(row.balance), entries: Number(row.entries) };
}
