import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../src/logger.js';
import {
  DurableCursor,
  EventTail,
  type EventHandler,
  type EventTailOptions,
} from '../../src/modules/events/event-tail.js';
import type { NewEvent, StoredEvent } from '../../src/modules/events/events.repository.js';
import { memoryStore, type UnitRepositories } from '../fakes/store/memory-repositories.js';
import { memoryNotifications } from '../fakes/store/telegram.js';

/**
 * The one consumer of the event log (events/event-tail.ts) with a durable cursor on the memory
 * store: its batch writes go through the repositories of the transaction that moves the cursor,
 * and commit, roll back or run again with it. (test/api/event-tail.test.ts runs it on MariaDB.)
 */
describe('event tail on the memory store', () => {
  let store: ReturnType<typeof memoryStore>;
  const accountId = randomUUID();
  beforeEach(() => (store = memoryStore()));

  const event = (): NewEvent => ({
    type: 'credits.low',
    accountId,
    keyId: null,
    rentalId: null,
    data: { n: randomUUID() },
    at: new Date(),
  });
  const append = (n = 1) =>
    store.transaction(async (r) => {
      for (let i = 0; i < n; i++) await r.events.append(event());
    });
  const logged = () => store.read((r) => r.events.tail('0', [], 1000));

  function tailOf(options: Partial<EventTailOptions> = {}, name = 'consumer', start = async () => '0') {
    return new EventTail(store, new DurableCursor(store, name, start), { name, batch: 2, ...options });
  }

  /** A handler that records a notification per event in the cursor's transaction, and the events once committed. */
  function recorder(seen: StoredEvent[], committed = { after: 0 }): EventHandler<UnitRepositories> {
    return async (events) => async (r) => {
      for (const e of events)
        await r.telegram.notifications.record(
          { key: `event:${e.id}`, kind: e.type, accountId: e.accountId, chatId: 1, text: e.id },
          new Date(),
        );
      return () => {
        committed.after++;
        seen.push(...events);
      };
    };
  }

  it('starts where its start says on the first pass, and hands on each later event once, a batch at a time', async () => {
    await append(2);
    const start = (await logged())[1].id;
    await append(3);
    const seen: StoredEvent[] = [];
    const tail = tailOf({}, 'first', async () => start);
    assert.equal(await tail.drain(recorder(seen)), 3);
    assert.equal(await tail.drain(recorder(seen)), 0);
    const later = (await logged()).slice(2).map((e) => e.id);
    assert.deepEqual(
      seen.map((e) => e.id),
      later,
    );
    assert.deepEqual(
      memoryNotifications(store.tables).map((n) => n.text),
      later,
      'the writes committed with the moves',
    );
    const cursor = await store.read((r) => r.events.readCursor('first'));
    assert.equal(cursor?.position.lastId, later[2]);
  });

  it('rolls the writes back with the move when they fail, and tries the batch again after its wait', async () => {
    let now = 1_000;
    const tail = tailOf({ retry: { firstMs: 100, maxMs: 100, tries: 5 }, now: () => now });
    await tail.drain(async () => async () => undefined);
    await append(2);
    const failing: EventHandler<UnitRepositories> = async (events) => async (r) => {
      await recorder([])(events).then((w) => w(r));
      throw new Error('the writes failed');
    };
    assert.equal(await tail.drain(failing), 0);
    assert.deepEqual(memoryNotifications(store.tables), [], 'nothing of the batch was written');
    assert.equal((await store.read((r) => r.events.readCursor('consumer')))?.position.lastId, '0');
    const seen: StoredEvent[] = [];
    assert.equal(await tail.drain(recorder(seen)), 0, 'nothing is read during the wait');
    now += 100;
    assert.equal(await tail.drain(recorder(seen)), 2);
    assert.equal(memoryNotifications(store.tables).length, 2);
  });

  it('runs a transaction lost at its commit again: the writes land once, the work after commit once', async () => {
    const tail = tailOf();
    await tail.drain(async () => async () => undefined);
    await append(2);
    const seen: StoredEvent[] = [];
    const committed = { after: 0 };
    store.loseNextCommits(2);
    assert.equal(await tail.drain(recorder(seen, committed)), 2);
    assert.equal(memoryNotifications(store.tables).length, 2);
    assert.equal(committed.after, 1);
    assert.equal(seen.length, 2);
  });

  it('hands each event to one of two tails of the same name', async () => {
    const a = tailOf({}, 'shared');
    const b = tailOf({}, 'shared');
    await append(7);
    const byA: StoredEvent[] = [];
    const byB: StoredEvent[] = [];
    // The other's move lands between a read and a claim: the claim finds the cursor moved and reads again.
    await Promise.all([a.drain(recorder(byA)), b.drain(recorder(byB)), a.drain(recorder(byA))]);
    const ids = [...byA, ...byB].map((e) => e.id);
    assert.equal(ids.length, 7);
    assert.equal(new Set(ids).size, 7);
    assert.equal(memoryNotifications(store.tables).length, 7);
  });

  it('hands on an event that appears below the position once it does, and only once', async () => {
    const tail = tailOf({ batch: 10 });
    await tail.drain(async () => async () => undefined);
    await append(3);
    const [, middle] = await logged();
    // As if its transaction had not committed when the tail passed it.
    // (Looked up at each use: a commit swaps the tables.)
    const events = () => store.tables.table<StoredEvent>('events');
    events().delete(middle.id);
    const seen: StoredEvent[] = [];
    assert.equal(await tail.drain(recorder(seen)), 2);
    assert.deepEqual((await store.read((r) => r.events.readCursor('consumer')))?.position.unseen, [middle.id]);
    events().insert(middle.id, middle);
    assert.equal(await tail.drain(recorder(seen)), 1);
    assert.equal(await tail.drain(recorder(seen)), 0);
    assert.deepEqual(seen.map((e) => e.id).sort(), (await logged()).map((e) => e.id).sort());
    assert.deepEqual((await store.read((r) => r.events.readCursor('consumer')))?.position.unseen, []);
  });

  it('skips an event that fails every try alone, and logs it', async () => {
    const errors: { msg: string; eventId?: string }[] = [];
    const logger = {
      warn: () => undefined,
      error: (obj: { eventId?: string }, msg: string) => void errors.push({ msg, eventId: obj.eventId }),
    } as unknown as Logger;
    const tail = tailOf({ retry: { firstMs: 0, maxMs: 0, tries: 3 }, logger, batch: 10 });
    await tail.drain(async () => async () => undefined);
    await append(3);
    const poison = (await logged())[1].id;
    const seen: StoredEvent[] = [];
    const ok = recorder(seen);
    const handler: EventHandler<UnitRepositories> = async (events) => {
      if (events.some((e) => e.id === poison)) throw new Error('this event cannot be handled');
      return ok(events);
    };
    for (let i = 0; i < 10 && seen.length < 2; i++) await tail.drain(handler);
    assert.deepEqual(
      seen.map((e) => e.id),
      (await logged()).map((e) => e.id).filter((id) => id !== poison),
    );
    assert.deepEqual(errors, [{ msg: 'an event failed every try; it is skipped', eventId: poison }]);
  });
});
