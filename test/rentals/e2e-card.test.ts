import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Checkout } from '../../src/modules/billing/checkout.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { signup } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { createStripeContext, deliver, sessionFor, type StripeTestContext } from '../helpers/payments.js';
import { waitFor } from '../helpers/wait.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { lifecycleDepsOf } from '../../src/container.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'card-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 299,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
  // Boots for an hour: a rental of it stays PROVISIONING while the test ends it.
  {
    key: 'card-slow',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 301,
    maximumDurationSeconds: 86400,
    provisionSeconds: 3600,
  },
];

/** Full wiring with the real hand-off from createServices: a paid card order provisions like any rental. */
describe('rentals end to end: card checkout paid via webhook', function () {
  this.timeout(60_000);
  let ctx: StripeTestContext;
  let worker: TestWorker;

  before(async () => {
    ctx = await createStripeContext({ offers: OFFERS, env: { RENTAL_POLL_MS: '50' } });
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
  });
  after(async () => {
    await worker.stop();
    await ctx.close();
  });

  it('reaches ACTIVE after the webhook, with one instance, even when the webhook is redelivered', async () => {
    const who = await signup(ctx);
    assert.equal(
      (
        await ctx.api
          .put('/api/v1/me/email')
          .set(who.auth)
          .send({ email: `card+${who.accountId.slice(0, 8)}@example.com` })
      ).status,
      200,
    );
    const offer = await ctx.services.ds.getRepository(Offer).findOneByOrFail({ providerOfferKey: 'card-h100' });
    const res = await ctx.api
      .post('/api/v1/orders/checkout')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: offer.id, budgetMinor: 897 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { orderId } = res.body.data;
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
    const payload = ctx.stripe.eventPayload(
      'checkout.session.completed',
      ctx.stripe.completeSession(sessionFor(ctx, c.id).id),
    );
    assert.equal((await deliver(ctx, payload)).status, 200);
    assert.equal((await deliver(ctx, payload)).status, 200);

    const d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ orderId });
    await waitFor(
      async () => {
        ctx.clock.advance(200);
        const fresh = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: d.id });
        return fresh.status === 'ACTIVE' || fresh.status === 'FAILED';
      },
      { what: 'card deployment ACTIVE' },
    );
    const fresh = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: d.id });
    assert.equal(fresh.status, 'ACTIVE');
    assert.ok(fresh.startedAt && fresh.instanceId);
    const [row] = await ctx.services.ds.query(`SELECT COUNT(*) AS n FROM deployment_attempts WHERE deployment_id = ?`, [
      d.id,
    ]);
    assert.equal(Number(row.n), 1);

    assert.equal((await ctx.api.post(`/api/v1/deployments/${d.id}/terminate`).set(who.auth)).status, 202);
    await waitFor(
      async () =>
        (await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: d.id })).status === 'TERMINATED',
      { what: 'card deployment TERMINATED' },
    );
    const view = await ctx.api.get(`/api/v1/deployments/${d.id}`).set(who.auth);
    assert.equal(view.body.data.status, 'TERMINATED');
    // Card-funded legacy rentals show no endedAt.
    assert.equal(view.body.data.endedAt ?? null, null);
    assert.equal(
      ctx.stripe.refunds.filter(
        (r) => r.payment_intent === ctx.stripe.sessions.get(sessionFor(ctx, c.id).id)?.payment_intent,
      ).length,
      0,
      'a machine that ran is not refunded',
    );
  });

  it('refunds the payment of a card order ended before its machine ever ran, once', async () => {
    const who = await signup(ctx);
    assert.equal(
      (
        await ctx.api
          .put('/api/v1/me/email')
          .set(who.auth)
          .send({ email: `slow+${who.accountId.slice(0, 8)}@example.com` })
      ).status,
      200,
    );
    const offer = await ctx.services.ds.getRepository(Offer).findOneByOrFail({ providerOfferKey: 'card-slow' });
    const res = await ctx.api
      .post('/api/v1/orders/checkout')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: offer.id, budgetMinor: 903 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { orderId } = res.body.data;
    const c = await ctx.services.ds.getRepository(Checkout).findOneByOrFail({ orderId });
    const session = ctx.stripe.completeSession(sessionFor(ctx, c.id).id);
    assert.equal((await deliver(ctx, ctx.stripe.eventPayload('checkout.session.completed', session))).status, 200);
    const d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ orderId });
    await waitFor(
      async () =>
        (await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: d.id })).status === 'PROVISIONING',
      { what: 'card deployment PROVISIONING' },
    );
    assert.equal((await ctx.api.post(`/api/v1/deployments/${d.id}/terminate`).set(who.auth)).status, 202);
    await waitFor(
      async () =>
        (await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: d.id })).status === 'TERMINATED',
      { what: 'card deployment TERMINATED' },
    );
    const fresh = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: d.id });
    assert.equal(fresh.startedAt, null, 'it never ran');
    // TERMINATED commits first; the refund is made right after it, by the same job run.
    let view = await ctx.api.get(`/api/v1/rentals/${orderId}`).set(who.auth);
    await waitFor(
      async () => {
        view = await ctx.api.get(`/api/v1/rentals/${orderId}`).set(who.auth);
        return view.body.data.reversalStatus === 'SUCCEEDED';
      },
      { what: 'the refund of the never-started card order' },
    );
    assert.equal(view.body.data.status, 'TERMINATED');
    const refunds = ctx.stripe.refunds.filter((r) => r.payment_intent === session.payment_intent);
    assert.equal(refunds.length, 1);
    assert.equal(refunds[0].amount, 903);
    // The termination job run again (a retry after a lost acknowledgement) refunds nothing more.
    await createRentalLifecycle(lifecycleDepsOf(ctx.services)).terminate(d.id);
    assert.equal(ctx.stripe.refunds.filter((r) => r.payment_intent === session.payment_intent).length, 1);
  });
});
