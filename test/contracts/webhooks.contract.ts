import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { DeliveryOfAccount, TryOutcome } from '../../src/modules/webhooks/webhook-deliveries.repository.js';
import type { StoredEndpoint } from '../../src/modules/webhooks/webhook-endpoints.repository.js';
import type { TryToTake } from '../../src/modules/webhooks/webhook-slots.repository.js';
import type { WebhooksRepository } from '../../src/modules/webhooks/webhooks.repository.js';

type WebhooksStore = Store<{ webhooks: WebhooksRepository }>;

/** Writes the `api_keys` rows (the accounts aggregate's) that the webhooks read: who made an endpoint, and whether it is revoked. */
export interface WebhookKeySeed {
  /** A live key of the account (made with the account if need be); answers its id. */
  key(accountId: string): Promise<string>;
  revoke(keyId: string, at: Date): Promise<void>;
}

/** A time long past: deliveries due then are overdue for no one else's reads of a shared database. */
const T0 = new Date('2001-02-03T04:05:06.789Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const MINUTE = 60_000;

const sameBytes = (a: Buffer, b: Buffer) => Buffer.isBuffer(a) && a.equals(b);

/**
 * What every store's webhooks repository does, run on MariaDB (test/store/) and on the memory
 * store (test/unit/). Each test works in accounts of its own; what it leaves live (endpoints,
 * pending deliveries) is deleted or closed after it, so no dispatcher of another test file sends
 * to it or starts from it.
 */
export function webhooksContract(
  kind: string,
  make: () => Promise<{ store: WebhooksStore; keys: WebhookKeySeed }>,
): void {
  describe(`webhooks repository (${kind})`, () => {
    let store: WebhooksStore;
    let keys: WebhookKeySeed;
    let accountId: string;
    let made: string[];
    let recorded: DeliveryOfAccount[];

    before(async () => ({ store, keys } = await make()));
    beforeEach(() => {
      accountId = randomUUID();
      made = [];
      recorded = [];
    });
    afterEach(async () => {
      await store.read(async (r) => {
        for (const id of made) await r.webhooks.endpoints.markDeleted(id, T0);
      });
      await store.transaction(async (r) => {
        for (const d of recorded) await r.webhooks.deliveries.close(d, T0);
      });
    });

    const endpoint = (over: Partial<StoredEndpoint> = {}): StoredEndpoint => ({
      id: randomUUID(),
      accountId,
      keyId: null,
      makerKeyId: null,
      url: 'https://hooks.example/in?x=1',
      eventTypes: ['rental.active', 'credits.low'],
      secretSealed: randomBytes(45),
      secretKeyId: 'k1',
      afterEventId: '5',
      createdAt: T0,
      ...over,
    });
    const insert = async (over: Partial<StoredEndpoint> = {}) => {
      const e = endpoint(over);
      await store.read((r) => r.webhooks.endpoints.insert(e));
      made.push(e.id);
      return e;
    };
    const owner = () => ({ kind: 'OWNER' as const, accountId });
    const agent = (keyId: string) => ({ kind: 'AGENT' as const, accountId, keyId });
    const delivery = async (over: { endpointId?: string; eventId?: string; at?: Date; account?: string } = {}) => {
      const d = {
        id: randomUUID(),
        endpointId: over.endpointId ?? randomUUID(),
        accountId: over.account ?? accountId,
        eventId: over.eventId ?? String(1000 + Math.floor(Math.random() * 1e9)),
        at: over.at ?? T0,
      };
      assert.equal(await store.read((r) => r.webhooks.deliveries.record(d)), true);
      recorded.push({ id: d.id, accountId: d.accountId });
      return d;
    };
    const outcome = (over: Partial<TryOutcome> = {}): TryOutcome => ({
      attemptedAt: at(MINUTE),
      statusCode: 500,
      error: null,
      durationMs: 12,
      status: 'PENDING',
      nextAttemptAt: at(2 * MINUTE),
      ...over,
    });
    const tryOf = (d: { id: string; accountId: string }, over: Partial<TryToTake> = {}): TryToTake => ({
      deliveryId: d.id,
      accountId: d.accountId,
      slots: 2,
      now: at(0),
      until: at(40_000),
      ...over,
    });
    const take = (t: TryToTake) => store.transaction((r) => r.webhooks.slots.take(t));
    const held = (now = at(0)) => store.read((r) => r.webhooks.slots.held(accountId, now));

    describe('endpoints', () => {
      it('stores an endpoint and shows it to its key and its account holder, no one else', async () => {
        const key = await keys.key(accountId);
        const e = await insert({ keyId: key, makerKeyId: key });
        const mine = await store.read((r) => r.webhooks.endpoints.visibleOne(agent(key), e.id));
        assert.ok(mine);
        assert.equal(mine.url, e.url);
        assert.deepEqual(mine.eventTypes, ['rental.active', 'credits.low']);
        assert.ok(sameBytes(mine.secretSealed, e.secretSealed), 'the sealed secret comes back as the same bytes');
        assert.equal(mine.secretKeyId, 'k1');
        assert.equal(mine.afterEventId, '5');
        assert.equal(mine.createdAt.getTime(), T0.getTime());
        assert.equal(mine.keyId, key);
        assert.equal(mine.makerKeyId, key);
        assert.equal(mine.makerRevoked, false);
        assert.equal((await store.read((r) => r.webhooks.endpoints.visibleOne(owner(), e.id)))?.id, e.id);
        assert.equal(await store.read((r) => r.webhooks.endpoints.visibleOne(agent(randomUUID()), e.id)), null);
        const stranger = { kind: 'OWNER' as const, accountId: randomUUID() };
        assert.equal(await store.read((r) => r.webhooks.endpoints.visibleOne(stranger, e.id)), null);
      });

      it('lists live endpoints newest first, then by id; an agent key sees only its own', async () => {
        const key = await keys.key(accountId);
        const newest = await insert({ createdAt: at(2000) });
        const b = await insert({ createdAt: at(1000), keyId: key, makerKeyId: key });
        const c = await insert({ createdAt: at(1000) });
        const tied = [b.id, c.id].sort();
        const listed = await store.read((r) => r.webhooks.endpoints.visible(owner()));
        assert.deepEqual(
          listed.map((e) => e.id),
          [newest.id, ...tied],
        );
        assert.deepEqual(
          (await store.read((r) => r.webhooks.endpoints.visible(agent(key)))).map((e) => e.id),
          [b.id],
        );
      });

      it('a deleted endpoint is neither shown nor receiving, and deleting it again changes nothing', async () => {
        const e = await insert();
        const kept = await insert();
        await store.read((r) => r.webhooks.endpoints.markDeleted(e.id, at(5)));
        await store.read((r) => r.webhooks.endpoints.markDeleted(e.id, at(9)));
        assert.equal(await store.read((r) => r.webhooks.endpoints.visibleOne(owner(), e.id)), null);
        assert.deepEqual(
          (await store.read((r) => r.webhooks.endpoints.visible(owner()))).map((x) => x.id),
          [kept.id],
        );
        assert.deepEqual(
          (await store.read((r) => r.webhooks.endpoints.receiving([accountId]))).map((x) => x.id),
          [kept.id],
        );
      });

      it('counts the live endpoints a key made, in the transaction that locks them', async () => {
        const key = await keys.key(accountId);
        await insert({ makerKeyId: key });
        const gone = await insert({ makerKeyId: key });
        await insert({ makerKeyId: await keys.key(accountId) });
        await store.read((r) => r.webhooks.endpoints.markDeleted(gone.id, at(1)));
        assert.equal(await store.transaction((r) => r.webhooks.endpoints.lockMadeBy(key)), 1);
        assert.equal(await store.transaction((r) => r.webhooks.endpoints.lockMadeBy(randomUUID())), 0);
      });

      it('an endpoint stops when the key that made it is revoked: listed as such, no longer receiving', async () => {
        const maker = await keys.key(accountId);
        const e = await insert({ makerKeyId: maker });
        const other = await insert({ makerKeyId: await keys.key(accountId) });
        await keys.revoke(maker, at(1));
        const listed = await store.read((r) => r.webhooks.endpoints.visible(owner()));
        assert.deepEqual(
          listed.map((x) => [x.id, x.makerRevoked]).sort(),
          [
            [e.id, true],
            [other.id, false],
          ].sort(),
        );
        assert.equal((await store.read((r) => r.webhooks.endpoints.visibleOne(owner(), e.id)))?.makerRevoked, true);
        assert.deepEqual(
          (await store.read((r) => r.webhooks.endpoints.receiving([accountId]))).map((x) => x.id),
          [other.id],
        );
      });

      it('without a maker, an endpoint follows the key it belongs to; with neither (or an unknown maker) it receives', async () => {
        const key = await keys.key(accountId);
        const agentOwned = await insert({ keyId: key });
        const accountOwned = await insert();
        const unknownMaker = await insert({ makerKeyId: randomUUID() });
        await keys.revoke(key, at(1));
        const receiving = await store.read((r) => r.webhooks.endpoints.receiving([accountId]));
        assert.deepEqual(receiving.map((x) => x.id).sort(), [accountOwned.id, unknownMaker.id].sort());
        assert.equal(
          (await store.read((r) => r.webhooks.endpoints.visibleOne(owner(), agentOwned.id)))?.makerRevoked,
          true,
        );
      });

      it('reads the receiving endpoints of the accounts asked for only', async () => {
        const mine = await insert();
        const otherAccount = randomUUID();
        const theirs = await insert({ accountId: otherAccount });
        await insert({ accountId: randomUUID() });
        const both = await store.read((r) => r.webhooks.endpoints.receiving([accountId, otherAccount]));
        assert.deepEqual(both.map((e) => e.id).sort(), [mine.id, theirs.id].sort());
        assert.ok(sameBytes(both.find((e) => e.id === mine.id)!.secretSealed, mine.secretSealed));
        assert.deepEqual(await store.read((r) => r.webhooks.endpoints.receiving([])), []);
      });

      it('starts a dispatcher at the smallest afterEventId of the live endpoints', async () => {
        // In a transaction rolled back: an endpoint starting at 0 is never seen by another test's dispatcher.
        const seen = await store.transaction(async (r, tx) => {
          tx.rollBackAtEnd();
          const e = endpoint({ afterEventId: '0' });
          await r.webhooks.endpoints.insert(e);
          await r.webhooks.endpoints.insert(endpoint({ afterEventId: '7' }));
          return r.webhooks.endpoints.earliestStart();
        });
        assert.equal(seen, '0');
      });
    });

    describe('deliveries', () => {
      it('records one delivery per endpoint and event, pending and due at once', async () => {
        const e = await insert();
        const d = await delivery({ endpointId: e.id, eventId: '77', at: at(3) });
        const again = { id: randomUUID(), endpointId: e.id, accountId, eventId: '77', at: at(4) };
        assert.equal(await store.read((r) => r.webhooks.deliveries.record(again)), false);
        assert.equal(await store.read((r) => r.webhooks.deliveries.record({ ...d, eventId: '78' })), false);
        const [only] = await store.read((r) => r.webhooks.deliveries.ofEndpoint(e.id, 10));
        assert.deepEqual(only, {
          id: d.id,
          endpointId: e.id,
          accountId,
          eventId: '77',
          status: 'PENDING',
          attempts: 0,
          firstAttemptAt: null,
          nextAttemptAt: at(3),
          createdAt: at(3),
          completedAt: null,
        });
      });

      it("answers a pending delivery's account, and null once it is done or when there is none", async () => {
        const d = await delivery();
        assert.equal(await store.read((r) => r.webhooks.deliveries.pendingAccount(d.id)), accountId);
        await store.transaction((r) =>
          r.webhooks.deliveries.recordTry(d, outcome({ status: 'SUCCEEDED', nextAttemptAt: null })),
        );
        assert.equal(await store.read((r) => r.webhooks.deliveries.pendingAccount(d.id)), null);
        assert.equal(await store.read((r) => r.webhooks.deliveries.pendingAccount(randomUUID())), null);
      });

      it('a target is the delivery with its endpoint, not receiving once the endpoint is deleted', async () => {
        const e = await insert();
        const d = await delivery({ endpointId: e.id, eventId: '9' });
        const found = await store.read((r) => r.webhooks.deliveries.target(d.id));
        assert.ok(found);
        assert.equal(found.delivery.id, d.id);
        assert.equal(found.delivery.eventId, '9');
        assert.equal(found.endpoint.id, e.id);
        assert.ok(sameBytes(found.endpoint.secretSealed, e.secretSealed));
        assert.equal(found.receiving, true);
        await store.read((r) => r.webhooks.endpoints.markDeleted(e.id, at(1)));
        assert.equal((await store.read((r) => r.webhooks.deliveries.target(d.id)))?.receiving, false);
        assert.equal(await store.read((r) => r.webhooks.deliveries.target(randomUUID())), null);
        const orphan = await delivery({ endpointId: randomUUID() });
        assert.equal(await store.read((r) => r.webhooks.deliveries.target(orphan.id)), null);
      });

      it('a failed try leaves it pending until its next one; a later success completes it, keeping the first try', async () => {
        const e = await insert();
        const d = await delivery({ endpointId: e.id });
        await store.transaction((r) => r.webhooks.deliveries.recordTry(d, outcome()));
        let [row] = await store.read((r) => r.webhooks.deliveries.ofEndpoint(e.id, 1));
        assert.equal(row.status, 'PENDING');
        assert.equal(row.attempts, 1);
        assert.equal(row.firstAttemptAt?.getTime(), at(MINUTE).getTime());
        assert.equal(row.nextAttemptAt?.getTime(), at(2 * MINUTE).getTime());
        assert.equal(row.completedAt, null);
        await store.transaction((r) =>
          r.webhooks.deliveries.recordTry(
            d,
            outcome({ attemptedAt: at(3 * MINUTE), statusCode: 204, status: 'SUCCEEDED', nextAttemptAt: null }),
          ),
        );
        [row] = await store.read((r) => r.webhooks.deliveries.ofEndpoint(e.id, 1));
        assert.equal(row.status, 'SUCCEEDED');
        assert.equal(row.attempts, 2);
        assert.equal(row.firstAttemptAt?.getTime(), at(MINUTE).getTime(), 'the first try is kept');
        assert.equal(row.nextAttemptAt, null);
        assert.equal(row.completedAt?.getTime(), at(3 * MINUTE).getTime());
      });

      it('lists tries oldest first, with their outcome, errors kept to 300 characters', async () => {
        const d = await delivery();
        const other = await delivery();
        const long = 'x'.repeat(301);
        await store.transaction((r) => r.webhooks.deliveries.recordTry(d, outcome({ statusCode: null, error: long })));
        await store.transaction((r) => r.webhooks.deliveries.recordTry(other, outcome({ statusCode: 502 })));
        await store.transaction((r) =>
          r.webhooks.deliveries.recordTry(
            d,
            outcome({ attemptedAt: at(2 * MINUTE), statusCode: 200, status: 'SUCCEEDED', durationMs: 7 }),
          ),
        );
        const tries = await store.read((r) => r.webhooks.deliveries.attemptsOf([d.id, other.id]));
        assert.deepEqual(tries, [
          { deliveryId: d.id, attemptedAt: at(MINUTE), statusCode: null, error: 'x'.repeat(300), durationMs: 12 },
          { deliveryId: other.id, attemptedAt: at(MINUTE), statusCode: 502, error: null, durationMs: 12 },
          { deliveryId: d.id, attemptedAt: at(2 * MINUTE), statusCode: 200, error: null, durationMs: 7 },
        ]);
        assert.deepEqual(await store.read((r) => r.webhooks.deliveries.attemptsOf([])), []);
      });

      it('closing fails a pending delivery without a try, and leaves a finished one as it was', async () => {
        const e = await insert();
        const pending = await delivery({ endpointId: e.id, eventId: '2' });
        const done = await delivery({ endpointId: e.id, eventId: '1' });
        await store.transaction((r) =>
          r.webhooks.deliveries.recordTry(done, outcome({ status: 'SUCCEEDED', nextAttemptAt: null })),
        );
        await store.transaction(async (r) => {
          await r.webhooks.deliveries.close(pending, at(5));
          await r.webhooks.deliveries.close(done, at(5));
        });
        const [closed, finished] = await store.read((r) => r.webhooks.deliveries.ofEndpoint(e.id, 10));
        assert.equal(closed.id, pending.id);
        assert.equal(closed.status, 'FAILED');
        assert.equal(closed.attempts, 0);
        assert.equal(closed.completedAt?.getTime(), at(5).getTime());
        assert.equal(closed.nextAttemptAt, null);
        assert.equal(finished.status, 'SUCCEEDED');
        assert.equal(finished.completedAt?.getTime(), at(MINUTE).getTime());
        assert.deepEqual(await store.read((r) => r.webhooks.deliveries.attemptsOf([pending.id])), []);
      });

      it('reopening makes a finished delivery pending again with a fresh window, its tries kept', async () => {
        const e = await insert();
        const d = await delivery({ endpointId: e.id });
        await store.transaction((r) =>
          r.webhooks.deliveries.recordTry(d, outcome({ status: 'FAILED', nextAttemptAt: null })),
        );
        await store.read((r) => r.webhooks.deliveries.reopen(d.id, at(10 * MINUTE)));
        const [row] = await store.read((r) => r.webhooks.deliveries.ofEndpoint(e.id, 1));
        assert.equal(row.status, 'PENDING');
        assert.equal(row.firstAttemptAt, null);
        assert.equal(row.completedAt, null);
        assert.equal(row.nextAttemptAt?.getTime(), at(10 * MINUTE).getTime());
        assert.equal(row.attempts, 1);
        assert.equal(await store.read((r) => r.webhooks.deliveries.pendingAccount(d.id)), accountId);
      });

      it("lists an endpoint's deliveries newest event first, at most the limit; another endpoint's is not its own", async () => {
        const e = await insert();
        // Numerically, not as text: 10 is newer than 9.
        const nine = await delivery({ endpointId: e.id, eventId: '9' });
        const ten = await delivery({ endpointId: e.id, eventId: '10' });
        const eleven = await delivery({ endpointId: e.id, eventId: '11' });
        const elsewhere = await delivery({ eventId: '12' });
        const two = await store.read((r) => r.webhooks.deliveries.ofEndpoint(e.id, 2));
        assert.deepEqual(
          two.map((d) => d.id),
          [eleven.id, ten.id],
        );
        assert.equal((await store.read((r) => r.webhooks.deliveries.one(e.id, nine.id)))?.eventId, '9');
        assert.equal(await store.read((r) => r.webhooks.deliveries.one(e.id, elsewhere.id)), null);
        assert.equal(await store.read((r) => r.webhooks.deliveries.one(e.id, randomUUID())), null);
      });

      it('names each account with an overdue delivery once, in id order after the one given, at most the limit', async () => {
        const prefix = randomUUID().slice(0, 30);
        const [a, b, c, d] = ['-a', '-b', '-c', '-d'].map((s) => prefix + s);
        await delivery({ account: a, at: at(0) });
        await delivery({ account: a, at: at(1) });
        await delivery({ account: b, at: at(2) });
        await delivery({ account: c, at: at(10 * MINUTE) });
        const finished = await delivery({ account: d, at: at(0) });
        await store.transaction((r) =>
          r.webhooks.deliveries.recordTry(finished, outcome({ status: 'SUCCEEDED', nextAttemptAt: null })),
        );
        const overdue = (after: string, limit: number, before = at(MINUTE)) =>
          store.read((r) => r.webhooks.deliveries.accountsWithOverdue(before, after, limit));
        assert.deepEqual(await overdue(prefix, 2), [a, b]);
        assert.deepEqual(await overdue(a, 1), [b]);
        assert.deepEqual(await overdue(prefix, 1, at(2)), [a], 'due strictly before the time');
        assert.deepEqual(await overdue(prefix, 3, at(11 * MINUTE)), [a, b, c]);
      });

      it('answers the due deliveries no run holds, longest waiting first, at most the limit', async () => {
        const late = await delivery({ at: at(3000) });
        const early = await delivery({ at: at(1000) });
        const claimed = await delivery({ at: at(500) });
        await delivery({ at: at(9000) });
        await store.read((r) => r.webhooks.slots.make(accountId, 2));
        assert.equal(await take(tryOf(claimed, { until: at(60_000) })), 'taken');
        const due = (dueBy: Date, wallNow: Date, limit = 10) =>
          store.read((r) => r.webhooks.deliveries.dueOf(accountId, dueBy, wallNow, limit));
        assert.deepEqual(await due(at(3000), at(0)), [early.id, late.id], 'due by the time given, unclaimed');
        assert.deepEqual(await due(at(3000), at(0), 1), [early.id]);
        assert.deepEqual(await due(at(3000), at(60_001)), [claimed.id, early.id, late.id], 'a lapsed claim');
        assert.deepEqual(await store.read((r) => r.webhooks.deliveries.dueOf(randomUUID(), at(3000), at(0), 5)), []);
      });
    });

    describe('slots', () => {
      it("finds no slot before the account's slots are made; then a try takes the lowest free one", async () => {
        const d = await delivery();
        assert.equal(await take(tryOf(d)), 'no-slot');
        await store.read((r) => r.webhooks.slots.make(accountId, 2));
        assert.equal(await take(tryOf(d)), 'taken');
        assert.equal(await held(), 1);
        assert.equal(await held(at(40_000)), 1, 'held up to its end');
        assert.equal(await held(at(40_001)), 0);
      });

      it('a second run of the same delivery is busy, and gives back the slots the delivery holds', async () => {
        const d = await delivery();
        await store.read((r) => r.webhooks.slots.make(accountId, 2));
        assert.equal(await take(tryOf(d)), 'taken');
        assert.equal(await take(tryOf(d, { now: at(1000) })), 'busy');
        // Slots are freed by delivery: the first run's goes with the one the busy run took.
        assert.equal(await held(), 0);
        assert.equal(await take(tryOf(d, { now: at(40_001), until: at(80_000) })), 'taken', 'once the claim lapsed');
      });

      it("the account's slots cap its tries in flight; a lapsed hold is free again", async () => {
        const [a, b, c] = [await delivery(), await delivery(), await delivery()];
        await store.read((r) => r.webhooks.slots.make(accountId, 2));
        assert.equal(await take(tryOf(a)), 'taken');
        assert.equal(await take(tryOf(b)), 'taken');
        assert.equal(await take(tryOf(c)), 'no-slot');
        assert.equal(await held(), 2);
        const later = { now: at(40_001), until: at(90_000) };
        assert.equal(await take(tryOf(c, later)), 'taken', 'in the lowest lapsed slot');
        const e = await delivery();
        assert.equal(
          await take(tryOf(e, { ...later, slots: 1 })),
          'no-slot',
          'a lowered count leaves the higher slots out',
        );
        assert.equal(await take(tryOf(e, later)), 'taken');
      });

      it('a delivery that is done is busy', async () => {
        const d = await delivery();
        await store.transaction((r) =>
          r.webhooks.deliveries.recordTry(d, outcome({ status: 'SUCCEEDED', nextAttemptAt: null })),
        );
        await store.read((r) => r.webhooks.slots.make(accountId, 1));
        assert.equal(await take(tryOf(d, { slots: 1 })), 'busy');
        assert.equal(await held(), 0);
        assert.equal(await take(tryOf({ id: randomUUID(), accountId }, { slots: 1 })), 'busy', 'and one that is not');
      });

      it('recording a try, or closing the delivery, frees the slot it held and its claim', async () => {
        const [a, b] = [await delivery(), await delivery()];
        await store.read((r) => r.webhooks.slots.make(accountId, 2));
        await take(tryOf(a));
        await take(tryOf(b));
        await store.transaction((r) => r.webhooks.deliveries.recordTry(a, outcome()));
        assert.equal(await held(), 1);
        assert.deepEqual(
          await store.read((r) => r.webhooks.deliveries.dueOf(accountId, at(2 * MINUTE), at(0), 5)),
          [a.id],
          'pending again, due at its next try and claimed by no run',
        );
        await store.transaction((r) => r.webhooks.deliveries.close(b, at(1)));
        assert.equal(await held(), 0);
      });

      it('makes the slots that are missing, once each', async () => {
        const ds = [await delivery(), await delivery(), await delivery()];
        await store.read((r) => r.webhooks.slots.make(accountId, 1));
        await store.read((r) => r.webhooks.slots.make(accountId, 1));
        assert.equal(await take(tryOf(ds[0], { slots: 3 })), 'taken');
        assert.equal(await take(tryOf(ds[1], { slots: 3 })), 'no-slot');
        await store.read((r) => r.webhooks.slots.make(accountId, 3));
        assert.equal(await take(tryOf(ds[1], { slots: 3 })), 'taken');
        assert.equal(await take(tryOf(ds[2], { slots: 3 })), 'taken');
        assert.equal(await held(), 3);
      });

      it('refuses a slot count outside 1 to 16', async () => {
        const d = await delivery();
        for (const slots of [0, 17]) await assert.rejects(take(tryOf(d, { slots })), /delivery slots must be 1 to 16/);
        await store.read((r) => r.webhooks.slots.make(accountId, 16));
        assert.equal(await take(tryOf(d, { slots: 16 })), 'taken');
      });

      it('a take rolled back leaves the slot and the delivery free', async () => {
        const d = await delivery();
        await store.read((r) => r.webhooks.slots.make(accountId, 1));
        const got = await store.transaction(async (r, tx) => {
          tx.rollBackAtEnd();
          return r.webhooks.slots.take(tryOf(d, { slots: 1 }));
        });
        assert.equal(got, 'taken');
        assert.equal(await held(), 0);
        assert.equal(await take(tryOf(d, { slots: 1 })), 'taken');
      });
    });
  });
}
