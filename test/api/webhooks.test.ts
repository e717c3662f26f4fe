import assert from 'node:assert/strict';
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { account, addKey, offerIds, rentUntilTerminated } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'wh-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  answered: number;
}

/** A loopback receiver: records every request; `answer` picks the status (and headers) of each. */
async function receiver(
  answer: (r: Received, seen: Received[]) => { status: number; headers?: Record<string, string> },
) {
  const got: Received[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const r: Received = { path: req.url ?? '', headers: req.headers, body, answered: 0 };
      const { status, headers } = answer(r, got);
      r.answered = status;
      got.push(r);
      res.writeHead(status, headers ?? {});
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    got,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Standard Webhooks verification, written from its rules: v1 HMAC-SHA256 of "<id>.<timestamp>.<body>". */
function verifies(secret: string, r: Received): boolean {
  const id = String(r.headers['webhook-id']);
  const ts = String(r.headers['webhook-timestamp']);
  if (!/^\d+$/.test(ts) || Math.abs(Number(ts) - Date.now() / 1000) > 24 * 3600) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${r.body}`).digest();
  return String(r.headers['webhook-signature'])
    .split(' ')
    .some((sig) => {
      const [version, value] = sig.split(',');
      const given = Buffer.from(value ?? '', 'base64');
      return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
    });
}

describe('webhooks: signed deliveries of events', function () {
  this.timeout(90_000);
  let ctx: TestContext;
  let worker: TestWorker;
  let ids: Record<string, string>;
  const logLines: string[] = [];

  before(async () => {
    ctx = await createTestContext({
      offers: OFFERS,
      env: { RENTAL_POLL_MS: '50', WEBHOOK_FIRST_RETRY_MS: '100', WEBHOOK_DISPATCH_MS: '100' },
      logTo: (l) => logLines.push(l),
    });
    ids = await offerIds(ctx);
    worker = await startTestWorker(ctx, { processEveryMs: 50, scheduleRepeating: true });
  });
  after(async () => {
    await worker.stop();
    await ctx.close();
  });

  const create = (who: SignedUp, body: object, key: string = randomUUID()) =>
    ctx.api.post('/api/v1/webhook-endpoints').set(who.auth).set('Idempotency-Key', key).send(body);

  const rentAndFinish = async (who: SignedUp): Promise<string> =>
    (await rentUntilTerminated(ctx, who, ids['wh-h100'])).rentalId;

  it('delivers rental.active and rental.terminated signed with the secret shown once, each once though the receiver first answers 500', async () => {
    // The first try of each message fails; every later one succeeds.
    const rx = await receiver((r, seen) => ({
      status: seen.some((s) => s.headers['webhook-id'] === r.headers['webhook-id']) ? 200 : 500,
    }));
    try {
      const who = await account(ctx, { creditsMinor: 5000 });
      const idemKey = randomUUID();
      const made = await create(
        who,
        { url: rx.url('/hook'), eventTypes: ['rental.active', 'rental.terminated'] },
        idemKey,
      );
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const { id: endpointId, secret } = made.body.data;
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/, '24 random bytes, base64');

      const rentalId = await rentAndFinish(who);
      await waitFor(async () => rx.got.filter((r) => r.answered === 200).length >= 2, { what: 'both delivered' });
      // Done, as the service has it: both deliveries recorded as succeeded (a later job for one sends nothing)
      // and no delivery job due or running, so every try there is has reached the receiver.
      await waitFor(
        async () => {
          const listed = await ctx.api.get(`/api/v1/webhook-endpoints/${endpointId}/deliveries`).set(who.auth);
          const statuses = (listed.body.data ?? []).map((d: { status: string }) => d.status);
          return statuses.length >= 2 && statuses.every((status: string) => status === 'SUCCEEDED');
        },
        { what: 'both deliveries to be recorded as succeeded' },
      );
      await worker.settle();

      assert.equal(rx.got.length, 4, 'one failed and one good try per event, nothing more');
      assert.ok(
        rx.got.every((r) => verifies(secret, r)),
        'every try verifies against the shown secret',
      );
      assert.ok(
        !rx.got.some((r) => verifies('whsec_' + Buffer.alloc(24).toString('base64'), r)),
        'and not against another',
      );
      const bodies = rx.got.map((r) => JSON.parse(r.body));
      assert.ok(bodies.every((b) => b.data.rentalId === rentalId));
      for (const type of ['rental.active', 'rental.terminated']) {
        const tries = rx.got.filter((_r, i) => bodies[i].type === type);
        assert.deepEqual(
          tries.map((r) => r.answered),
          [500, 200],
          `${type}: one failed try, then one good one`,
        );
        assert.equal(
          tries[0].headers['webhook-id'],
          tries[1].headers['webhook-id'],
          'a retry carries the same webhook-id',
        );
        assert.equal(tries[0].headers['webhook-id'], JSON.parse(tries[0].body).id, 'the event id');
      }
      assert.equal(new Set(rx.got.map((r) => r.headers['webhook-id'])).size, 2);
      // The ids are the account's own, as its event reads show them: no receiver learns of other accounts' activity.
      const page = (await ctx.api.get('/api/v1/events?after=0&limit=100').set(who.auth)).body.data as {
        id: string;
        type: string;
        data: { rentalId?: string };
      }[];
      for (const type of ['rental.active', 'rental.terminated']) {
        const shown = page.find((e) => e.type === type && e.data.rentalId === rentalId)?.id;
        assert.equal(
          rx.got.find((_r, i) => bodies[i].type === type)?.headers['webhook-id'],
          shown,
          `${type}: the id GET /api/v1/events shows`,
        );
      }

      const listed = await ctx.api.get('/api/v1/webhook-endpoints').set(who.auth);
      assert.equal(listed.status, 200);
      assert.deepEqual(
        listed.body.data.map((e: { id: string }) => e.id),
        [endpointId],
      );
      assert.ok(!JSON.stringify(listed.body).includes(secret.slice(6)), 'never in lists');

      const deliveries = await ctx.api.get(`/api/v1/webhook-endpoints/${endpointId}/deliveries`).set(who.auth);
      assert.equal(deliveries.status, 200, JSON.stringify(deliveries.body));
      assert.equal(deliveries.body.data.length, 2);
      for (const d of deliveries.body.data) {
        assert.equal(d.status, 'SUCCEEDED');
        assert.deepEqual(
          d.attempts.map((a: { statusCode: number }) => a.statusCode),
          [500, 200],
        );
        assert.ok(d.attempts.every((a: { attemptedAt: string }) => !Number.isNaN(Date.parse(a.attemptedAt))));
      }

      const again = deliveries.body.data[0];
      // Both ids in upper case: ids are normalised where they come in.
      const redo = await ctx.api
        .post(`/api/v1/webhook-endpoints/${endpointId.toUpperCase()}/deliveries/${again.id.toUpperCase()}/redeliver`)
        .set(who.auth);
      assert.equal(redo.status, 202, JSON.stringify(redo.body));
      await waitFor(async () => rx.got.length === 5, { timeoutMs: 10_000, what: 'redelivered' });
      assert.equal(rx.got[4].headers['webhook-id'], again.eventId, 'the same webhook-id again');
      assert.ok(verifies(secret, rx.got[4]));
      await waitFor(
        async () =>
          (await ctx.api.get(`/api/v1/webhook-endpoints/${endpointId}/deliveries`).set(who.auth)).body.data[0].attempts
            .length === 3,
        { timeoutMs: 10_000, what: 'the redelivery listed' },
      );
      assert.ok(!logLines.some((l) => l.includes(secret.slice(6))), 'the secret is never logged');

      const replay = await create(
        who,
        { url: rx.url('/hook'), eventTypes: ['rental.terminated', 'rental.active'] },
        idemKey,
      );
      assert.equal(replay.status, 200, JSON.stringify(replay.body));
      assert.equal(replay.body.data.id, endpointId);
      assert.equal(replay.body.data.secret, null, 'a replay does not show the secret again');

      assert.equal((await ctx.api.delete(`/api/v1/webhook-endpoints/${endpointId}`).set(who.auth)).status, 204);
      assert.deepEqual((await ctx.api.get('/api/v1/webhook-endpoints').set(who.auth)).body.data, []);
    } finally {
      await rx.close();
    }
  });

  it("never sends an agent's endpoint another key's events; the owner's gets every rental of the account", async () => {
    const rx = await receiver(() => ({ status: 204 }));
    try {
      const agentA = await account(ctx, { creditsMinor: 5000 });
      const agentB = await addKey(ctx, agentA.accountId);
      const owner = await addKey(ctx, agentA.accountId, { kind: 'OWNER' });
      const aMade = await create(agentA, { url: rx.url('/a'), eventTypes: ['rental.active'] });
      assert.equal(aMade.status, 201);
      const ownerMade = await create(owner, { url: rx.url('/owner'), eventTypes: ['rental.active'] });
      assert.equal(ownerMade.status, 201);
      const rentalB = await rentAndFinish(agentB);
      await waitFor(async () => rx.got.some((r) => r.path === '/owner'), { what: "the owner's delivery" });
      // One fan-out made every delivery of the event, the owner's among them; once no delivery job is due
      // or running, any for A's endpoint would have been recorded and sent.
      await worker.settle();
      assert.deepEqual(
        (await ctx.api.get(`/api/v1/webhook-endpoints/${aMade.body.data.id}/deliveries`).set(agentA.auth)).body.data,
        [],
        "A's endpoint has no delivery of B's rental",
      );
      assert.deepEqual(
        rx.got.map((r) => r.path),
        ['/owner'],
      );
      assert.equal(JSON.parse(rx.got[0].body).data.rentalId, rentalB);
      assert.deepEqual(
        (await ctx.api.get('/api/v1/webhook-endpoints').set(agentB.auth)).body.data,
        [],
        "B sees none of A's endpoints",
      );
      assert.equal(
        (await ctx.api.get('/api/v1/webhook-endpoints').set(owner.auth)).body.data.length,
        2,
        'the owner sees both',
      );
      const foreign = await ctx.api
        .get(`/api/v1/webhook-endpoints/${ownerMade.body.data.id}/deliveries`)
        .set(agentA.auth);
      assert.equal(foreign.status, 404);
    } finally {
      await rx.close();
    }
  });

  it('refuses a url that is not https, and event types that are none or unknown', async () => {
    const who = await account(ctx);
    const ftp = await create(who, { url: 'ftp://127.0.0.1/x', eventTypes: ['rental.active'] });
    assert.equal(ftp.status, 422);
    assert.match(ftp.body.error.message, /url/);
    assert.equal((await create(who, { url: 'http://127.0.0.1/x', eventTypes: [] })).status, 422);
    assert.equal((await create(who, { url: 'http://127.0.0.1/x', eventTypes: ['rental.exploded'] })).status, 422);
    assert.equal(
      (
        await ctx.api
          .post('/api/v1/webhook-endpoints')
          .set(who.auth)
          .send({ url: 'http://127.0.0.1/x', eventTypes: ['rental.active'] })
      ).status,
      400,
      'Idempotency-Key required',
    );
  });
});
