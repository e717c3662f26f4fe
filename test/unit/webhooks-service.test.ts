import assert from 'node:assert/strict';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { ManualClock } from '../../src/clock.js';
import { AppError } from '../../src/errors/app-error.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import type { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import { noAllowedAddress, type Resolver } from '../../src/modules/webhooks/destination.js';
import { newSigningSecret, signedHeaders } from '../../src/modules/webhooks/webhook-signing.js';
import type { CreateWebhookEndpointRequest } from '../../src/modules/webhooks/webhooks.dto.js';
import { ENDPOINTS_PER_KEY, secretBinding, WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import { RecordingJobQueue } from '../fakes/store/job-queue.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';
import { MemoryWebhookEventLog } from '../fakes/store/webhook-events.js';
import { memoryWebhooksSeed } from '../fakes/store/webhooks.js';

const principal = (accountId: string, kind: 'AGENT' | 'OWNER' = 'AGENT', keyId = randomUUID()): Principal => ({
  accountId,
  keyId,
  kind,
  scopes: ['read', 'rent', 'manage'],
  key: {} as ApiKey,
});

/** The error `p` rejects with, which must be an AppError. */
async function refusal(p: Promise<unknown>): Promise<AppError> {
  const err = await p.then(
    () => assert.fail('expected a refusal'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AppError, String(err));
  return err;
}

/** A rate limiter counting hits per name in memory, refusing (429) past a limit as the real one does. */
class CountingLimiter {
  readonly hits = new Map<string, number>();

  async hit(name: string, limit: number, _windowSeconds: number, what: string): Promise<void> {
    const count = (this.hits.get(name) ?? 0) + 1;
    this.hits.set(name, count);
    if (count > limit) throw new AppError('RATE_LIMITED', `Too many ${what}; try again in 1 s.`);
  }
}

/** Names as the resolver of these tests answers them; a name missing does not resolve. */
const ANSWERS: Record<string, string[]> = {
  'hooks.example': ['93.184.216.34'],
  'private.example': ['10.1.2.3'],
  'mixed.example': ['192.168.0.9', '2606:4700::1111'],
};

describe('WebhooksService (memory store)', () => {
  let store: ReturnType<typeof memoryStore>;
  let events: MemoryWebhookEventLog;
  let clock: ManualClock;
  let box: SecretBox;
  let jobs: RecordingJobQueue;
  let limiter: CountingLimiter;
  let looked: string[];
  let sut: WebhooksService;
  let agent: Principal;

  const resolve: Resolver = async (host) => {
    looked.push(host);
    const found = ANSWERS[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  const service = (allowPrivateDestinations: boolean) =>
    new WebhooksService(store, events, clock, box, jobs, limiter, { allowPrivateDestinations, resolve });

  beforeEach(() => {
    store = memoryStore();
    events = new MemoryWebhookEventLog(store);
    clock = new ManualClock(new Date('2026-05-01T12:00:00.000Z'));
    box = new SecretBox(new Map([['k1', randomBytes(32)]]), 'k1');
    jobs = new RecordingJobQueue();
    limiter = new CountingLimiter();
    looked = [];
    sut = service(false);
    agent = principal(randomUUID());
  });

  const body = (o: Partial<CreateWebhookEndpointRequest> = {}): CreateWebhookEndpointRequest => ({
    url: 'https://hooks.example/in',
    eventTypes: ['rental.active'],
    ...o,
  });
  const create = (who: Principal = agent, o: Partial<CreateWebhookEndpointRequest> = {}, key = randomUUID()) =>
    sut.create(who, key, body(o));
  const validation = async (p: Promise<unknown>) => {
    const err = await refusal(p);
    assert.equal(err.code, 'VALIDATION_FAILED');
    return err.message;
  };
  const endpointRows = () => store.tables.table<{ id: string; deletedAt: Date | null }>('webhook_endpoints').all();

  describe('create', () => {
    it("makes an agent key's endpoint: its key, its maker, the URL as parsed, the types sorted once each", async () => {
      const { endpoint, created } = await create(agent, {
        url: 'https://HOOKS.example:443/in?a=1',
        eventTypes: ['rental.terminated', 'credits.low', 'rental.terminated'],
      });
      assert.equal(created, true);
      assert.equal(endpoint.url, 'https://hooks.example/in?a=1');
      assert.deepEqual(endpoint.eventTypes, ['credits.low', 'rental.terminated']);
      assert.equal(endpoint.keyId, agent.keyId);
      assert.equal(endpoint.makerKeyId, agent.keyId);
      assert.equal(endpoint.status, 'ACTIVE');
      assert.equal(endpoint.stoppedReason, null);
      assert.equal(endpoint.createdAt, clock.now().toISOString());
    });

    it("makes an owner key's endpoint the account's, naming the owner key as its maker", async () => {
      const owner = principal(agent.accountId, 'OWNER');
      const { endpoint } = await create(owner);
      assert.equal(endpoint.keyId, null);
      assert.equal(endpoint.makerKeyId, owner.keyId);
      assert.deepEqual(
        (await sut.list({ kind: 'OWNER', accountId: agent.accountId })).map((e) => e.id),
        [endpoint.id],
      );
      assert.deepEqual(await sut.list({ kind: 'AGENT', accountId: agent.accountId, keyId: agent.keyId }), []);
    });

    it("shows a whsec_ secret once, sealed bound to the endpoint's own id", async () => {
      const { endpoint } = await create();
      assert.match(endpoint.secret ?? '', /^whsec_[A-Za-z0-9+/]{32}$/);
      const [row] = store.tables
        .table<{ id: string; secretSealed: Uint8Array; secretKeyId: string }>('webhook_endpoints')
        .all();
      const sealed = Buffer.from(row.secretSealed);
      assert.ok(!sealed.toString('latin1').includes(endpoint.secret!), 'the secret is not stored in the clear');
      assert.equal(box.open(sealed, row.secretKeyId, secretBinding(endpoint.id)), endpoint.secret);
      assert.throws(() => box.open(sealed, row.secretKeyId, secretBinding(randomUUID())));
    });

    it('starts the endpoint after the newest event of the log', async () => {
      events.append({ accountId: agent.accountId, type: 'rental.active', keyId: agent.keyId });
      events.append({ accountId: randomUUID(), type: 'credits.low' });
      await create();
      const [row] = store.tables.table<{ afterEventId: string }>('webhook_endpoints').all();
      assert.equal(row.afterEventId, '2');
    });

    it('answers a replay of the same Idempotency-Key with the same endpoint and no secret', async () => {
      const key = randomUUID();
      const first = await create(agent, {}, key);
      const again = await create(agent, {}, key);
      assert.equal(again.created, false);
      assert.equal(again.endpoint.secret, null);
      assert.equal(again.endpoint.id, first.endpoint.id);
      assert.equal(endpointRows().length, 1);
    });

    it('refuses the same Idempotency-Key with another body (IDEMPOTENCY_CONFLICT)', async () => {
      const key = randomUUID();
      await create(agent, {}, key);
      const err = await refusal(create(agent, { eventTypes: ['credits.low'] }, key));
      assert.equal(err.code, 'IDEMPOTENCY_CONFLICT');
      assert.equal(endpointRows().length, 1);
    });

    it("keeps one key's Idempotency-Keys apart from another's", async () => {
      const key = randomUUID();
      const mine = await create(agent, {}, key);
      const other = await create(principal(agent.accountId), {}, key);
      assert.equal(other.created, true);
      assert.notEqual(other.endpoint.id, mine.endpoint.id);
    });

    it('requires an Idempotency-Key (INVALID_REQUEST), writing nothing', async () => {
      for (const key of [undefined, '']) {
        const err = await refusal(sut.create(agent, key, body()));
        assert.equal(err.code, 'INVALID_REQUEST');
        assert.match(err.message, /Idempotency-Key/);
      }
      assert.equal(endpointRows().length, 0);
    });

    it('refuses no event types, and unknown ones, naming the types there are', async () => {
      for (const eventTypes of [[], ['rental.active', 'rental.exploded']]) {
        const message = await validation(create(agent, { eventTypes: eventTypes as never }));
        assert.match(message, /eventTypes must be one or more of rental\.provisioning, .*topup\.paid/);
      }
      assert.deepEqual(looked, [], 'refused before the URL is looked at');
    });

    it('refuses a URL by its text: not https, a user name, a fragment, not absolute', async () => {
      const urls = {
        'http://hooks.example/in': /url must be https/,
        'https://user:pw@hooks.example/in': /user name or password/,
        'https://hooks.example/in#x': /#fragment/,
        '/relative': /not an absolute URL/,
        'https://hooks.example/\nin': /control characters/,
      };
      for (const [url, problem] of Object.entries(urls))
        assert.match(await validation(create(agent, { url })), problem);
      assert.deepEqual(looked, [], 'no name was resolved');
      assert.equal(endpointRows().length, 0);
    });

    it('refuses a host that resolves only to refused addresses, or not at all, in the same words', async () => {
      const messages: string[] = [];
      for (const host of ['private.example', 'nowhere.example'])
        messages.push((await validation(create(agent, { url: `https://${host}/in` }))).replace(host, '<host>'));
      for (const message of messages) assert.equal(message, `Invalid request: url: ${noAllowedAddress('<host>')}.`);
      assert.deepEqual(looked, ['private.example', 'nowhere.example']);
    });

    it('takes a host with one public address among refused ones, and refuses a refused IP literal without resolving', async () => {
      assert.equal((await create(agent, { url: 'https://mixed.example/in' })).created, true);
      await validation(create(agent, { url: 'https://169.254.169.254/latest' }));
      await validation(create(agent, { url: 'https://[::1]/in' }));
      assert.deepEqual(looked, ['mixed.example']);
    });

    it('takes http and private addresses when private destinations are allowed, resolving nothing', async () => {
      sut = service(true);
      const { endpoint } = await create(agent, { url: 'http://127.0.0.1:9000/hook' });
      assert.equal(endpoint.url, 'http://127.0.0.1:9000/hook');
      await create(agent, { url: 'https://private.example/in' });
      assert.deepEqual(looked, []);
      assert.match(await validation(create(agent, { url: 'ftp://127.0.0.1/x' })), /url must be https/);
    });

    it(`refuses a key's endpoint past ${ENDPOINTS_PER_KEY}, naming the limit; another key of the account is not held to it`, async () => {
      for (let i = 0; i < ENDPOINTS_PER_KEY; i++) await create();
      const message = await validation(create());
      assert.match(message, new RegExp(`already has ${ENDPOINTS_PER_KEY} webhook endpoints`));
      assert.equal(endpointRows().length, ENDPOINTS_PER_KEY);
      assert.equal((await create(principal(agent.accountId, 'OWNER'))).created, true);
    });

    it('takes one again after a delete, under the Idempotency-Key the refused create used', async () => {
      const made = [];
      for (let i = 0; i < ENDPOINTS_PER_KEY; i++) made.push((await create()).endpoint.id);
      const key = randomUUID();
      await validation(create(agent, {}, key));
      await sut.delete(agent, made[0]);
      const again = await create(agent, {}, key);
      assert.equal(again.created, true, 'the refused create left its key free');
      assert.notEqual(again.endpoint.secret, null);
    });

    it('answers a replay at the limit with the endpoint it made', async () => {
      const key = randomUUID();
      const first = await create(agent, {}, key);
      for (let i = 1; i < ENDPOINTS_PER_KEY; i++) await create();
      const replay = await create(agent, {}, key);
      assert.equal(replay.endpoint.id, first.endpoint.id);
      assert.equal(replay.created, false);
    });

    it('makes one endpoint, and shows its secret, when its commit is lost and run again', async () => {
      store.loseNextCommits(1);
      const { endpoint, created } = await create();
      assert.equal(created, true);
      assert.ok(endpoint.secret);
      assert.deepEqual(
        endpointRows().map((e) => e.id),
        [endpoint.id],
      );
      const [row] = store.tables.table<{ secretSealed: Uint8Array; secretKeyId: string }>('webhook_endpoints').all();
      assert.equal(
        box.open(Buffer.from(row.secretSealed), row.secretKeyId, secretBinding(endpoint.id)),
        endpoint.secret,
      );
    });
  });

  describe('list and delete', () => {
    it('lists an agent key its own endpoints and the account holder every one, newest first', async () => {
      const other = principal(agent.accountId);
      const a = (await create()).endpoint;
      clock.advance(1000);
      const b = (await create(other)).endpoint;
      clock.advance(1000);
      const c = (await create()).endpoint;
      assert.deepEqual(
        (await sut.list(agent)).map((e) => e.id),
        [c.id, a.id],
      );
      assert.deepEqual(
        (await sut.list({ kind: 'OWNER', accountId: agent.accountId })).map((e) => e.id),
        [c.id, b.id, a.id],
      );
      assert.deepEqual(await sut.list({ kind: 'OWNER', accountId: randomUUID() }), []);
      assert.ok(
        (await sut.list(agent)).every((e) => !('secret' in e)),
        'a listing never shows a secret',
      );
    });

    it('lists an endpoint whose maker key was revoked as STOPPED (MAKER_KEY_REVOKED)', async () => {
      const owner = principal(agent.accountId, 'OWNER');
      const seed = memoryWebhooksSeed(store.tables);
      seed.key({ id: owner.keyId, accountId: owner.accountId, kind: 'OWNER' });
      const { endpoint } = await create(owner);
      seed.revoke(owner.keyId, clock.now());
      const [listed] = await sut.list(owner);
      assert.equal(listed.id, endpoint.id);
      assert.equal(listed.status, 'STOPPED');
      assert.equal(listed.stoppedReason, 'MAKER_KEY_REVOKED');
    });

    it('deletes an endpoint: gone from the listing; deleting it again is NOT_FOUND', async () => {
      const { endpoint } = await create();
      clock.advance(5000);
      await sut.delete(agent, endpoint.id);
      assert.deepEqual(await sut.list(agent), []);
      assert.equal(endpointRows()[0].deletedAt?.getTime(), clock.now().getTime(), 'the row stays, marked');
      assert.equal((await refusal(sut.delete(agent, endpoint.id))).code, 'NOT_FOUND');
    });

    it("refuses to delete another key's or another account's endpoint (NOT_FOUND)", async () => {
      const { endpoint } = await create();
      for (const viewer of [principal(agent.accountId), principal(randomUUID(), 'OWNER')])
        assert.equal((await refusal(sut.delete(viewer, endpoint.id))).code, 'NOT_FOUND');
      await sut.delete({ kind: 'OWNER', accountId: agent.accountId }, endpoint.id);
      assert.deepEqual(await sut.list(agent), []);
    });
  });

  describe('deliveries and redelivery', () => {
    /** An endpoint of `agent` and a delivery to it of an event of its key, tried once and failed. */
    async function triedDelivery() {
      const { endpoint } = await create();
      const event = events.append({ accountId: agent.accountId, type: 'rental.active', keyId: agent.keyId });
      const id = randomUUID();
      await store.read((r) =>
        r.webhooks.deliveries.record({
          id,
          endpointId: endpoint.id,
          accountId: agent.accountId,
          eventId: event.id,
          at: clock.now(),
        }),
      );
      const attemptedAt = new Date(clock.now().getTime() + 1000);
      const next = new Date(clock.now().getTime() + 61_000);
      await store.transaction((r) =>
        r.webhooks.deliveries.recordTry(
          { id, accountId: agent.accountId },
          { attemptedAt, statusCode: 503, error: null, durationMs: 40, status: 'PENDING', nextAttemptAt: next },
        ),
      );
      return { endpoint, event, id, attemptedAt, next };
    }

    it("lists an endpoint's deliveries with their tries, under the account's own event numbers", async () => {
      events.append({ accountId: randomUUID(), type: 'credits.low' });
      const { endpoint, event, id, attemptedAt, next } = await triedDelivery();
      assert.equal(event.id, '2');
      assert.deepEqual(await sut.deliveries(agent, endpoint.id), [
        {
          id,
          eventId: '1',
          status: 'PENDING',
          createdAt: clock.now().toISOString(),
          nextAttemptAt: next.toISOString(),
          completedAt: null,
          attempts: [{ attemptedAt: attemptedAt.toISOString(), statusCode: 503, error: null, durationMs: 40 }],
        },
      ]);
    });

    it('shows no next try once a delivery is done, and the log-wide id of an event without an account number', async () => {
      const { endpoint } = await create();
      const old = events.append({
        accountId: agent.accountId,
        type: 'rental.active',
        keyId: agent.keyId,
        unnumbered: true,
      });
      const id = randomUUID();
      const d = { id, endpointId: endpoint.id, accountId: agent.accountId, eventId: old.id, at: clock.now() };
      await store.read((r) => r.webhooks.deliveries.record(d));
      await store.transaction((r) =>
        r.webhooks.deliveries.recordTry(d, {
          attemptedAt: clock.now(),
          statusCode: 200,
          error: null,
          durationMs: 5,
          status: 'SUCCEEDED',
          nextAttemptAt: null,
        }),
      );
      const [shown] = await sut.deliveries(agent, endpoint.id);
      assert.equal(shown.eventId, old.id);
      assert.equal(shown.status, 'SUCCEEDED');
      assert.equal(shown.nextAttemptAt, null);
      assert.equal(shown.completedAt, clock.now().toISOString());
    });

    it('answers NOT_FOUND for the deliveries of an endpoint the viewer may not see', async () => {
      const { endpoint } = await create();
      assert.equal((await refusal(sut.deliveries(principal(agent.accountId), endpoint.id))).code, 'NOT_FOUND');
      assert.equal((await refusal(sut.deliveries(agent, randomUUID()))).code, 'NOT_FOUND');
    });

    it("redelivers now: pending with a fresh window, its try enqueued under the delivery's unique key", async () => {
      const { endpoint, id } = await triedDelivery();
      clock.advance(3600_000);
      await sut.redeliver(agent, endpoint.id, id);
      const row = await store.read((r) => r.webhooks.deliveries.one(endpoint.id, id));
      assert.equal(row?.status, 'PENDING');
      assert.equal(row?.firstAttemptAt, null, 'its 24 hours of retries start again');
      assert.equal(row?.nextAttemptAt?.getTime(), clock.now().getTime());
      assert.equal(row?.attempts, 1, 'its tries are kept');
      assert.deepEqual(jobs.named('webhooks.deliver'), [
        { name: 'webhooks.deliver', data: { deliveryId: id }, when: null, uniqueKey: id },
      ]);
    });

    it('counts redeliveries per key and per delivery; one past a limit reopens nothing', async () => {
      const { endpoint, id } = await triedDelivery();
      for (let i = 0; i < 5; i++) await sut.redeliver(agent, endpoint.id, id);
      assert.equal(limiter.hits.get(`webhook-redeliver:key:${agent.keyId}`), 5);
      assert.equal(limiter.hits.get(`webhook-redeliver:delivery:${id}`), 5);
      await store.transaction((r) =>
        r.webhooks.deliveries.recordTry(
          { id, accountId: agent.accountId },
          {
            attemptedAt: clock.now(),
            statusCode: 200,
            error: null,
            durationMs: 1,
            status: 'SUCCEEDED',
            nextAttemptAt: null,
          },
        ),
      );
      const err = await refusal(sut.redeliver(agent, endpoint.id, id));
      assert.equal(err.code, 'RATE_LIMITED');
      assert.match(err.message, /redeliveries of this delivery \(5 an hour\)/);
      assert.equal((await store.read((r) => r.webhooks.deliveries.one(endpoint.id, id)))?.status, 'SUCCEEDED');
    });

    it('answers NOT_FOUND for a delivery of another endpoint, counting nothing', async () => {
      const { id } = await triedDelivery();
      const { endpoint: other } = await create();
      assert.equal((await refusal(sut.redeliver(agent, other.id, id))).code, 'NOT_FOUND');
      assert.equal((await refusal(sut.redeliver(agent, other.id, randomUUID()))).code, 'NOT_FOUND');
      assert.equal(limiter.hits.size, 0);
      assert.deepEqual(jobs.queued, []);
    });
  });

  describe('signing', () => {
    it('signs "<id>.<timestamp>.<body>" with the bytes of the secret after whsec_ (Standard Webhooks)', () => {
      const key = randomBytes(24);
      const secret = `whsec_${key.toString('base64')}`;
      const headers = signedHeaders(secret, '42', 1_700_000_000, '{"a":1}');
      const expected = createHmac('sha256', key).update('42.1700000000.{"a":1}').digest('base64');
      assert.deepEqual(headers, {
        'webhook-id': '42',
        'webhook-timestamp': '1700000000',
        'webhook-signature': `v1,${expected}`,
      });
      assert.notEqual(
        signedHeaders(secret, '43', 1_700_000_000, '{"a":1}')['webhook-signature'],
        headers['webhook-signature'],
      );
    });

    it('makes a new secret of 24 random bytes each time', () => {
      const a = newSigningSecret();
      const b = newSigningSecret();
      assert.notEqual(a, b);
      for (const s of [a, b]) assert.equal(Buffer.from(s.slice('whsec_'.length), 'base64').length, 24);
    });
  });
});
