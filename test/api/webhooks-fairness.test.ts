import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { recordEvent } from '../../src/modules/events/events.repository.js';
import { TRIES_IN_FLIGHT_PER_ACCOUNT } from '../../src/modules/webhooks/webhook-delivery.js';
import { ENDPOINTS_PER_KEY, REDELIVERY_LIMITS } from '../../src/modules/webhooks/webhooks.service.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { sentRequests } from '../helpers/sql-requests.js';
import { account, addKey } from '../helpers/rentals.js';

/** A loopback receiver that takes every request and never answers: each try waits out its 10 s. */
async function silentReceiver() {
  const sockets = new Set<Socket>();
  const state = { open: 0, maxOpen: 0, seen: 0 };
  const server: Server = createServer((req) => {
    state.seen++;
    state.open++;
    state.maxOpen = Math.max(state.maxOpen, state.open);
    req.resume();
    req.socket.once('close', () => state.open--);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    state,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A loopback receiver answering 204 at once, noting when each request arrived. */
async function promptReceiver() {
  const arrivals: { at: number; body: string }[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      arrivals.push({ at: Date.now(), body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    arrivals,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('webhooks: fair deliveries, bounded endpoints and redeliveries', function () {
  this.timeout(120_000);
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext({ env: { WEBHOOK_DISPATCH_MS: '100', WEBHOOK_FIRST_RETRY_MS: '30000' } });
  });
  after(async () => {
    await ctx.close();
  });

  const create = (who: SignedUp, url: string, key: string = randomUUID()) =>
    ctx.api
      .post('/api/v1/webhook-endpoints')
      .set(who.auth)
      .set('Idempotency-Key', key)
      .send({ url, eventTypes: ['credits.low'] });

  const creditsLow = (accountId: string, at = new Date()) =>
    recordEvent(ctx.services.ds.manager, {
      type: 'credits.low',
      accountId,
      keyId: null,
      rentalId: null,
      data: { balanceMinor: 10 },
      at,
    });

  describe('with a worker running', () => {
    let worker: TestWorker;
    before(async () => {
      worker = await startTestWorker(ctx, { processEveryMs: 50, scheduleRepeating: true });
    });
    after(async () => {
      await worker.stop();
    });

    it("delivers another account's event within seconds while one account's many endpoints never answer", async () => {
      const silent = await silentReceiver();
      const prompt = await promptReceiver();
      const attackerEndpoints: { who: SignedUp; id: string }[] = [];
      try {
        // The attack: two keys of one account, each with as many endpoints as a key may have, none of which ever answers.
        const first = await account(ctx);
        const keys = [first, await addKey(ctx, first.accountId)];
        for (const who of keys) {
          for (let i = 0; i < ENDPOINTS_PER_KEY; i++) {
            const made = await create(who, silent.url(`/hang/${i}`));
            assert.equal(made.status, 201, JSON.stringify(made.body));
            attackerEndpoints.push({ who, id: made.body.data.id });
          }
        }
        assert.ok(attackerEndpoints.length > 10, "more of the account's tries than one worker's 10 delivery slots");
        const victim = await account(ctx);
        assert.equal((await create(victim, prompt.url('/victim'))).status, 201);

        await creditsLow(first.accountId);
        await waitFor(async () => silent.state.open >= TRIES_IN_FLIGHT_PER_ACCOUNT, {
          what: "the attacker's tries to hang",
        });

        const eventAt = Date.now();
        await creditsLow(victim.accountId, new Date(eventAt));
        await waitFor(async () => prompt.arrivals.length >= 1, { what: "the other account's delivery" });
        const waited = prompt.arrivals[0].at - eventAt;
        const attackerTries = (await ctx.services.ds.query(
          `SELECT COUNT(*) AS n FROM webhook_delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.account_id = ?`,
          [first.accountId],
        )) as { n: string }[];

        assert.equal(JSON.parse(prompt.arrivals[0].body).type, 'credits.low');
        // Generous for a loaded machine, and well under the 10 s an unanswered try holds its slot.
        assert.ok(waited < 5000, `delivered ${waited} ms after its event`);
        assert.equal(
          Number(attackerTries[0].n),
          0,
          'delivered while every try of the attacker still hung: it did not wait for their timeouts',
        );
        assert.ok(silent.state.open >= 1, 'the attacker still holds its slots');
        assert.ok(
          silent.state.maxOpen <= TRIES_IN_FLIGHT_PER_ACCOUNT,
          `the attacker never had more than ${TRIES_IN_FLIGHT_PER_ACCOUNT} tries in flight (had ${silent.state.maxOpen})`,
        );
        assert.ok(
          silent.state.seen <= TRIES_IN_FLIGHT_PER_ACCOUNT,
          `its other deliveries waited their turn (${silent.state.seen} tried)`,
        );
      } finally {
        for (const { who, id } of attackerEndpoints)
          await ctx.api.delete(`/api/v1/webhook-endpoints/${id}`).set(who.auth);
        await silent.close();
        await prompt.close();
      }
    });

    it("hands a finished try's slot to its account's next delivery, so every delivery of a busy account is made", async () => {
      const prompt = await promptReceiver();
      try {
        const who = await account(ctx);
        const owner = await addKey(ctx, who.accountId, { kind: 'OWNER' });
        const made: string[] = [];
        for (let i = 0; i < 4; i++) {
          const res = await create(owner, prompt.url(`/busy/${i}`));
          assert.equal(res.status, 201);
          made.push(res.body.data.id);
        }
        // 4 endpoints x 3 events: four times the account's slots, most of them written with no job of their own.
        for (let i = 0; i < 3; i++) await creditsLow(who.accountId);
        const statuses = async () =>
          Promise.all(
            made.map(async (id) =>
              (
                (await ctx.api.get(`/api/v1/webhook-endpoints/${id}/deliveries`).set(owner.auth)).body.data as {
                  status: string;
                }[]
              ).map((d) => d.status),
            ),
          );
        // A receiver sees a try before its outcome is written, so the wait is on the recorded outcomes.
        await waitFor(async () => (await statuses()).every((s) => s.length === 3 && s.every((x) => x !== 'PENDING')), {
          timeoutMs: 60_000,
          what: 'all twelve deliveries settled',
        });
        assert.deepEqual(
          await statuses(),
          made.map(() => ['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']),
        );
        assert.ok(prompt.arrivals.length >= 12, 'every delivery arrived');
      } finally {
        await prompt.close();
      }
    });
  });

  it(`refuses a key's endpoint past ${ENDPOINTS_PER_KEY} (422 naming the limit), also when the creates race, and takes one again after a delete`, async () => {
    const who = await account(ctx);
    const url = 'http://127.0.0.1:9/limit';
    for (let i = 0; i < ENDPOINTS_PER_KEY - 2; i++) assert.equal((await create(who, url)).status, 201);
    const racing = await Promise.all(Array.from({ length: 5 }, () => create(who, url)));
    assert.deepEqual(racing.map((r) => r.status).sort(), [201, 201, 422, 422, 422], 'exactly the two left were made');
    const refused = racing.find((r) => r.status === 422)!;
    assert.equal(refused.body.error.code, 'VALIDATION_FAILED');
    assert.match(
      refused.body.error.message,
      new RegExp(`already has ${ENDPOINTS_PER_KEY} webhook endpoints.*delete one first`),
    );
    const listed = (await ctx.api.get('/api/v1/webhook-endpoints').set(who.auth)).body.data as { id: string }[];
    assert.equal(listed.length, ENDPOINTS_PER_KEY);
    // Another key of the account has a limit of its own.
    assert.equal((await create(await addKey(ctx, who.accountId), url)).status, 201);
    assert.equal((await ctx.api.delete(`/api/v1/webhook-endpoints/${listed[0].id}`).set(who.auth)).status, 204);
    assert.equal((await create(who, url)).status, 201, 'a deleted endpoint frees its place');
    assert.equal((await create(who, url)).status, 422);
  });

  it(`bounds redelivery: ${REDELIVERY_LIMITS.perDelivery.limit} an hour per delivery and ${REDELIVERY_LIMITS.perKey.limit} per key, then 429 with Retry-After`, async () => {
    const who = await account(ctx);
    const made = await create(who, 'http://127.0.0.1:9/redo');
    assert.equal(made.status, 201);
    const endpointId = made.body.data.id as string;
    const perDelivery = REDELIVERY_LIMITS.perDelivery.limit;
    const events = Math.ceil(REDELIVERY_LIMITS.perKey.limit / perDelivery) + 1;
    for (let i = 0; i < events; i++) await creditsLow(who.accountId);
    await ctx.services.webhookDeliveries.dispatch();
    const deliveries = (await ctx.api.get(`/api/v1/webhook-endpoints/${endpointId}/deliveries`).set(who.auth)).body
      .data as { id: string }[];
    assert.equal(deliveries.length, events);
    const redeliver = (id: string) =>
      ctx.api.post(`/api/v1/webhook-endpoints/${endpointId}/deliveries/${id}/redeliver`).set(who.auth);
    try {
      for (let i = 0; i < perDelivery; i++) assert.equal((await redeliver(deliveries[0].id)).status, 202);
      const again = await redeliver(deliveries[0].id);
      assert.equal(again.status, 429, JSON.stringify(again.body));
      assert.equal(again.body.error.code, 'RATE_LIMITED');
      assert.match(again.body.error.message, /redeliveries of this delivery/);
      assert.ok(Number(again.headers['retry-after']) >= 1, `Retry-After: ${again.headers['retry-after']}`);

      // The key's own bound, over its other deliveries: every call so far counted for the key, the refused one too.
      let hits = perDelivery + 1;
      for (let j = 0; hits < REDELIVERY_LIMITS.perKey.limit; j++, hits++) {
        const res = await redeliver(deliveries[1 + Math.floor(j / perDelivery)].id);
        assert.equal(res.status, 202, `call ${hits + 1}: ${JSON.stringify(res.body)}`);
      }
      const last = await redeliver(deliveries[events - 1].id);
      assert.equal(last.status, 429, JSON.stringify(last.body));
      assert.match(last.body.error.message, /redeliveries by this key/);
      assert.ok(Number(last.headers['retry-after']) >= 1);
    } finally {
      assert.equal((await ctx.api.delete(`/api/v1/webhook-endpoints/${endpointId}`).set(who.auth)).status, 204);
    }
  });

  it('reads only the endpoints of the accounts whose events it fans out, by account', async () => {
    const busy = await account(ctx);
    for (let i = 0; i < 5; i++) assert.equal((await create(busy, `http://127.0.0.1:9/idle/${i}`)).status, 201);
    const quiet = await account(ctx);
    assert.equal((await create(quiet, 'http://127.0.0.1:9/quiet')).status, 201);
    await creditsLow(quiet.accountId);
    const { sent } = await sentRequests(() => ctx.services.webhookDeliveries.dispatch());
    const endpointReads = sent.filter((q) => /FROM webhook_endpoints/i.test(q));
    assert.ok(endpointReads.length >= 1, 'the pass read endpoints');
    for (const q of endpointReads)
      assert.match(q, /e\.account_id IN \(/, `an endpoint read not bounded by account: ${q}`);
  });
});
