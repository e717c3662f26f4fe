import assert from 'node:assert/strict';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import type { EventType } from '../../src/modules/events/event-types.js';
import type { StoredEvent } from '../../src/modules/events/events.repository.js';
import type { Resolver } from '../../src/modules/webhooks/destination.js';
import {
  TRIES_IN_FLIGHT_PER_ACCOUNT,
  WebhookDeliveries,
  type WebhookDeliveryOptions,
} from '../../src/modules/webhooks/webhook-delivery.js';
import type { StoredEndpoint } from '../../src/modules/webhooks/webhook-endpoints.repository.js';
import { newSigningSecret } from '../../src/modules/webhooks/webhook-signing.js';
import { secretBinding } from '../../src/modules/webhooks/webhooks.service.js';
import { RecordingJobQueue, type MemoryJobRow } from '../fakes/store/job-queue.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';
import { MemoryWebhookEventLog } from '../fakes/store/webhook-events.js';
import { memoryWebhooksSeed } from '../fakes/store/webhooks.js';

const HOUR = 3600_000;
const FIRST_RETRY_MS = 30_000;

/** One try as the sender was asked to make it. */
interface Sent {
  url: string;
  body: string;
  headers: Record<string, string>;
}

describe('WebhookDeliveries (memory store)', () => {
  let store: ReturnType<typeof memoryStore>;
  let events: MemoryWebhookEventLog;
  let clock: ManualClock;
  let box: SecretBox;
  let jobs: RecordingJobQueue;
  let logged: string[];
  let sent: Sent[];
  /** What the receiver answers: a status, or an error thrown as the connection's. */
  let answer: () => number;
  let sut: WebhookDeliveries;
  let accountId: string;
  let keyId: string;

  const resolve: Resolver = async (host) => {
    if (host === 'private.example') return [{ address: '10.0.0.7', family: 4 }];
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  };
  const make = (opts: Partial<WebhookDeliveryOptions> = {}) =>
    new WebhookDeliveries(
      store,
      events,
      clock,
      createLogger('info', { write: (line: string) => void logged.push(line) }),
      jobs,
      box,
      {
        allowPrivateDestinations: false,
        firstRetryMs: FIRST_RETRY_MS,
        resolve,
        post: async (url, body, headers) => {
          sent.push({ url: url.href, body, headers });
          return answer();
        },
        ...opts,
      },
    );

  beforeEach(() => {
    store = memoryStore();
    events = new MemoryWebhookEventLog(store);
    // Ahead of the wall clock, as a delivery is due by the later of the two: the test's clock decides.
    clock = new ManualClock(new Date('2099-05-01T12:00:00.000Z'));
    box = new SecretBox(new Map([['k1', randomBytes(32)]]), 'k1');
    jobs = new RecordingJobQueue();
    logged = [];
    sent = [];
    answer = () => 204;
    sut = make();
    accountId = randomUUID();
    keyId = randomUUID();
  });

  /** An endpoint stored as the service makes it, and its signing secret. */
  async function endpoint(o: Partial<StoredEndpoint> = {}) {
    const id = o.id ?? randomUUID();
    const secret = newSigningSecret();
    const sealed = box.seal(secret, secretBinding(id));
    const e: StoredEndpoint = {
      id,
      accountId,
      keyId: null,
      makerKeyId: null,
      url: 'https://hooks.example/in',
      eventTypes: ['rental.active', 'credits.low'],
      secretSealed: sealed.ciphertext,
      secretKeyId: sealed.keyId,
      afterEventId: '0',
      createdAt: clock.now(),
      ...o,
    };
    await store.read((r) => r.webhooks.endpoints.insert(e));
    return { ...e, secret };
  }
  const event = (type: EventType = 'rental.active', o: { account?: string; key?: string | null } = {}) =>
    events.append({ accountId: o.account ?? accountId, type, keyId: o.key === undefined ? keyId : o.key });
  /** A delivery written as the dispatcher writes it, without its job. */
  async function delivery(endpointId: string, ev: StoredEvent, at = clock.now()) {
    const id = randomUUID();
    await store.read((r) => r.webhooks.deliveries.record({ id, endpointId, accountId, eventId: ev.id, at }));
    return id;
  }
  const deliveries = () =>
    store.tables.table<{ id: string; endpointId: string; eventId: string; status: string }>('webhook_deliveries').all();
  const row = (endpointId: string, id: string) => store.read((r) => r.webhooks.deliveries.one(endpointId, id));
  const tries = (id: string) => store.read((r) => r.webhooks.deliveries.attemptsOf([id]));
  const outbox = () => store.tables.table<MemoryJobRow>('agenda_jobs').all();
  const held = () => store.read((r) => r.webhooks.slots.held(accountId, new Date()));
  /** Holds one of the account's slots for another run of `deliveryId`, for an hour of wall time. */
  async function holdSlot(deliveryId: string) {
    await store.read((r) => r.webhooks.slots.make(accountId, TRIES_IN_FLIGHT_PER_ACCOUNT));
    const now = new Date();
    const t = { deliveryId, accountId, slots: TRIES_IN_FLIGHT_PER_ACCOUNT, now, until: new Date(now.getTime() + HOUR) };
    assert.equal(await store.transaction((r) => r.webhooks.slots.take(t)), 'taken');
  }

  describe('dispatch', () => {
    it('fans an event out once to each endpoint that asked for its type and was made before it', async () => {
      const first = event('rental.active');
      const second = event('rental.active');
      const a = await endpoint();
      const b = await endpoint({ eventTypes: ['rental.active'], afterEventId: first.id });
      await endpoint({ eventTypes: ['credits.low'] });
      await endpoint({ afterEventId: second.id });
      await endpoint({ accountId: randomUUID() });
      assert.equal(await sut.dispatch(), 3);
      assert.deepEqual(
        deliveries()
          .map((d) => [d.endpointId, d.eventId, d.status])
          .sort(),
        [
          [a.id, first.id, 'PENDING'],
          [a.id, second.id, 'PENDING'],
          [b.id, second.id, 'PENDING'],
        ].sort(),
      );
      assert.equal(events.cursor, BigInt(second.id));
    });

    it("gives an agent key's endpoint its own rentals' events and credits.low, never another key's", async () => {
      const mine = await endpoint({ keyId, makerKeyId: keyId });
      const account = await endpoint();
      const own = event('rental.active', { key: keyId });
      const other = event('rental.active', { key: randomUUID() });
      const low = event('credits.low', { key: null });
      assert.equal(await sut.dispatch(), 5);
      const to = (e: { id: string }) =>
        deliveries()
          .filter((d) => d.endpointId === e.id)
          .map((d) => d.eventId)
          .sort();
      assert.deepEqual(to(mine), [own.id, low.id].sort());
      assert.deepEqual(to(account), [own.id, other.id, low.id].sort());
    });

    it("sends nothing to a deleted endpoint, or to one whose maker's key is revoked", async () => {
      const gone = await endpoint();
      await store.read((r) => r.webhooks.endpoints.markDeleted(gone.id, clock.now()));
      const maker = randomUUID();
      memoryWebhooksSeed(store.tables).key({ id: maker, accountId, revokedAt: clock.now() });
      await endpoint({ makerKeyId: maker });
      event();
      assert.equal(await sut.dispatch(), 0);
      assert.deepEqual(deliveries(), []);
      assert.equal(events.cursor, 1n, 'the event is passed all the same');
    });

    it(`writes a job for at most ${TRIES_IN_FLIGHT_PER_ACCOUNT} of an account's deliveries in a pass; another account has its own`, async () => {
      for (let i = 0; i < 5; i++) await endpoint();
      const elsewhere = randomUUID();
      await endpoint({ accountId: elsewhere });
      event();
      event('rental.active', { account: elsewhere });
      assert.equal(await sut.dispatch(), 6);
      const jobbed = new Set(outbox().map((j) => (j.data as { deliveryId: string }).deliveryId));
      assert.equal(outbox().length, TRIES_IN_FLIGHT_PER_ACCOUNT + 1);
      assert.ok(
        outbox().every(
          (j) => j.name === 'webhooks.deliver' && j.uniqueKey === (j.data as { deliveryId: string }).deliveryId,
        ),
      );
      const ofAccount = store.tables
        .table<{ id: string; accountId: string }>('webhook_deliveries')
        .all()
        .filter((d) => d.accountId === accountId && jobbed.has(d.id));
      assert.equal(ofAccount.length, TRIES_IN_FLIGHT_PER_ACCOUNT);
      assert.equal(jobs.wakeUps, TRIES_IN_FLIGHT_PER_ACCOUNT + 1, 'each job woken once its batch committed');
    });

    it('counts the jobs of a pass across its batches', async () => {
      events = new MemoryWebhookEventLog(store, 1);
      sut = make();
      await endpoint();
      for (let i = 0; i < 5; i++) event();
      assert.equal(await sut.dispatch(), 5);
      assert.equal(events.batches, 5);
      assert.equal(outbox().length, TRIES_IN_FLIGHT_PER_ACCOUNT);
    });

    it('makes no delivery twice: a second pass finds nothing new', async () => {
      await endpoint();
      event();
      assert.equal(await sut.dispatch(), 1);
      events.cursor = 0n;
      assert.equal(await sut.dispatch(), 0, 'an event handed over again makes no second delivery');
      assert.equal(deliveries().length, 1);
      assert.equal(outbox().length, 1);
    });

    it('writes each delivery and its job once when the batch commit is lost and run again', async () => {
      await endpoint();
      await endpoint();
      event();
      store.loseNextCommits(1);
      const attempts = store.attempts;
      assert.equal(await sut.dispatch(), 2);
      assert.equal(store.attempts - attempts, 2, 'the batch ran twice');
      assert.equal(deliveries().length, 2);
      assert.equal(outbox().length, 2);
      assert.equal(jobs.wakeUps, 2);
    });
  });

  describe('deliver', () => {
    it('skips a delivery that does not exist or is done, sending nothing', async () => {
      const e = await endpoint();
      const id = await delivery(e.id, event());
      assert.equal(await sut.deliver(randomUUID()), 'skipped');
      assert.equal(await sut.deliver(id), 'succeeded');
      assert.equal(await sut.deliver(id), 'skipped');
      assert.equal(sent.length, 1);
    });

    it("sends a signed try: webhook-id is the account's event number, the body the event, the signature the secret's", async () => {
      event('credits.low', { account: randomUUID() });
      const e = await endpoint();
      const ev = event('rental.active');
      const id = await delivery(e.id, ev);
      assert.equal(await sut.deliver(id), 'succeeded');
      const [{ url, body, headers }] = sent;
      assert.equal(url, e.url);
      assert.deepEqual(JSON.parse(body), {
        id: '1',
        type: 'rental.active',
        createdAt: ev.createdAt.toISOString(),
        data: {},
      });
      assert.equal(headers['webhook-id'], '1');
      assert.equal(headers['webhook-timestamp'], String(Math.floor(clock.now().getTime() / 1000)));
      const key = Buffer.from(e.secret.slice('whsec_'.length), 'base64');
      const mac = createHmac('sha256', key).update(`1.${headers['webhook-timestamp']}.${body}`).digest('base64');
      assert.equal(headers['webhook-signature'], `v1,${mac}`);
      assert.equal(headers['user-agent'], 'gpu-rental-webhooks/1');
    });

    it('sends an event without an account number under its log-wide id', async () => {
      const e = await endpoint();
      event('credits.low', { account: randomUUID() });
      const ev = events.append({ accountId, type: 'rental.active', keyId, unnumbered: true });
      await sut.deliver(await delivery(e.id, ev));
      assert.equal(sent[0].headers['webhook-id'], ev.id);
      assert.equal(JSON.parse(sent[0].body).id, ev.id);
    });

    it('completes a delivery a receiver answers 2xx, recording the try and freeing its slot', async () => {
      const e = await endpoint();
      const id = await delivery(e.id, event());
      assert.equal(await sut.deliver(id), 'succeeded');
      const d = await row(e.id, id);
      assert.equal(d?.status, 'SUCCEEDED');
      assert.equal(d?.completedAt?.getTime(), clock.now().getTime());
      const [t] = await tries(id);
      assert.equal(t.statusCode, 204);
      assert.equal(t.error, null);
      assert.equal(await held(), 0);
      assert.deepEqual(jobs.named('webhooks.deliver'), [], 'nothing scheduled');
      assert.deepEqual(logged, []);
    });

    it("retries a 5xx after the first wait, scheduling it under the delivery's key, and logs it", async () => {
      answer = () => 503;
      const e = await endpoint();
      const id = await delivery(e.id, event());
      const before = Date.now();
      assert.equal(await sut.deliver(id), 'retrying');
      const d = await row(e.id, id);
      assert.equal(d?.status, 'PENDING');
      assert.equal(d?.nextAttemptAt?.getTime(), clock.now().getTime() + FIRST_RETRY_MS);
      const [t] = await tries(id);
      assert.deepEqual([t.statusCode, t.error], [503, null]);
      const [job] = jobs.named('webhooks.deliver');
      assert.equal(job.uniqueKey, id);
      assert.ok(job.when && job.when.getTime() >= before + FIRST_RETRY_MS, 'on the wall clock, after the wait');
      assert.equal(logged.length, 1);
      assert.match(logged[0], /webhook delivery failed/);
      assert.equal(await held(), 0);
    });

    it('waits as long as the time since the first try, at least the first wait and at most an hour', async () => {
      answer = () => 500;
      const e = await endpoint();
      const id = await delivery(e.id, event());
      const first = clock.now().getTime();
      const waits: number[] = [];
      for (const at of [0, 10 * 60_000, 2 * HOUR]) {
        clock.set(new Date(first + at));
        assert.equal(await sut.deliver(id), 'retrying');
        waits.push((await row(e.id, id))!.nextAttemptAt!.getTime() - clock.now().getTime());
      }
      assert.deepEqual(waits, [FIRST_RETRY_MS, 10 * 60_000, HOUR]);
      assert.equal((await row(e.id, id))?.firstAttemptAt?.getTime(), first);
    });

    it('gives up when the next try would be more than 24 hours after the first', async () => {
      answer = () => 500;
      const e = await endpoint();
      const id = await delivery(e.id, event());
      const first = clock.now().getTime();
      await sut.deliver(id);
      clock.set(new Date(first + 23 * HOUR));
      assert.equal(await sut.deliver(id), 'retrying', 'an hour more ends at the 24th');
      clock.set(new Date(first + 23 * HOUR + 1));
      assert.equal(await sut.deliver(id), 'failed');
      const d = await row(e.id, id);
      assert.equal(d?.status, 'FAILED');
      assert.equal(d?.nextAttemptAt, null);
      assert.equal(d?.attempts, 3);
      assert.equal(await sut.deliver(id), 'skipped');
    });

    it('takes a 3xx for a failed try (redirect not followed) and a lost connection for its error', async () => {
      const e = await endpoint();
      answer = () => 302;
      const redirected = await delivery(e.id, event());
      assert.equal(await sut.deliver(redirected), 'retrying');
      answer = () => {
        throw new Error('connect ECONNREFUSED 93.184.216.34:443');
      };
      const refused = await delivery(e.id, event());
      assert.equal(await sut.deliver(refused), 'retrying');
      assert.deepEqual(
        [...(await tries(redirected)), ...(await tries(refused))].map((t) => [t.statusCode, t.error]),
        [
          [302, 'redirect not followed'],
          [null, 'connect ECONNREFUSED 93.184.216.34:443'],
        ],
      );
    });

    it('refuses, at the try, a destination that now resolves only to private addresses', async () => {
      // The real sender: it vets the address before any connection, so none is opened.
      sut = make({ post: undefined });
      const e = await endpoint({ url: 'https://private.example/in' });
      const id = await delivery(e.id, event());
      assert.equal(await sut.deliver(id), 'retrying');
      const [t] = await tries(id);
      assert.equal(t.statusCode, null);
      assert.match(t.error ?? '', /^refused: private\.example has no address webhooks may be sent to/);
    });

    it('closes without a try a delivery whose endpoint was deleted, or whose event it may no longer see', async () => {
      const e = await endpoint();
      const toDeleted = await delivery(e.id, event());
      await store.read((r) => r.webhooks.endpoints.markDeleted(e.id, clock.now()));
      const agents = await endpoint({ keyId, makerKeyId: keyId });
      const notTheirs = await delivery(agents.id, event('rental.active', { key: randomUUID() }));
      for (const [endpointId, id] of [
        [e.id, toDeleted],
        [agents.id, notTheirs],
      ]) {
        assert.equal(await sut.deliver(id), 'skipped');
        const d = await row(endpointId, id);
        assert.equal(d?.status, 'FAILED');
        assert.equal(d?.attempts, 0);
      }
      assert.deepEqual(sent, []);
      assert.equal(await held(), 0, 'their slots are freed');
    });

    it('defers a try while every slot of its account is held; another account is not held up', async () => {
      const e = await endpoint();
      for (let i = 0; i < TRIES_IN_FLIGHT_PER_ACCOUNT; i++) await holdSlot(await delivery(e.id, event()));
      const waiting = await delivery(e.id, event());
      assert.equal(await sut.deliver(waiting), 'deferred');
      assert.equal((await row(e.id, waiting))?.status, 'PENDING');
      accountId = randomUUID();
      const other = await endpoint();
      assert.equal(await sut.deliver(await delivery(other.id, event())), 'succeeded');
      assert.equal(sent.length, 1);
    });

    it('skips a delivery another run of its job is trying', async () => {
      const e = await endpoint();
      const id = await delivery(e.id, event());
      await holdSlot(id);
      assert.equal(await sut.deliver(id), 'skipped');
      assert.deepEqual(sent, []);
    });

    it("hands the finished try's slot to the account's longest waiting due deliveries", async () => {
      const e = await endpoint();
      const first = await delivery(e.id, event());
      const older = await delivery(e.id, event(), new Date(clock.now().getTime() - 5000));
      const later = await delivery(e.id, event(), new Date(clock.now().getTime() + HOUR));
      assert.equal(await sut.deliver(first), 'succeeded');
      assert.deepEqual(
        jobs.named('webhooks.deliver').map((j) => [j.data, j.when]),
        [[{ deliveryId: older }, null]],
      );
      assert.ok(!jobs.queued.some((j) => (j.data as { deliveryId: string }).deliveryId === later));
    });

    it('records one try when its commit is lost and run again', async () => {
      const e = await endpoint();
      const id = await delivery(e.id, event());
      const post = async () => {
        store.loseNextCommits(1);
        return 200;
      };
      sut = make({ post });
      assert.equal(await sut.deliver(id), 'succeeded');
      assert.equal((await tries(id)).length, 1);
      assert.equal((await row(e.id, id))?.attempts, 1);
    });
  });

  describe('revive', () => {
    it("enqueues deliveries overdue by a minute, at most the account's free slots, and none of the recent ones", async () => {
      const e = await endpoint();
      const longAgo = new Date(clock.now().getTime() - 2 * 60_000);
      const overdue = [];
      for (let i = 0; i < 4; i++) overdue.push(await delivery(e.id, event(), new Date(longAgo.getTime() + i)));
      await delivery(e.id, event(), new Date(clock.now().getTime() - 30_000));
      await holdSlot(overdue[3]);
      assert.equal(await sut.revive(), TRIES_IN_FLIGHT_PER_ACCOUNT - 1);
      assert.deepEqual(
        jobs.named('webhooks.deliver').map((j) => [(j.data as { deliveryId: string }).deliveryId, j.uniqueKey]),
        overdue.slice(0, 2).map((id) => [id, id]),
      );
      assert.equal(await sut.revive(), 2, 'a job still waiting is not doubled');
      assert.equal(jobs.named('webhooks.deliver').length, 2);
    });
  });
});
