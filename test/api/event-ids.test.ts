import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventSequences1763800019400 } from '../../migrations/1763800019400-EventSequences.js';
import { inPipelinedTransaction } from '../../src/db/sql.js';
import { inTransaction } from '../../src/db/transaction.js';
import { eventsAfter, recordEvent, type NewEvent } from '../../src/modules/events/events.repository.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup, type SignedUp } from '../helpers/factories.js';
import { databaseBefore, type DatabaseBefore } from '../helpers/migrated-before.js';
import { waitFor } from '../helpers/wait.js';

/** An account event of `accountId` (agents see `credits.low`), as the ledger writes one. */
const lowCredits = (accountId: string, n = 0): NewEvent => ({
  type: 'credits.low',
  accountId,
  keyId: null,
  rentalId: null,
  data: { balance: { creditsMinor: n, currency: 'USD', frozen: false } },
  at: new Date(),
});

/** Event ids are numbered per account (finding 15): nothing in them moves with another account's events. */
describe('event ids: numbered per account', function () {
  this.timeout(60_000);
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  /** Writes an event, through the one writer, on a TypeORM transaction or a pipelined one. */
  async function write(accountId: string, pipelined = false): Promise<void> {
    if (pipelined) await inPipelinedTransaction(ctx.services.ds, (tx) => recordEvent(tx, lowCredits(accountId)));
    else await inTransaction(ctx.services.ds, (m) => recordEvent(m, lowCredits(accountId)));
  }
  const page = async (who: SignedUp, after?: string): Promise<{ ids: string[]; nextAfter: string }> => {
    const res = await ctx.api
      .get('/api/v1/events')
      .query(after === undefined ? {} : { after, limit: 100 })
      .set(who.auth);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { ids: res.body.data.map((e: { id: string }) => e.id), nextAfter: res.body.meta.nextAfter };
  };

  it("does not move one account's ids or nextAfter with another account's events", async () => {
    const [a, b] = await Promise.all([signup(ctx), signup(ctx)]);
    assert.equal((await page(b)).nextAfter, '0', 'a new account starts from its own zero');
    await write(b.accountId);
    assert.deepEqual((await page(b, '0')).ids, ['1']);
    const bNext = (await page(b)).nextAfter;

    // A's activity, which a stranger's ids used to measure.
    for (let i = 0; i < 7; i++) await write(a.accountId, i % 2 === 1);
    assert.equal((await page(b)).nextAfter, bNext, "B's nextAfter did not move");
    assert.deepEqual(await page(b, bNext), { ids: [], nextAfter: bNext });
    await write(b.accountId, true);
    assert.deepEqual((await page(b, '0')).ids, ['1', '2'], "B's next event follows its last, whatever A did meanwhile");
    assert.deepEqual((await page(a, '0')).ids, ['1', '2', '3', '4', '5', '6', '7']);
    assert.equal((await page(a)).nextAfter, '7');

    // The log-wide ids, kept inside the service, did interleave: the page ids are not them.
    const global = (await ctx.services.ds.query(`SELECT id FROM events WHERE account_id = ? ORDER BY id`, [
      b.accountId,
    ])) as { id: string }[];
    assert.ok(
      Number(global[1].id) - Number(global[0].id) >= 8,
      `B's events are ${global[0].id} and ${global[1].id} in the log`,
    );
  });

  it('numbers concurrent writes of one account without a gap or a repeat, and a rollback gives its number back', async () => {
    const who = await signup(ctx);
    await Promise.all(Array.from({ length: 20 }, (_, i) => write(who.accountId, i % 2 === 0)));
    await assert.rejects(
      inTransaction(ctx.services.ds, async (m) => {
        await recordEvent(m, lowCredits(who.accountId));
        throw new Error('changed its mind');
      }),
      /changed its mind/,
    );
    await write(who.accountId);
    const ids = (await page(who, '0')).ids.map(Number);
    assert.deepEqual(
      ids,
      Array.from({ length: 21 }, (_, i) => i + 1),
    );
  });

  it('streams under the same numbers: Last-Event-ID resumes after one, live events carry the next', async () => {
    const [who, other] = await Promise.all([signup(ctx), signup(ctx)]);
    for (let i = 0; i < 3; i++) await write(who.accountId);
    const server: Server = createServer(ctx.app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const abort = new AbortController();
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const res = await fetch(`${base}/api/v1/events`, {
        headers: { ...who.auth, Accept: 'text/event-stream', 'Last-Event-ID': '1' },
        signal: abort.signal,
      });
      assert.equal(res.status, 200);
      let raw = '';
      const reader = res.body!.getReader();
      const reading = (async () => {
        const decoder = new TextDecoder();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) return;
            raw += decoder.decode(value, { stream: true });
          }
        } catch {
          // Aborted below.
        }
      })();
      const ids = () => [...raw.matchAll(/^id: (\d+)$/gm)].map((m) => m[1]);
      await waitFor(async () => ids().length === 2, { timeoutMs: 5000, what: 'the replay' });
      await write(other.accountId);
      await write(who.accountId, true);
      await waitFor(async () => ids().length === 3, { timeoutMs: 5000, what: 'the live event' });
      assert.deepEqual(ids(), ['2', '3', '4']);
      const data = [...raw.matchAll(/^data: (.+)$/gm)].map((m) => (JSON.parse(m[1]) as { id: string }).id);
      assert.deepEqual(data, ['2', '3', '4'], 'the data carries the same id');
      abort.abort();
      await reading;
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('migration: event ids per account', function () {
  this.timeout(120_000);
  let db: DatabaseBefore;

  before(async () => {
    db = await databaseBefore(EventSequences1763800019400, 'eventseq');
  });
  after(() => db.close());

  it('keeps every id a client holds valid: old events keep their ids, new ones are numbered above the whole log', async () => {
    const [x, y, z, later] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (const id of [x, y, z])
      await db.runner.query(
        `INSERT INTO accounts (id, billing_model, created_at) VALUES (?, 'ACCOUNT_BALANCE', NOW(3))`,
        [id],
      );
    for (const account of [x, y, x, x, y]) {
      await db.runner.query(
        `INSERT INTO events (type, account_id, key_id, rental_id, data, created_at) VALUES ('credits.low', ?, NULL, NULL, '{}', NOW(3))`,
        [account],
      );
    }
    const newest = Number(((await db.runner.query(`SELECT MAX(id) AS id FROM events`)) as { id: string }[])[0].id);

    await new EventSequences1763800019400().up(db.runner);

    const rows = (await db.runner.query(`SELECT id, seq FROM events`)) as { id: string; seq: string }[];
    assert.ok(
      rows.every((r) => String(r.id) === String(r.seq)),
      'every old event keeps its id',
    );
    const owner = (accountId: string) => ({ kind: 'OWNER' as const, accountId });
    const seqs = async (accountId: string, after: string) =>
      (await eventsAfter(db.ds, owner(accountId), after, 100)).map((e) => e.seq);
    const before = await seqs(y, '0');

    // Y's empty page answered the log's newest id as nextAfter; Z never had an event.
    await inTransaction(db.ds, (m) => recordEvent(m, lowCredits(y)));
    await inTransaction(db.ds, (m) => recordEvent(m, lowCredits(z)));
    await db.runner.query(
      `INSERT INTO accounts (id, billing_model, created_at) VALUES (?, 'ACCOUNT_BALANCE', NOW(3))`,
      [later],
    );
    await inTransaction(db.ds, (m) => recordEvent(m, lowCredits(later)));
    assert.deepEqual(
      await seqs(y, String(newest)),
      [String(newest + 1)],
      'a cursor of the whole log still sees what follows',
    );
    assert.deepEqual(await seqs(y, '0'), [...before, String(newest + 1)]);
    assert.deepEqual(await seqs(z, String(newest)), [String(newest + 1)]);
    assert.deepEqual(await seqs(later, '0'), ['1'], 'an account made later starts at 1');
  });
});
