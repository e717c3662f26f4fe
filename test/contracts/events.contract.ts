import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { EventType } from '../../src/modules/events/event-types.js';
import type { EventsRepository, NewEvent } from '../../src/modules/events/events.repository.js';

export type EventsStore = Store<{ events: EventsRepository }>;

/**
 * What every store's events repository does, run on MariaDB (test/store/) and on the memory store
 * (test/unit/). The MariaDB log is shared with the test files running beside this one, so each
 * test writes the events of accounts of its own, names cursors of its own, and looks at the
 * log-wide reads only through its own events. Events are written at the present time: one dated
 * back would be where another file's consumer that looks back from now starts.
 */
export function eventsContract(kind: string, make: () => Promise<EventsStore>): void {
  describe(`events repository (${kind})`, () => {
    let store: EventsStore;
    let accountId: string;
    before(async () => (store = await make()));
    beforeEach(() => (accountId = randomUUID()));

    const event = (type: EventType, over: Partial<NewEvent> = {}): NewEvent => ({
      type,
      accountId,
      keyId: null,
      rentalId: null,
      data: { n: randomUUID() },
      at: new Date(),
      ...over,
    });
    const append = (...events: NewEvent[]) =>
      store.transaction(async (r) => {
        for (const e of events) await r.events.append(e);
      });
    const owner = () => ({ kind: 'OWNER' as const, accountId });
    const agent = (keyId: string) => ({ kind: 'AGENT' as const, accountId, keyId });
    /** The account's events, oldest first, as the owner reads them. */
    const all = () => store.read((r) => r.events.after(owner(), '0', 100));

    describe('numbering and the visibility rule', () => {
      it("numbers each account's events from 1 in the order they commit, apart from other accounts'", async () => {
        const other = randomUUID();
        await append(event('rental.provisioning', { rentalId: randomUUID() }));
        await append(event('credits.low', { accountId: other }), event('topup.paid'));
        const mine = await all();
        assert.deepEqual(
          mine.map((e) => [e.seq, e.type]),
          [
            ['1', 'rental.provisioning'],
            ['2', 'topup.paid'],
          ],
        );
        assert.ok(BigInt(mine[0].id) < BigInt(mine[1].id), 'log-wide ids grow with them');
        const theirs = await store.read((r) => r.events.after({ kind: 'OWNER', accountId: other }, '0', 100));
        assert.deepEqual(
          theirs.map((e) => e.seq),
          ['1'],
        );
        assert.equal(await store.read((r) => r.events.latestAccountSeq(accountId)), '2');
        assert.equal(await store.read((r) => r.events.latestAccountSeq(randomUUID())), '0');
      });

      it('reads back what was written: the data as JSON, the ids as decimal strings, the time', async () => {
        const at = new Date();
        const e = event('rental.active', {
          keyId: randomUUID(),
          rentalId: randomUUID(),
          data: { a: [1, 'x'], b: null },
          at,
        });
        await append(e);
        const [got] = await all();
        assert.equal(typeof got.id, 'string');
        assert.match(got.id, /^\d+$/);
        assert.deepEqual(
          { type: got.type, accountId: got.accountId, keyId: got.keyId, rentalId: got.rentalId, data: got.data },
          { type: e.type, accountId, keyId: e.keyId, rentalId: e.rentalId, data: { a: [1, 'x'], b: null } },
        );
        assert.equal(got.createdAt.getTime(), at.getTime(), 'to the millisecond');
        assert.deepEqual(await store.read((r) => r.events.byId(got.id)), got);
        assert.equal(await store.read((r) => r.events.byId('999999999999')), null);
      });

      it("gives a rolled-back event's number back: the next one takes it", async () => {
        await append(event('topup.paid'));
        await assert.rejects(
          store.transaction(async (r) => {
            await r.events.append(event('credits.low'));
            throw new Error('rolled back');
          }),
          /rolled back/,
        );
        await append(event('rental.provisioning'));
        assert.deepEqual(
          (await all()).map((e) => [e.seq, e.type]),
          [
            ['1', 'topup.paid'],
            ['2', 'rental.provisioning'],
          ],
        );
      });

      it("shows an agent its own rentals' events and the account events meant for agents; the owner every one", async () => {
        const key = randomUUID();
        const otherKey = randomUUID();
        await append(
          event('rental.provisioning', { keyId: key, rentalId: randomUUID() }),
          event('rental.provisioning', { keyId: otherKey, rentalId: randomUUID() }),
          event('credits.low'),
          event('topup.paid'),
          event('rental.active', { keyId: key, rentalId: randomUUID() }),
        );
        const seen = await store.read((r) => r.events.after(agent(key), '0', 100));
        assert.deepEqual(
          seen.map((e) => [e.seq, e.type]),
          [
            ['1', 'rental.provisioning'],
            ['3', 'credits.low'],
            ['5', 'rental.active'],
          ],
        );
        assert.deepEqual(
          (await all()).map((e) => e.seq),
          ['1', '2', '3', '4', '5'],
        );
        assert.deepEqual(
          (await store.read((r) => r.events.after(agent(otherKey), '0', 100))).map((e) => e.seq),
          ['2', '3'],
        );
      });

      it('pages after a number, oldest first, and reads the newest page oldest first', async () => {
        const key = randomUUID();
        for (let i = 0; i < 5; i++) await append(event('rental.active', { keyId: key, rentalId: randomUUID() }));
        const after = await store.read((r) => r.events.after(owner(), '2', 2));
        assert.deepEqual(
          after.map((e) => e.seq),
          ['3', '4'],
        );
        assert.deepEqual(await store.read((r) => r.events.after(owner(), '5', 10)), []);
        const newest = await store.read((r) => r.events.latest(agent(key), 2));
        assert.deepEqual(
          newest.map((e) => e.seq),
          ['4', '5'],
        );
        assert.deepEqual(await store.read((r) => r.events.latest(agent(randomUUID()), 10)), []);
      });
    });

    describe('the log-wide reads', () => {
      it('tails after an id, oldest first, with the ids below it that were looked for', async () => {
        await append(event('credits.low'), event('topup.paid'), event('credits.low'));
        const [a, b, c] = await all();
        const tail = (afterId: string, unseen: string[], limit = 1000) =>
          store.read(async (r) =>
            (await r.events.tail(afterId, unseen, limit)).filter((e) => e.accountId === accountId).map((e) => e.id),
          );
        assert.deepEqual(await tail(String(BigInt(a.id) - 1n), []), [a.id, b.id, c.id]);
        assert.deepEqual(await tail(b.id, []), [c.id]);
        assert.deepEqual(await tail(c.id, [a.id]), [a.id], 'an id looked for comes back below the position');
        assert.deepEqual(await tail(String(BigInt(a.id) - 1n), [], 2), [a.id, b.id], 'at most `limit`');
        const [one] = await store.read((r) => r.events.tail(c.id, [b.id], 1));
        assert.equal(one.id, b.id, 'the oldest first, the looked-for one among them');
      });

      it('knows the newest id, the newest before a time, and the account numbers of ids', async () => {
        await append(event('credits.low'), event('topup.paid'));
        const [a, b] = await all();
        assert.ok(BigInt(await store.read((r) => r.events.latestId())) >= BigInt(b.id));
        assert.ok(
          BigInt(await store.read((r) => r.events.lastIdBefore(new Date(Date.now() + 3600_000)))) >= BigInt(b.id),
        );
        assert.equal(await store.read((r) => r.events.lastIdBefore(new Date('1971-01-01T00:00:00Z'))), '0');
        const seqs = await store.read((r) => r.events.accountSeqsOf([a.id, b.id, '999999999999']));
        assert.deepEqual([...seqs].sort(), [
          [a.id, '1'],
          [b.id, '2'],
        ]);
        assert.deepEqual(await store.read((r) => r.events.accountSeqsOf([])), new Map());
      });
    });

    describe('consumer cursors', () => {
      const name = () => `contract-${randomUUID()}`;
      const to = (lastId: string, unseen: string[] = []) => ({ lastId, unseen });

      it('has no position before its first pass; the first start stays', async () => {
        const n = name();
        assert.equal(await store.read((r) => r.events.readCursor(n)), null);
        await store.read((r) => r.events.createCursor(n, '41'));
        await store.read((r) => r.events.createCursor(n, '99'));
        assert.deepEqual(await store.read((r) => r.events.readCursor(n)), {
          position: to('41'),
          version: '0',
        });
      });

      it('moves only from the version read, and each move changes the version', async () => {
        const n = name();
        await store.read((r) => r.events.createCursor(n, '10'));
        assert.equal(await store.transaction((r) => r.events.claimCursor(n, '0', to('20', ['12', '15']))), true);
        const moved = await store.read((r) => r.events.readCursor(n));
        assert.deepEqual(moved?.position, to('20', ['12', '15']));
        assert.notEqual(moved?.version, '0');
        assert.equal(
          await store.transaction((r) => r.events.claimCursor(n, '0', to('30'))),
          false,
          'a stale version moves nothing',
        );
        assert.deepEqual(await store.read((r) => r.events.readCursor(n)), moved);
        assert.equal(
          await store.transaction((r) => r.events.claimCursor(name(), '0', to('1'))),
          false,
          'no such cursor',
        );
      });

      it('stays where it was when the transaction that moved it rolls back', async () => {
        const n = name();
        await store.read((r) => r.events.createCursor(n, '10'));
        await assert.rejects(
          store.transaction(async (r) => {
            assert.equal(await r.events.claimCursor(n, '0', to('20')), true);
            throw new Error('the writes failed');
          }),
          /the writes failed/,
        );
        assert.deepEqual(await store.read((r) => r.events.readCursor(n)), { position: to('10'), version: '0' });
      });
    });
  });
}
