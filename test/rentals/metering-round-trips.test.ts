import assert from 'node:assert/strict';
import { lifecycleDepsOf } from '../../src/container.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { seedMeteredRentals } from '../helpers/metered-seed.js';
import { sentRequests } from '../helpers/sql-requests.js';

/** Each request's statements, by their first three words (SqlTransaction joins a request's statements with `;\n`). */
const shape = (sent: string[]) =>
  sent
    // Whatever else this process's pool serves meanwhile (the job backend's polling, a new
    // connection pinning its session) is not the sweep's.
    .filter((s) => !/agenda_jobs|inventory_state|^SET SESSION/.test(s))
    .map((s) => s.split(';\n').map((x) => x.trim().split(/\s+/).slice(0, 3).join(' ')));

const LOCKS = ['START TRANSACTION', 'SELECT id, status,', 'SELECT id, balance_minor,'];
const FIRST_READ = ['SELECT id, account_id,'];
const LIMITS = [['SELECT d.id, d.spend_cap_minor,'], ['SELECT id FROM']];

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
    const seed = await seedMeteredRentals(ctx.services.ds, { accounts: 3, perAccount: 4, creditsMinor: 100_000, priceMinor: 300, startedAt });
    const life = createRentalLifecycle(lifecycleDepsOf(ctx.services), { meterChunkRentals: 4, meterConcurrency: 1 });
    const hourly = await sentRequests(() => life.meter());
    assert.deepEqual(hourly.result, { charged: 12, posted: 12 });
    const writes = ['UPDATE deployments d', 'UPDATE accounts a', 'UPDATE api_keys k', 'INSERT INTO ledger_entries'];
    assert.deepEqual(shape(hourly.sent), [FIRST_READ, ...[1, 2, 3].flatMap(() => [LOCKS, writes, ['COMMIT']]), ...LIMITS]);

    // A minute on no hour ends: the same requests without the insert.
    ctx.clock.advance(60_000);
    const minute = await sentRequests(() => life.meter());
    assert.deepEqual(minute.result, { charged: 12, posted: 0 });
    assert.deepEqual(shape(minute.sent), [FIRST_READ, ...[1, 2, 3].flatMap(() => [LOCKS, writes.slice(0, 3), ['COMMIT']]), ...LIMITS]);

    // Two chunks in flight at once: the same three requests per chunk, on two connections.
    ctx.clock.advance(60_000);
    const both = createRentalLifecycle(lifecycleDepsOf(ctx.services), { meterChunkRentals: 4, meterConcurrency: 2 });
    const concurrent = await sentRequests(() => both.meter());
    assert.deepEqual(concurrent.result, { charged: 12, posted: 0 });
    const requests = shape(concurrent.sent);
    assert.equal(requests.length, 1 + 3 * 3 + 2);
    assert.equal(requests.filter((r) => r[0] === 'START TRANSACTION').length, 3);
    assert.equal(requests.filter((r) => r[0] === 'UPDATE deployments d').length, 3);

    const [usage] = await ctx.services.ds.query(`SELECT SUM(usage_minor) AS total FROM deployments WHERE id IN (?)`, [seed.deploymentIds]);
    assert.equal(Number(usage.total), 12 * (300 + 5 + 5));
  });
});
