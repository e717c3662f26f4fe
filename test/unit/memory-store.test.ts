import assert from 'node:assert/strict';
import { MemoryStore, type MemoryTables } from '../fakes/store/memory-store.js';
import { deferred } from '../helpers/wait.js';

class Thing {
  constructor(
    public id: string,
    public n: number,
    public at: Date,
  ) {}
  twice(): number {
    return this.n * 2;
  }
}

/** A one-table repository, as the aggregates' memory repositories are built. */
const things = (tables: MemoryTables) => ({
  get rows() {
    return tables.table<Thing>('things');
  },
  add(t: Thing) {
    return this.rows.insert(t.id, t);
  },
  bump(id: string) {
    const row = this.rows.get(id);
    if (row) this.rows.update(id, { n: row.n + 1 });
  },
  get(id: string) {
    return this.rows.get(id);
  },
});

describe('the memory store (the unit tier stands on it)', () => {
  let store: MemoryStore<{ things: ReturnType<typeof things> }>;
  beforeEach(() => (store = new MemoryStore((tables) => ({ things: things(tables) }))));

  it('commits what a transaction wrote, and keeps rows as copies of their class', async () => {
    const at = new Date('2026-01-01T00:00:00Z');
    await store.transaction(async (r) => void r.things.add(new Thing('a', 1, at)));
    const read = await store.read(async (r) => r.things.get('a'));
    assert.ok(read instanceof Thing);
    assert.equal(read.twice(), 2);
    read.n = 99;
    read.at.setFullYear(2000);
    const again = await store.read(async (r) => r.things.get('a'));
    assert.equal(again?.n, 1, 'a caller changing what it read changes no stored row');
    assert.equal(again?.at.getTime(), at.getTime());
  });

  it('drops everything a transaction wrote when it throws', async () => {
    await store.transaction(async (r) => void r.things.add(new Thing('a', 1, new Date())));
    await assert.rejects(
      store.transaction(async (r) => {
        r.things.bump('a');
        r.things.add(new Thing('b', 1, new Date()));
        throw new Error('no');
      }),
      /no/,
    );
    assert.equal((await store.read(async (r) => r.things.get('a')))?.n, 1);
    assert.equal(await store.read(async (r) => r.things.get('b')), undefined);
  });

  it('answers the value but keeps nothing when the transaction rolls back at its end', async () => {
    const v = await store.transaction(async (r, tx) => {
      r.things.add(new Thing('a', 1, new Date()));
      tx.rollBackAtEnd();
      return 'answered';
    });
    assert.equal(v, 'answered');
    assert.equal(await store.read(async (r) => r.things.get('a')), undefined);
  });

  it('runs transactions one at a time: a second begins on what the first committed', async () => {
    await store.transaction(async (r) => void r.things.add(new Thing('a', 0, new Date())));
    const gate = deferred<void>();
    const first = store.transaction(async (r) => {
      await gate.promise;
      r.things.bump('a');
    });
    const second = store.transaction(async (r) => r.things.bump('a'));
    // While the first waits, reads see only committed rows.
    assert.equal((await store.read(async (r) => r.things.get('a')))?.n, 0);
    gate.resolve();
    await Promise.all([first, second]);
    assert.equal((await store.read(async (r) => r.things.get('a')))?.n, 2, 'no update lost');
  });

  it('runs a transaction again from the start when its commit is lost, and keeps one result', async () => {
    await store.transaction(async (r) => void r.things.add(new Thing('a', 0, new Date())));
    store.loseNextCommits(2);
    let runs = 0;
    await store.transaction(async (r) => {
      runs++;
      r.things.bump('a');
    });
    assert.equal(runs, 3);
    assert.equal((await store.read(async (r) => r.things.get('a')))?.n, 1);
  });

  it('gives up after as many tries as the MySQL store, with the deadlock code its retry rule knows', async () => {
    store.loseNextCommits(100);
    await assert.rejects(
      store.pipelined(async () => undefined),
      (e: { code?: string }) => e.code === 'ER_LOCK_DEADLOCK',
    );
  });

  it('refuses a second row under a taken key, as INSERT IGNORE does', async () => {
    const added = await store.transaction(async (r) => [
      r.things.add(new Thing('a', 1, new Date())),
      r.things.add(new Thing('a', 2, new Date())),
    ]);
    assert.deepEqual(added, [true, false]);
    assert.equal((await store.read(async (r) => r.things.get('a')))?.n, 1);
  });
});
