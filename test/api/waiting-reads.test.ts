import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { account, addKey, offerIds } from '../helpers/rentals.js';
import { sentRequests } from '../helpers/sql-requests.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'wr-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

/** The hub's one tail query (events.repository.ts tailEvents), with or without ids it passed before they committed. */
const TAIL_QUERY = /^SELECT \* FROM events WHERE id > \?(?: OR id IN \(\?\))? ORDER BY id LIMIT \?$/;

/** GET /api/v1/rentals/{id} and /api/v1/deployments/{id} with waitFor: held until the status comes. */
describe('waiting reads', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let worker: TestWorker;
  let ids: Record<string, string>;
  let server: Server;
  let base: string;

  before(async () => {
    // One key holds 200 waits below, above the default bounds (test/api/push-limits.test.ts tests those).
    ctx = await createTestContext({
      offers: OFFERS,
      env: { RENTAL_POLL_MS: '50', PUSH_MAX_PER_KEY: '1000', PUSH_MAX_PER_ADDRESS: '1000' },
    });
    ids = await offerIds(ctx);
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
    server = createServer(ctx.app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await ctx.services.eventHub.stop();
    await worker.stop();
    await ctx.close();
  });

  const get = async (
    who: SignedUp,
    path: string,
  ): Promise<{
    status: number;
    body: { data: { status: string; rentalId: string }; error?: { code: string; message: string } };
  }> => {
    const res = await fetch(`${base}${path}`, { headers: who.auth });
    return { status: res.status, body: (await res.json()) as never };
  };
  async function create(who: SignedUp): Promise<{ rentalId: string; deploymentId: string }> {
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: ids['wr-h100'] });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data;
  }
  /** Moves the clock until a plain read shows `status`; the real time it first did. */
  async function drive(who: SignedUp, rentalId: string, status: string): Promise<number> {
    await waitFor(
      async () => (ctx.clock.advance(200), (await get(who, `/api/v1/rentals/${rentalId}`)).body.data.status === status),
      { what: status, intervalMs: 20 },
    );
    return Date.now();
  }

  it('answers within a second of the rental becoming ACTIVE, as a plain read would', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    // The clock stands still until the wait has begun, so the rental cannot be ACTIVE before it.
    const { rentalId, deploymentId } = await create(who);
    const waiting = get(who, `/api/v1/rentals/${rentalId}?waitFor=ACTIVE,FAILED&waitSeconds=20`).then((r) => ({
      ...r,
      at: Date.now(),
    }));
    const deployment = get(who, `/api/v1/deployments/${deploymentId}?waitFor=ACTIVE&waitSeconds=20`).then((r) => ({
      ...r,
      at: Date.now(),
    }));
    await waitFor(async () => ctx.services.eventHub.listeners >= 2, { timeoutMs: 5000, what: 'both reads waiting' });
    const activeAt = await drive(who, rentalId, 'ACTIVE');
    for (const answer of [await waiting, await deployment]) {
      assert.equal(answer.status, 200);
      assert.equal(answer.body.data.status, 'ACTIVE');
      assert.ok(answer.at - activeAt < 1000, `answered ${answer.at - activeAt} ms after a plain read saw ACTIVE`);
    }
    const plain = await get(who, `/api/v1/rentals/${rentalId}`);
    assert.deepEqual((await waiting).body.data, plain.body.data, 'the same answer as a plain read');
  });

  it('answers at once when the status is already there, and with the current state when the wait ends', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const { rentalId } = await create(who);
    await drive(who, rentalId, 'ACTIVE');
    let started = Date.now();
    assert.equal(
      (await get(who, `/api/v1/rentals/${rentalId}?waitFor=ACTIVE&waitSeconds=30`)).body.data.status,
      'ACTIVE',
    );
    assert.ok(Date.now() - started < 1000);
    started = Date.now();
    const timedOut = await get(who, `/api/v1/rentals/${rentalId}?waitFor=FAILED,TERMINATED&waitSeconds=1`);
    const took = Date.now() - started;
    assert.equal(timedOut.status, 200);
    assert.equal(timedOut.body.data.status, 'ACTIVE');
    assert.ok(took >= 950 && took < 2500, `waited ${took} ms`);
    assert.equal(ctx.services.eventHub.listeners, 0, 'the waiter let go of the hub');
  });

  it("does not wait on what the key may not see (404 at once), nor on another rental's events", async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const other = await addKey(ctx, who.accountId);
    const { rentalId } = await create(who);
    const started = Date.now();
    assert.equal((await get(other, `/api/v1/rentals/${rentalId}?waitFor=ACTIVE&waitSeconds=10`)).status, 404);
    assert.ok(Date.now() - started < 1000);
    const mine = await create(other);
    const waiting = get(other, `/api/v1/rentals/${mine.rentalId}?waitFor=TERMINATED&waitSeconds=2`);
    await drive(who, rentalId, 'ACTIVE');
    assert.equal((await waiting).body.data.status === 'TERMINATED', false);
  });

  it('refuses waitFor naming an unknown status and waitSeconds out of 1 to 30 with 422 VALIDATION_FAILED naming it', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const { rentalId, deploymentId } = await create(who);
    for (const [query, names] of [
      ['waitFor=ACTIVE&waitSeconds=0', 'waitSeconds'],
      ['waitFor=ACTIVE&waitSeconds=31', 'waitSeconds'],
      ['waitFor=ACTIVE&waitSeconds=2.5', 'waitSeconds'],
      ['waitFor=RUNNING', 'waitFor'],
      ['waitFor=ACTIVE,', 'waitFor'],
      ['waitFor=', 'waitFor'],
      ['waitSeconds=5', 'waitSeconds'],
    ]) {
      for (const path of [`/api/v1/rentals/${rentalId}`, `/api/v1/deployments/${deploymentId}`]) {
        const res = await get(who, `${path}?${query}`);
        assert.equal(res.status, 422, `${path}?${query}`);
        assert.equal(res.body.error?.code, 'VALIDATION_FAILED');
        assert.match(res.body.error!.message, new RegExp(names), `${query}: ${res.body.error!.message}`);
      }
    }
  });

  it('holds 200 waiting reads on one tail query per interval, not one per waiter', async function () {
    this.timeout(60_000);
    const who = await account(ctx, { creditsMinor: 5000 });
    const { rentalId } = await create(who);
    await drive(who, rentalId, 'ACTIVE');
    let waiting: Promise<Awaited<ReturnType<typeof get>> | Error>[] | undefined;
    const orderReads = (sent: readonly string[]) => sent.filter((q) => /FROM `?orders`?/i.test(q)).length;
    const isTail = (q: string) => TAIL_QUERY.test(q.trim());
    // Once per interval the hub also asks whether the listening key was revoked: a count of its intervals.
    const isTick = (q: string) => /FROM api_keys WHERE id IN/.test(q);
    const intervals = 4;
    const { result: sent } = await sentRequests(async (all) => {
      // Long enough that no wait ends inside the window below, however loaded the machine is.
      // Each failure is kept for the check below, so one cannot end the run before the test says what failed.
      waiting = Array.from({ length: 200 }, () =>
        get(who, `/api/v1/rentals/${rentalId}?waitFor=FAILED&waitSeconds=15`).catch((err: Error) => err),
      );
      await waitFor(async () => ctx.services.eventHub.listeners === 200, { timeoutMs: 10_000, what: '200 waiters' });
      // Each waiter listens before its first read (one of orders): the window starts once all 200 are sent.
      await waitFor(async () => orderReads(all) >= 200, { timeoutMs: 10_000, what: "the waiters' first reads" });
      const from = all.length;
      // The window is a number of the hub's intervals, not a time: a loaded machine only stretches it.
      await waitFor(() => all.slice(from).filter(isTick).length >= intervals, { what: `${intervals} hub intervals` });
      return all.slice(from);
    });
    const tails = sent.filter(isTail).length;
    const rentalReads = orderReads(sent);
    // A tail of each waiter's own would read 200 times an interval; the hub's one reads a few times at most
    // (again at once after a batch, for events other processes write meanwhile).
    assert.ok(tails >= 1 && tails < 200, `${tails} tail queries in ${intervals} intervals`);
    assert.ok(rentalReads < 10, `${rentalReads} reads of orders while nothing changed`);
    const answers = await Promise.all(waiting!);
    assert.ok(
      answers.every((a) => !(a instanceof Error) && a.status === 200 && a.body.data.status === 'ACTIVE'),
      String(answers.find((a) => a instanceof Error) ?? 'an answer other than 200 ACTIVE'),
    );
    await waitFor(async () => ctx.services.eventHub.listeners === 0, { timeoutMs: 2000, what: 'the hub to let go' });
  });
});
