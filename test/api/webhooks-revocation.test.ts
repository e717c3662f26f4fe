import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebhookMakersAndSlots1763800019600 } from '../../migrations/1763800019600-WebhookMakersAndSlots.js';
import { accountSeqsOf, recordEvent } from '../../src/modules/events/events.repository.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker } from '../helpers/jobs.js';
import { databaseBefore } from '../helpers/migrated-before.js';
import { waitFor } from '../helpers/wait.js';
import { account, addKey } from '../helpers/rentals.js';

/** A loopback receiver answering 204, recording the paths called. */
async function receiver() {
  const paths: string[] = [];
  const server: Server = createServer((req, res) => {
    paths.push(req.url ?? '');
    req.resume();
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    paths,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

interface ListedEndpoint {
  id: string;
  keyId: string | null;
  makerKeyId: string | null;
  status: string;
  stoppedReason: string | null;
}

describe('webhooks: an endpoint stops with the key that made it', function () {
  this.timeout(60_000);
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext({ env: { WEBHOOK_FIRST_RETRY_MS: '100' } });
  });
  after(async () => {
    await ctx.close();
  });

  const create = (who: SignedUp, url: string) =>
    ctx.api
      .post('/api/v1/webhook-endpoints')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ url, eventTypes: ['credits.low'] });
  const creditsLow = (accountId: string) =>
    recordEvent(ctx.services.ds.manager, {
      type: 'credits.low',
      accountId,
      keyId: null,
      rentalId: null,
      data: { balanceMinor: 10 },
      at: new Date(),
    });
  const deliveriesOf = async (who: SignedUp, endpointId: string) =>
    (await ctx.api.get(`/api/v1/webhook-endpoints/${endpointId}/deliveries`).set(who.auth)).body.data as {
      id: string;
      eventId: string;
      status: string;
      attempts: unknown[];
    }[];
  const newestEventOf = async (accountId: string) =>
    String(
      (
        (await ctx.services.ds.query(`SELECT MAX(id) AS id FROM events WHERE account_id = ?`, [accountId])) as {
          id: string;
        }[]
      )[0].id,
    );

  it("sends nothing more to a revoked owner key's endpoint, drops its pending delivery, and lists it as stopped", async () => {
    const rx = await receiver();
    const worker = await startTestWorker(ctx, { processEveryMs: 50 });
    try {
      const first = await account(ctx);
      const o1 = await addKey(ctx, first.accountId, { kind: 'OWNER' });
      const o2 = await addKey(ctx, first.accountId, { kind: 'OWNER' });
      // An event from before the endpoints, so no dispatcher sends it: the delivery written for it below has no job.
      await creditsLow(first.accountId);
      const before = await newestEventOf(first.accountId);
      const made = await create(o1, rx.url('/o1'));
      assert.equal(made.status, 201, JSON.stringify(made.body));
      assert.deepEqual(
        [made.body.data.makerKeyId, made.body.data.keyId, made.body.data.status],
        [o1.keyId, null, 'ACTIVE'],
      );
      const endpointId = made.body.data.id as string;
      const kept = await create(o2, rx.url('/o2'));
      assert.equal(kept.status, 201);
      const pendingId = randomUUID();
      assert.ok(
        await ctx.services.store.read((r) =>
          r.webhooks.deliveries.record({
            id: pendingId,
            endpointId,
            accountId: first.accountId,
            eventId: before,
            at: new Date(),
          }),
        ),
      );

      const revoked = await ctx.api.delete(`/api/v1/owner-keys/${o1.keyId}`).set(o2.auth);
      assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
      assert.equal(
        (await ctx.api.get('/api/v1/webhook-endpoints').set(o1.auth)).status,
        401,
        'the key itself is refused at once',
      );

      // The attack replayed: a new event of the account after the revocation.
      await creditsLow(first.accountId);
      const after = await newestEventOf(first.accountId);
      await ctx.services.webhookDeliveries.dispatch();
      await waitFor(async () => rx.paths.includes('/o2'), { what: "the live key's endpoint to get the event" });
      assert.equal(
        await ctx.services.webhookDeliveries.deliver(pendingId),
        'skipped',
        'the pending try is dropped, not sent',
      );

      assert.deepEqual(rx.paths, ['/o2'], "only the live key's endpoint received the account's event");
      const stopped = await deliveriesOf(o2, endpointId);
      const shownBefore = (await accountSeqsOf(ctx.services.ds, [before])).get(before);
      assert.deepEqual(
        stopped.map((d) => d.eventId),
        [shownBefore],
        'no delivery was made for the event after the revocation',
      );
      assert.ok(!stopped.some((d) => d.eventId === after));
      assert.equal(stopped[0].status, 'FAILED');
      assert.deepEqual(stopped[0].attempts, [], 'closed without a try');

      const listed = (await ctx.api.get('/api/v1/webhook-endpoints').set(o2.auth)).body.data as ListedEndpoint[];
      const shown = listed.find((e) => e.id === endpointId)!;
      assert.deepEqual(
        [shown.makerKeyId, shown.keyId, shown.status, shown.stoppedReason],
        [o1.keyId, null, 'STOPPED', 'MAKER_KEY_REVOKED'],
      );
      const live = listed.find((e) => e.id === kept.body.data.id)!;
      assert.deepEqual([live.makerKeyId, live.status, live.stoppedReason], [o2.keyId, 'ACTIVE', null]);

      // A redelivery of the stopped endpoint's delivery is closed without a try as well.
      assert.equal(
        (await ctx.api.post(`/api/v1/webhook-endpoints/${endpointId}/deliveries/${pendingId}/redeliver`).set(o2.auth))
          .status,
        202,
      );
      assert.equal(await ctx.services.webhookDeliveries.deliver(pendingId), 'skipped');
      const [again] = await deliveriesOf(o2, endpointId);
      assert.deepEqual([again.status, again.attempts], ['FAILED', []]);
      assert.deepEqual(rx.paths, ['/o2']);
    } finally {
      await worker.stop();
      await rx.close();
    }
  });

  it("stops an agent key's endpoint with that key, which it names as its maker", async () => {
    const agent = await account(ctx);
    const owner = await addKey(ctx, agent.accountId, { kind: 'OWNER' });
    const made = await create(agent, 'http://127.0.0.1:9/agent');
    assert.equal(made.status, 201);
    assert.deepEqual([made.body.data.keyId, made.body.data.makerKeyId], [agent.keyId, agent.keyId]);
    assert.equal((await ctx.api.delete(`/api/v1/agent-keys/${agent.keyId}`).set(owner.auth)).status, 200);
    await creditsLow(agent.accountId);
    await ctx.services.webhookDeliveries.dispatch();
    assert.deepEqual(await deliveriesOf(owner, made.body.data.id), []);
    const [listed] = (await ctx.api.get('/api/v1/webhook-endpoints').set(owner.auth)).body.data as ListedEndpoint[];
    assert.deepEqual([listed.status, listed.stoppedReason], ['STOPPED', 'MAKER_KEY_REVOKED']);
  });

  it("records existing endpoints' makers: an agent key's from its key, an owner key's from its Idempotency-Key record, else none", async () => {
    const db = await databaseBefore(WebhookMakersAndSlots1763800019600, 'makers');
    try {
      const q = (sql: string, params: unknown[] = []) => db.runner.query(sql, params);
      const accountId = randomUUID();
      await q(`INSERT INTO accounts (id, billing_model, created_at) VALUES (?, 'METERED', NOW(3))`, [accountId]);
      const key = async (kind: 'OWNER' | 'AGENT', revoked: boolean) => {
        const id = randomUUID();
        await q(
          `INSERT INTO api_keys (id, account_id, kind, name, prefix, secret_hash, scopes, max_per_rental_minor, budget_limit_minor, max_concurrent_deployments, origin, created_at, revoked_at)
           VALUES (?, ?, ?, 'k', ?, ?, 'read,manage', 500, 500, 1, 'test', NOW(3), ?)`,
          [id, accountId, kind, randomBytes(4).toString('hex'), randomBytes(32), revoked ? new Date() : null],
        );
        return id;
      };
      const [owner, agent, other] = [await key('OWNER', true), await key('AGENT', false), await key('OWNER', false)];
      const endpoint = async (keyId: string | null) => {
        const id = randomUUID();
        await q(
          `INSERT INTO webhook_endpoints (id, account_id, key_id, url, event_types, secret_sealed, secret_key_id, after_event_id, created_at) VALUES (?, ?, ?, 'https://example.com/', 'credits.low', ?, 'k1', 0, NOW(3))`,
          [id, accountId, keyId, randomBytes(40)],
        );
        return id;
      };
      const [byOwner, byAgent, unrecorded] = [await endpoint(null), await endpoint(agent), await endpoint(null)];
      await q(
        `INSERT INTO idempotency_records (scope, idem_key, request_hash, resource_id, created_at) VALUES (?, ?, ?, ?, NOW(3))`,
        [`webhook-endpoints:${owner}`, 'k-1', 'h'.repeat(64), byOwner],
      );
      // Another key's record of another resource names nothing here.
      await q(
        `INSERT INTO idempotency_records (scope, idem_key, request_hash, resource_id, created_at) VALUES (?, ?, ?, ?, NOW(3))`,
        [`webhook-endpoints:${other}`, 'k-2', 'h'.repeat(64), randomUUID()],
      );
      const deliveryId = randomUUID();
      await q(
        `INSERT INTO webhook_deliveries (id, endpoint_id, event_id, status, attempts, next_attempt_at, created_at) VALUES (?, ?, 1, 'PENDING', 0, NOW(3), NOW(3))`,
        [deliveryId, byOwner],
      );

      await new WebhookMakersAndSlots1763800019600().up(db.runner);

      const rows = (await q(`SELECT id, maker_key_id FROM webhook_endpoints WHERE account_id = ?`, [accountId])) as {
        id: string;
        maker_key_id: string | null;
      }[];
      const makers = new Map(rows.map((r) => [r.id, r.maker_key_id]));
      assert.equal(makers.get(byOwner), owner);
      assert.equal(makers.get(byAgent), agent);
      assert.equal(makers.get(unrecorded), null);
      const [delivery] = (await q(`SELECT account_id FROM webhook_deliveries WHERE id = ?`, [deliveryId])) as {
        account_id: string;
      }[];
      assert.equal(delivery.account_id, accountId);
    } finally {
      await db.close();
    }
  });
});
