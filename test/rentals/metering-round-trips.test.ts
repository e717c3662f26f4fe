import assert from 'node:assert/strict';
import { lifecycleDepsOf } from '../../src/container.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { seedMeteredRentals } from '../helpers/metered-seed.js';
import { sentRequests } from '../helpers/sql-requests.js';

const sweepsOnly = (sent: string[]) =>
  // Whatever else this process's pool serves meanwhile (the job backend's polling, a new
  // connection pinning its session) is not the sweep's.
  sent.filter((s) => !/agenda_jobs|inventory_state|^SET SESSION/.test(s));

/** A request's statements, by their first three words (SqlTransaction joins a request's statements with `;\n`). */
const shapeOf = (request: string) => request.split(';\n').map((x) => x.trim().split(/\s+/).slice(0, 3).join(' '));

/**
 * The requests of the chunks that lock one of `ids`, chunk by chunk, in a sweep of one chunk at a
 * time: the run's other tests may leave metered rentals of their own, which the sweep charges too.
 */
function chunksOf(sent: string[], ids: readonly string[]): string[][][] {
  const chunks: string[][] = [];
  for (const r of sweepsOnly(sent)) {
    if (r.startsWith('START TRANSACTION')) chunks.push([]);
    if (/^SELECT id, account_id FROM|^SELECT d\.id, d\.spend_cap_minor|^SELECT id FROM deployments/.test(r)) continue;
    chunks.at(-1)?.push(r);
  }
  return chunks.filter((c) => ids.some((id) => c[0].includes(id))).map((c) => c.map(shapeOf));
}

const LOCKS = ['START TRANSACTION', 'SELECT id, status,', 'SELECT id, balance_minor,'];

describe('metering sweep: round trips per chunk', function () {
  this.timeout(60_000);
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('charges each chunk in three requests (locks, writes, COMMIT), however many rentals it holds', async () => {
    // Three accounts of four rentals, one account per chunk; their first hour ends at this sweep.
    const startedAt = new Date(ctx.clock.now().getTime() - 3600_000);
    const seed = await seedMeteredRentals(ctx.services.ds, {
      accounts: 3,
      perAccount: 4,
      creditsMinor: 100_000,
      priceMinor: 300,
      startedAt,
    });
    const life = createRentalLifecycle(lifecycleDepsOf(ctx.services), { meterChunkRentals: 4, meterConcurrency: 1 });
    const hourly = await sentRequests(() => life.meter());
    assert.ok(hourly.result.posted >= 12);
    const writes = ['UPDATE deployments d', 'UPDATE accounts a', 'UPDATE api_keys k', 'INSERT INTO ledger_entries'];
    assert.deepEqual(
      chunksOf(hourly.sent, seed.deploymentIds),
      [1, 2, 3].map(() => [LOCKS, writes, ['COMMIT']]),
    );

    // A minute on no hour ends: the same requests without the insert.
    ctx.clock.advance(60_000);
    const minute = await sentRequests(() => life.meter());
    assert.equal(minute.result.posted, 0);
    assert.deepEqual(
      chunksOf(minute.sent, seed.deploymentIds),
      [1, 2, 3].map(() => [LOCKS, writes.slice(0, 3), ['COMMIT']]),
    );

    // Two chunks in flight at once: the same three requests per chunk, on two connections.
    ctx.clock.advance(60_000);
    const both = createRentalLifecycle(lifecycleDepsOf(ctx.services), { meterChunkRentals: 4, meterConcurrency: 2 });
    const concurrent = await sentRequests(() => both.meter());
    assert.equal(concurrent.result.posted, 0);
    const ours = sweepsOnly(concurrent.sent).filter((r) => seed.deploymentIds.some((id) => r.includes(id)));
    // The two chunks in flight interleave their requests: each of ours is a chunk's locks or its writes.
    assert.deepEqual(
      ours
        .map(shapeOf)
        .map((r) => r.join(' + '))
        .sort(),
      [...Array(3).fill(LOCKS.join(' + ')), ...Array(3).fill(writes.slice(0, 3).join(' + '))].sort(),
    );
    // Every request of the sweep is its first read, a chunk's locks, writes or COMMIT (a chunk with
    // nothing due has no writes), or one of the limits' two reads: nothing per rental.
    const all = sweepsOnly(concurrent.sent).map((r) => shapeOf(r).join(' + '));
    const count = (shape: string) => all.filter((r) => r === shape).length;
    const chunks = count(LOCKS.join(' + '));
    assert.equal(count('COMMIT'), chunks);
    const written = count(writes.slice(0, 3).join(' + ')) + count(writes.join(' + '));
    assert.ok(written >= 3 && written <= chunks);
    assert.deepEqual(
      [count('SELECT id, account_id'), count('SELECT d.id, d.spend_cap_minor,'), count('SELECT id FROM')],
      [1, 1, 1],
    );
    assert.equal(all.length, 3 + 2 * chunks + written);

    const [usage] = await ctx.services.ds.query(`SELECT SUM(usage_minor) AS total FROM deployments WHERE id IN (?)`, [
      seed.deploymentIds,
    ]);
    assert.equal(Number(usage.total), 12 * (300 + 5 + 5));
  });

  it('moves no index entry when it charges a rental, and its first read needs no more than ix_deployments_metered', async () => {
    const indexed: { index_name: string; column_name: string }[] = await ctx.services.ds.query(
      `SELECT INDEX_NAME AS index_name, COLUMN_NAME AS column_name FROM information_schema.STATISTICS
        WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'deployments' ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
    );
    // What every charge writes (chargeUsage's SET): in an index, each sweep would rewrite one entry per rental.
    const charged = ['usage_minor', 'metered_until', 'posted_usage_minor', 'posted_until'];
    assert.deepEqual(
      indexed.filter((c) => charged.includes(c.column_name)),
      [],
    );
    // The first read's columns (SELECT id, account_id ... WHERE billing_model, status, started_at) are in the index; InnoDB adds the primary key.
    const covered = indexed.filter((c) => c.index_name === 'ix_deployments_metered').map((c) => c.column_name);
    for (const column of ['billing_model', 'status', 'account_id', 'started_at'])
      assert.ok(covered.includes(column), `${column} in ix_deployments_metered (${covered.join(', ')})`);
  });
});
