import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { account, addKey, offerIds, rentUntilTerminated } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'ev-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

interface Event {
  id: string;
  type: string;
  createdAt: string;
  data: { rentalId?: string; status?: string };
}

/** The durable event log through GET /api/v1/events (JSON paging). */
describe('events: the durable log', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let worker: TestWorker;
  let ids: Record<string, string>;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { RENTAL_POLL_MS: '50' } });
    ids = await offerIds(ctx);
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
  });
  after(async () => {
    await worker.stop();
    await ctx.close();
  });

  const page = (who: SignedUp, query: Record<string, string | number> = {}) =>
    ctx.api.get('/api/v1/events').query(query).set(who.auth);

  async function all(who: SignedUp, after: string): Promise<Event[]> {
    const out: Event[] = [];
    let cursor = after;
    for (;;) {
      const res = await page(who, { after: cursor, limit: 2 });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      out.push(...res.body.data);
      if (res.body.data.length === 0) return out;
      cursor = res.body.meta.nextAfter;
    }
  }

  const rentAndFinish = async (who: SignedUp): Promise<string> =>
    (await rentUntilTerminated(ctx, who, ids['ev-h100'])).rentalId;

  it('writes each status change of a rental once, in order, carrying the rental as a read showed it then', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const start = (await page(who)).body.meta.nextAfter;
    assert.deepEqual((await page(who)).body.data, [], 'a new key has no history');
    const rentalId = await rentAndFinish(who);
    const events = (await all(who, start)).filter((e) => e.data.rentalId === rentalId);
    // Without after: the newest page of the history, oldest first, and where to go on from.
    const latest = await ctx.api.get('/api/v1/events?limit=2').set(who.auth);
    assert.equal(latest.status, 200);
    assert.deepEqual(
      latest.body.data.map((e: { type: string }) => e.type),
      ['rental.terminating', 'rental.terminated'],
    );
    assert.equal(latest.body.meta.nextAfter, events[3].id);
    assert.deepEqual(
      (await ctx.api.get(`/api/v1/events?after=${latest.body.meta.nextAfter}`).set(who.auth)).body.data,
      [],
      'nothing after the newest',
    );
    assert.deepEqual(
      events.map((e) => e.type),
      ['rental.provisioning', 'rental.active', 'rental.terminating', 'rental.terminated'],
    );
    assert.deepEqual(
      events.map((e) => e.data.status),
      ['PROVISIONING', 'ACTIVE', 'TERMINATING', 'TERMINATED'],
    );
    assert.ok(
      events.every((e, i) => i === 0 || BigInt(e.id) > BigInt(events[i - 1].id)),
      'ids grow',
    );
    const read = (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data;
    assert.deepEqual(Object.keys(events[3].data).sort(), Object.keys(read).sort(), 'the same view as a read');
  });

  it("shows an agent key only its own rentals' events, and the owner every event of the account", async () => {
    const agentA = await account(ctx, { creditsMinor: 5000 });
    const agentB = await addKey(ctx, agentA.accountId);
    const owner = await addKey(ctx, agentA.accountId, { kind: 'OWNER' });
    const start = (await page(owner)).body.meta.nextAfter;
    const rentalA = await rentAndFinish(agentA);
    const rentalB = await rentAndFinish(agentB);
    const rentalsIn = async (who: SignedUp) => new Set((await all(who, start)).map((e) => e.data.rentalId));
    assert.deepEqual([...(await rentalsIn(agentA))], [rentalA]);
    assert.deepEqual([...(await rentalsIn(agentB))], [rentalB]);
    assert.deepEqual([...(await rentalsIn(owner))].sort(), [rentalA, rentalB].sort());
    const stranger = await account(ctx, { creditsMinor: 5000 });
    assert.deepEqual(await all(stranger, start), [], 'another account sees none');
  });

  it('refuses an after that is not an event id, and a limit out of range', async () => {
    const who = await account(ctx);
    const bad = await page(who, { after: 'abc' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'INVALID_REQUEST');
    assert.equal((await page(who, { limit: 0 })).status, 422);
    assert.equal((await page(who, { limit: 101 })).status, 422);
  });
});
