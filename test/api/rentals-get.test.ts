import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, addKey, offerIds, rentOk, setStatus } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
  },
];

describe('GET /api/v1/rentals/{id}', () => {
  let ctx: TestContext;
  let offerId: string;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    offerId = (await offerIds(ctx)).h100;
  });
  after(() => ctx.close());

  const get = (auth: { Authorization: string }, id: string) => ctx.api.get(`/api/v1/rentals/${id}`).set(auth);

  it('returns the rental as created, with its deployment and quote', async () => {
    const who = await account(ctx, { creditsMinor: 1000 });
    const created = await rentOk(ctx, who, { offerId });
    const res = await get(who.auth, created.rentalId);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.data, created);
    assert.equal(res.body.meta.apiVersion, 'v1');
    // The deployment id names the same rental, as terminate and reveal take either.
    const byDeployment = await get(who.auth, created.deploymentId.toUpperCase());
    assert.equal(byDeployment.status, 200);
    assert.deepEqual(byDeployment.body.data, created);
  });

  it('shows agent keys only their own rentals; owner keys see every rental of the account; other accounts get 404', async () => {
    const agent = await account(ctx, { creditsMinor: 5000 });
    const sibling = await addKey(ctx, agent.accountId);
    const owner = await addKey(ctx, agent.accountId, { kind: 'OWNER', scopes: ['read'] });
    const stranger = await account(ctx, { creditsMinor: 5000 });
    const r = await rentOk(ctx, agent, { offerId });

    assert.equal((await get(agent.auth, r.rentalId)).status, 200);
    assert.equal((await get(owner.auth, r.rentalId)).status, 200);
    for (const who of [sibling, stranger]) {
      for (const id of [r.rentalId, r.deploymentId]) {
        const res = await get(who.auth, id);
        assert.equal(res.status, 404);
        assert.equal(res.body.error.code, 'NOT_FOUND');
      }
    }
    assert.equal((await get(agent.auth, randomUUID())).status, 404);
    assert.equal((await get(agent.auth, 'not-a-uuid')).status, 404);
  });

  it('needs the read scope', async () => {
    const who = await account(ctx, { creditsMinor: 1000 });
    const r = await rentOk(ctx, who, { offerId });
    const writer = await addKey(ctx, who.accountId, { kind: 'OWNER', scopes: ['rent'] });
    const res = await get(writer.auth, r.rentalId);
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'FORBIDDEN');
  });

  it('exposes the failure reason, code and reversal status of a FAILED rental by name', async () => {
    const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 1000 });
    const r = await rentOk(ctx, who, { offerId, budgetMinor: 600 });
    await setStatus(ctx, r.deploymentId, 'FAILED');
    await ctx.services.ds.getRepository(Order).update(
      { id: r.rentalId },
      {
        failureCode: 'OFFER_NOT_FOUND',
        failureReason: 'The offer is no longer available from its provider.',
        reversalStatus: 'PENDING',
      },
    );
    let res = await get(who.auth, r.rentalId);
    assert.equal(res.body.data.status, 'FAILED');
    assert.equal(res.body.data.failureCode, 'OFFER_NOT_FOUND');
    assert.equal(res.body.data.failureReason, 'The offer is no longer available from its provider.');
    assert.equal(res.body.data.reversalStatus, 'PENDING');
    await ctx.services.ds.getRepository(Order).update({ id: r.rentalId }, { reversalStatus: 'SUCCEEDED' });
    res = await get(who.auth, r.rentalId);
    assert.equal(res.body.data.reversalStatus, 'SUCCEEDED');
    // A legacy rental keeps its purchased runtime in the quote after failing.
    assert.deepEqual(res.body.data.quote, {
      hourlyPriceMinor: 300,
      durationSeconds: 7200,
      totalMinor: 600,
      currency: 'USD',
      charging: 'PREPAID',
      note: 'Prepaid: 600 cents ($6.00) were debited at admission for 7200 s at 300 cents per hour ($3.00).',
    });
  });

  it('shows endedAt only once TERMINATED, for credit-funded rentals', async () => {
    const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 1000 });
    const r = await rentOk(ctx, who, { offerId, budgetMinor: 600 });
    const ended = new Date('2026-01-02T03:04:05.678Z');
    const endsAt = new Date('2026-01-02T05:00:00.000Z');
    await setStatus(ctx, r.deploymentId, 'TERMINATING', {
      endedAt: ended,
      endsAt,
      startedAt: new Date('2026-01-02T03:00:00.000Z'),
    });
    let res = await get(who.auth, r.rentalId);
    assert.equal(res.body.data.endedAt, null, 'not before TERMINATED');
    assert.equal(res.body.data.deployment.endsAt, endsAt.toISOString());
    await setStatus(ctx, r.deploymentId, 'TERMINATED');
    res = await get(who.auth, r.rentalId);
    assert.equal(res.body.data.status, 'TERMINATED');
    assert.equal(res.body.data.endedAt, ended.toISOString());
    assert.equal(res.body.data.deployment.endedAt, ended.toISOString());

    // The same deployment bought by card never shows endedAt (docs/api.md, Rentals).
    await ctx.services.ds.getRepository(Order).update({ id: r.rentalId }, { funding: 'CARD' });
    res = await get(who.auth, r.rentalId);
    assert.equal(res.body.data.endedAt, null);
    assert.equal(res.body.data.deployment.endedAt, null);
  });

  it('keeps ACCOUNT_BALANCE purchase fields null even if a row carries values, and shows an end (a lease) as stored', async () => {
    const who = await account(ctx, { creditsMinor: 1000 });
    const r = await rentOk(ctx, who, { offerId });
    const endsAt = new Date(Math.floor(Date.now() / 1000) * 1000);
    await ctx.services.ds
      .getRepository(Deployment)
      .update({ id: r.deploymentId }, { endsAt, hoursPurchased: 3, durationSeconds: 10800 });
    const res = await get(who.auth, r.rentalId);
    const d = res.body.data.deployment;
    assert.deepEqual([d.hoursPurchased, d.durationSeconds, res.body.data.quote.durationSeconds], [null, null, null]);
    assert.equal(d.endsAt, endsAt.toISOString());
    assert.equal(res.body.data.endsAt, endsAt.toISOString());
    assert.equal(res.body.data.quote.totalMinor, 0);
  });
});
