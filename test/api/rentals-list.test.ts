import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { account, addKey, discardQueuedRentalJobs, offerIds, rentOk } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'l-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 200,
    maximumDurationSeconds: 86400,
  },
  {
    key: 'l-a100x2',
    name: 'NVIDIA A100 80GB',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 2,
    pricePerHourMinor: 150,
    maximumDurationSeconds: 86400,
  },
];

describe('GET /api/v1/rentals and what rentals show', () => {
  let ctx: TestContext;
  let offer: Record<string, string>;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    offer = await offerIds(ctx);
  });
  after(async () => {
    await discardQueuedRentalJobs(ctx);
    await ctx.close();
  });

  const list = (who: SignedUp, query = '') => ctx.api.get(`/api/v1/rentals${query}`).set(who.auth);

  it('shows gpuName, gpuCount, provider and terminationReason on rentals and deployments', async () => {
    const who = await account(ctx, { creditsMinor: 10_000 });
    const r = await rentOk(ctx, who, { gpuModel: 'A100 80GB', gpuCount: 2, maxHourlyPriceMinor: 1000 });
    const got = (await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(who.auth)).body.data;
    assert.deepEqual(
      [got.gpuName, got.gpuCount, got.provider, got.terminationReason],
      ['A100 SXM4 80GB', 2, 'local', null],
    );
    assert.deepEqual(
      [got.deployment.gpuName, got.deployment.gpuCount, got.deployment.provider, got.deployment.terminationReason],
      ['A100 SXM4 80GB', 2, 'local', null],
    );
    const dep = (await ctx.api.get(`/api/v1/deployments/${r.deploymentId}`).set(who.auth)).body.data;
    assert.deepEqual([dep.gpuName, dep.gpuCount, dep.provider], ['A100 SXM4 80GB', 2, 'local']);

    await ctx.services.ds.getRepository(Deployment).update({ id: r.deploymentId }, { terminationReason: 'CREDITS' });
    assert.equal(
      (await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(who.auth)).body.data.terminationReason,
      'CREDITS',
    );
  });

  it('terminates by rental id as by deployment id, with the same access rules; the reason is USER', async () => {
    const owner = await account(ctx, { kind: 'OWNER', creditsMinor: 10_000, scopes: ['read', 'rent', 'manage'] });
    const agent = await addKey(ctx, owner.accountId, { scopes: ['read', 'rent', 'manage'] });
    const other = await addKey(ctx, owner.accountId, { scopes: ['read', 'rent', 'manage'] });
    const r = await rentOk(ctx, agent, { offerId: offer['l-h100'] });
    const stranger = await ctx.api.post(`/api/v1/deployments/${r.rentalId}/terminate`).set(other.auth);
    assert.equal(stranger.status, 404, 'another agent key of the account does not see it');
    const res = await ctx.api.post(`/api/v1/deployments/${r.rentalId}/terminate`).set(agent.auth);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const got = (await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(owner.auth)).body.data;
    assert.equal(got.status, 'TERMINATING');
    assert.equal(got.terminationReason, 'USER');
    assert.equal((await ctx.api.post(`/api/v1/deployments/${randomUUID()}/terminate`).set(agent.auth)).status, 404);
  });

  it("lists the caller's rentals newest first in cursor pages; agent keys see their own, owner keys the account's", async () => {
    const owner = await account(ctx, { kind: 'OWNER', creditsMinor: 100_000, scopes: ['read', 'rent', 'manage'] });
    const agent = await addKey(ctx, owner.accountId, { scopes: ['read', 'rent'] });
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      // Two rentals share a creation time, so ties are ordered too.
      if (i !== 3) ctx.clock.advance(1000);
      made.push((await rentOk(ctx, i % 2 ? agent : owner, { offerId: offer['l-h100'] })).rentalId);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await list(owner, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.meta.apiVersion, 'v1');
      assert.ok(res.body.meta.requestId);
      assert.ok(res.body.data.length <= 2);
      for (const r of res.body.data) {
        assert.equal(r.gpuName, 'H100 SXM');
        assert.ok('deployment' in r && 'quote' in r);
        seen.push(r.rentalId);
      }
      cursor = res.body.meta.nextCursor;
      pages += 1;
    } while (cursor !== null && pages < 10);
    assert.equal(pages, 3);
    assert.deepEqual(new Set(seen), new Set(made));
    assert.equal(seen.length, 5);
    const times = await Promise.all(
      seen.map(async (id) => (await ctx.api.get(`/api/v1/rentals/${id}`).set(owner.auth)).body.data.createdAt),
    );
    assert.deepEqual([...times].sort().reverse(), times, 'newest first');
    assert.deepEqual(seen.slice(0, 1), [made[4]]);

    const mine = await list(agent);
    assert.deepEqual(mine.body.data.map((r: { rentalId: string }) => r.rentalId).sort(), [made[1], made[3]].sort());
    assert.equal(mine.body.meta.nextCursor, null);
  });

  it('refuses an unreadable cursor (400 INVALID_REQUEST) and a limit outside 1..100 (422)', async () => {
    const who = await account(ctx);
    const forged = Buffer.from(JSON.stringify(['yesterday', 'x'])).toString('base64url');
    for (const cursor of ['not a cursor!', 'AAAA', forged]) {
      const res = await list(who, `?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(res.status, 400, cursor);
      assert.equal(res.body.error.code, 'INVALID_REQUEST');
    }
    for (const limit of ['0', '101', 'x']) assert.equal((await list(who, `?limit=${limit}`)).status, 422, limit);
    const empty = await list(who);
    assert.deepEqual(empty.body.data, []);
    assert.equal(empty.body.meta.nextCursor, null);
  });
});
