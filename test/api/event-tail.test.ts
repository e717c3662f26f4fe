import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { EventCursors1763800020100 } from '../../migrations/1763800020100-EventCursors.js';
import { createDataSource } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import type { Logger } from '../../src/logger.js';
import { createStore, type Repositories } from '../../src/repositories.js';
import { EventHub } from '../../src/modules/events/event-hub.js';
import {
  DurableCursor,
  EventTail,
  LATE_COMMIT_LOOKBACK,
  type EventHandler,
  type EventTailOptions,
} from '../../src/modules/events/event-tail.js';
import { latestEventId, recordEvent, type StoredEvent } from '../../src/modules/events/events.repository.js';
import { databaseBefore } from '../helpers/migrated-before.js';
import { testDatabaseUrl, testDataSource } from '../helpers/db.js';

/**
 * The one consumer of the event log (events/event-tail.ts) against MariaDB. The database is the
 * run's, shared with test files running beside this one, so each test tails a cursor of its own
 * name and looks only at the events of accounts it made.
 */
describe('event tail: the one consumer of the event log', function () {
  this.timeout(60_000);
  let ds: DataSource;
  before(async () => {
    ds = await testDataSource();
  });

  const event = (accountId: string) => ({
    type: 'credits.low' as const,
    accountId,
    keyId: null,
    rentalId: null,
    data: { n: randomUUID() },
    at: new Date(),
  });
  const write = (accountId: string) => recordEvent(ds.manager, event(accountId));
  const lastIdOf = async (accountId: string): Promise<string> =>
    String((await ds.query('SELECT MAX(id) AS id FROM events WHERE account_id = ?', [accountId]))[0].id);

  /** A cursor of this test's own, starting at the newest event. */
  async function tailOf(
    options: Partial<EventTailOptions> = {},
    on: DataSource = ds,
    name = `test-${randomUUID()}`,
  ): Promise<{ tail: EventTail<Repositories>; name: string }> {
    const start = await latestEventId(ds);
    const store = createStore(on);
    const tail = new EventTail(store, new DurableCursor(store, name, async () => start), {
      name,
      batch: 50,
      ...options,
    });
    return { tail, name };
  }

  /** A handler that records, once their writes commit, the events of `accounts` it is given. */
  function recorder(accounts: Set<string>, seen: StoredEvent[]): EventHandler<Repositories> {
    return async (events) => async () => () => void seen.push(...events.filter((e) => accounts.has(e.accountId)));
  }

  const cursorRow = async (name: string) =>
    (
      (await ds.query('SELECT last_event_id, unseen_ids, version FROM event_cursors WHERE name = ?', [name])) as {
        last_event_id: string;
        unseen_ids: string;
        version: string;
      }[]
    )[0];

  it('hands on once an event that commits after a later one was handed on, and finds none twice', async () => {
    const { tail, name } = await tailOf();
    const late = randomUUID();
    const other = randomUUID();
    const seen: StoredEvent[] = [];
    const handler = recorder(new Set([late, other]), seen);
    await tail.drain(handler);

    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let inserted!: () => void;
    const written = new Promise<void>((r) => (inserted = r));
    const open = ds.transaction(async (m) => {
      await recordEvent(m, event(late));
      inserted();
      await gate;
    });
    await written;
    // One account's events are numbered one at a time, so the later event is another account's.
    await write(other);
    await tail.drain(handler);
    assert.deepEqual(
      seen.map((e) => e.accountId),
      [other],
      'the uncommitted one is not there yet',
    );
    const passed = await cursorRow(name);

    release();
    await open;
    await tail.drain(handler);
    await tail.drain(handler);
    assert.deepEqual(
      seen.map((e) => e.accountId),
      [other, late],
    );
    assert.ok(BigInt(seen[1].id) < BigInt(seen[0].id), 'the late one has the lower id');
    assert.ok(passed.unseen_ids.split(',').includes(seen[1].id), 'its id was remembered when the tail passed it');
    const after = await cursorRow(name);
    assert.ok(!after.unseen_ids.split(',').includes(seen[1].id), 'and is no longer looked for');
  });

  it('tries a batch whose handler failed again from the cursor, after its wait, and loses nothing', async () => {
    let now = 1_000_000;
    const { tail, name } = await tailOf({ retry: { firstMs: 500, maxMs: 500, tries: 5 }, now: () => now });
    const who = randomUUID();
    const seen: StoredEvent[] = [];
    const ok = recorder(new Set([who]), seen);
    await tail.drain(ok);
    const before = await cursorRow(name);
    await write(who);
    await write(who);
    let calls = 0;
    const failing: EventHandler<Repositories> = async (events) => {
      calls++;
      if (events.some((e) => e.accountId === who)) throw new Error('the handler failed');
      return ok(events);
    };
    assert.equal(await tail.drain(failing), 0);
    assert.equal(calls, 1);
    assert.equal((await cursorRow(name)).last_event_id, before.last_event_id, 'the cursor stayed');
    assert.equal(await tail.drain(ok), 0, 'nothing is read during the wait');
    now += 500;
    // A write step that fails rolls back with the cursor's move.
    const failingWrites: EventHandler<Repositories> = async () => async (r) => {
      await r.events.latestId();
      throw new Error('the writes failed');
    };
    await tail.drain(failingWrites);
    assert.equal((await cursorRow(name)).last_event_id, before.last_event_id, 'the cursor stayed again');
    now += 500;
    assert.ok((await tail.drain(ok)) >= 2);
    assert.equal(seen.length, 2);
    assert.equal(new Set(seen.map((e) => e.id)).size, 2);
  });

  it('takes the events of a failing batch one at a time, skips the one that always fails, and logs it', async () => {
    const logged: { msg: string; eventId?: string }[] = [];
    const logger = {
      warn: () => undefined,
      error: (obj: { eventId?: string }, msg: string) => void logged.push({ msg, eventId: obj.eventId }),
    } as unknown as Logger;
    const { tail } = await tailOf({ retry: { firstMs: 0, maxMs: 0, tries: 3 }, logger });
    const who = randomUUID();
    const seen: StoredEvent[] = [];
    const ok = recorder(new Set([who]), seen);
    await tail.drain(ok);
    await write(who);
    await write(who);
    const poisonId = await lastIdOf(who);
    await write(who);
    const handler: EventHandler<Repositories> = async (events) => {
      if (events.some((e) => e.id === poisonId)) throw new Error('this event cannot be handled');
      return ok(events);
    };
    for (let i = 0; i < 10 && seen.length < 2; i++) await tail.drain(handler);
    assert.equal(seen.length, 2, JSON.stringify(seen.map((e) => e.id)));
    assert.ok(!seen.some((e) => e.id === poisonId), 'the failing event is skipped');
    assert.deepEqual(logged, [{ msg: 'an event failed every try; it is skipped', eventId: poisonId }]);
  });

  it('hands each event to one of two processes tailing the same name', async () => {
    // Another process: a DataSource, a pool and a tail of its own, on the same database.
    const otherDs = createDataSource(testDatabaseUrl, 4, entities);
    await otherDs.initialize();
    try {
      const name = `test-${randomUUID()}`;
      const a = (await tailOf({ batch: 3 }, ds, name)).tail;
      const b = (await tailOf({ batch: 3 }, otherDs, name)).tail;
      const who = randomUUID();
      const byA: StoredEvent[] = [];
      const byB: StoredEvent[] = [];
      const accounts = new Set<string>([who]);
      // Each handler works in the transaction that moves the cursor, as webhooks and notifications write in it.
      const handler =
        (seen: StoredEvent[]): EventHandler<Repositories> =>
        async (events) =>
        async (r) => {
          await r.events.latestId();
          return () => void seen.push(...events.filter((e) => accounts.has(e.accountId)));
        };
      const n = 40;
      let written = 0;
      const writer = (async () => {
        for (; written < n; written++) await write(who);
      })();
      const deadline = Date.now() + 30_000;
      const consume = async (tail: EventTail<Repositories>, seen: StoredEvent[]) => {
        while ((written < n || byA.length + byB.length < n) && Date.now() < deadline) {
          await tail.drain(handler(seen));
          if (byA.length + byB.length > n) break;
        }
      };
      await Promise.all([writer, consume(a, byA), consume(b, byB)]);
      const ids = [...byA, ...byB].map((e) => e.id);
      assert.equal(ids.length, n, `${byA.length} + ${byB.length} handled`);
      assert.equal(new Set(ids).size, n, 'none twice');
    } finally {
      await otherDs.destroy();
    }
  });

  it('gives the push hub an event that commits after a later one was handed out', async () => {
    const hub = new EventHub(createStore(ds), { tailMs: 20 });
    try {
      const late = randomUUID();
      const other = randomUUID();
      const sub = await hub.subscribe((e) => e.accountId === late || e.accountId === other);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let inserted!: () => void;
      const written = new Promise<void>((r) => (inserted = r));
      const open = ds.transaction(async (m) => {
        await recordEvent(m, event(late));
        inserted();
        await gate;
      });
      await written;
      await write(other);
      const first = await sub.next(10_000);
      assert.equal(first?.accountId, other);
      release();
      await open;
      const second = await sub.next(10_000);
      assert.equal(second?.accountId, late);
      assert.ok(BigInt(second!.id) < BigInt(first!.id));
      sub.stop();
    } finally {
      await hub.stop();
    }
  });

  it('moves the webhook and notification cursors into the one table, keeping their places', async () => {
    const before = await databaseBefore(EventCursors1763800020100, 'cursors');
    const q = before.runner;
    try {
      const insert = async (id: number, createdAt: Date) =>
        q.query(
          `INSERT INTO events (id, type, account_id, data, created_at, seq) VALUES (?, 'credits.low', ?, '{}', ?, ?)`,
          [id, randomUUID(), createdAt, id],
        );
      const t0 = new Date('2025-01-01T00:00:00Z').getTime();
      // Events 1..1500 a second apart but for the gaps 1203 (never committed) and 1400..1499.
      for (let id = 1; id <= 1500; id++)
        if (id !== 1203 && (id < 1400 || id > 1499)) await insert(id, new Date(t0 + id * 1000));
      await q.query(`INSERT INTO webhook_cursor (name, last_event_id) VALUES ('webhooks', 1300)`);
      // Event 1250 was fanned out; the others of the window had no receiver.
      await q.query(
        `INSERT INTO webhook_deliveries (id, endpoint_id, account_id, event_id, status, attempts, created_at) VALUES (?, ?, ?, 1250, 'SUCCEEDED', 1, ?)`,
        [randomUUID(), randomUUID(), randomUUID(), new Date()],
      );
      // The scan had reached event 1300's time; it read again 5 minutes (300 events) before it.
      await q.query(`INSERT INTO telegram_cursors (name, position) VALUES ('owner-notifications', ?)`, [
        new Date(t0 + 1300 * 1000),
      ]);

      await new EventCursors1763800020100().up(q);

      const rows = (await q.query(`SELECT name, last_event_id, unseen_ids FROM event_cursors ORDER BY name`)) as {
        name: string;
        last_event_id: string;
        unseen_ids: string;
      }[];
      const window = (last: number) => Array.from({ length: Number(LATE_COMMIT_LOOKBACK) }, (_, i) => last - i);
      const hooks = rows.find((r) => r.name === 'webhooks')!;
      assert.equal(String(hooks.last_event_id), '1300');
      assert.deepEqual(
        hooks.unseen_ids.split(',').map(Number),
        window(1300)
          .filter((id) => id !== 1250)
          .reverse(),
        'every id of the window without a delivery is looked at again',
      );
      const owners = rows.find((r) => r.name === 'owner-notifications')!;
      assert.equal(String(owners.last_event_id), '999');
      assert.deepEqual(owners.unseen_ids, '', 'every id of its window is an event');
    } finally {
      await before.close();
    }
  });
});
