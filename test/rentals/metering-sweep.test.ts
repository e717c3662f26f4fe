import assert from 'node:assert/strict';
import { lifecycleDepsOf } from '../../src/container.js';
import type { Clock } from '../../src/clock.js';
import { accrual, chunksByAccount } from '../../src/modules/rentals/lifecycle/metering.js';
import { createRentalLifecycle, type RentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { seedMeteredRentals } from '../helpers/metered-seed.js';
import { account, offerIds, rentOk } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'ms-a',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
    create: 'ok',
    destroy: 'ok',
  },
];
const TIMING = { adoptBoundMs: 5000, activeBoundMs: 60_000, sshTimeoutMs: 1500, meterChunkRentals: 7 };

describe('metering sweep (chunked, guarded)', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let life: RentalLifecycle;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    life = createRentalLifecycle(lifecycleDepsOf(ctx.services), TIMING);
  });
  after(() => ctx.close());

  /** Per deployment: its usage column, the USAGE entries posted for it, and their sum. */
  async function charges(
    ids: readonly string[],
  ): Promise<Map<string, { usage: number; entries: number; posted: number; meteredMs: number; startedMs: number }>> {
    const rows: {
      id: string;
      usage_minor: string;
      entries: string;
      posted: string | null;
      metered_until: Date;
      started_at: Date;
    }[] = await ctx.services.ds.query(
      `SELECT d.id, d.usage_minor, d.metered_until, d.started_at, COUNT(e.id) AS entries, -SUM(e.amount_minor) AS posted
         FROM deployments d LEFT JOIN ledger_entries e ON e.rental_id = d.order_id AND e.kind = 'USAGE'
        WHERE d.id IN (?) GROUP BY d.id, d.usage_minor, d.metered_until, d.started_at`,
      [ids],
    );
    return new Map(
      rows.map((r) => [
        r.id,
        {
          usage: Number(r.usage_minor),
          entries: Number(r.entries),
          posted: Number(r.posted ?? 0),
          meteredMs: r.metered_until.getTime(),
          startedMs: r.started_at.getTime(),
        },
      ]),
    );
  }

  /** What the cumulative price of a rental metered up to `meteredMs` is, at 300 cents/h. */
  const priceTo = (startedMs: number, meteredMs: number) =>
    Math.floor((Math.floor((meteredMs - startedMs) / 1000) * 300) / 3600);

  it('cuts the sweep into chunks of whole accounts', () => {
    const rows = ['a', 'a', 'a', 'b', 'c', 'c', 'd'].map((accountId, i) => ({ accountId, i }));
    const chunks = [...chunksByAccount(rows, 4)].map((c) => c.map((r) => r.accountId).join(''));
    assert.deepEqual(chunks, ['aaab', 'ccd']);
    assert.deepEqual(
      [...chunksByAccount(rows, 2)].map((c) => c.map((r) => r.accountId).join('')),
      ['aaa', 'b', 'cc', 'd'],
    );
  });

  it('a chunked sweep over 600 rentals of 300 accounts posts exactly the expected totals, each rental once', async () => {
    const startedAt = new Date(ctx.clock.now().getTime() - 3600_000);
    const seed = await seedMeteredRentals(ctx.services.ds, {
      accounts: 300,
      perAccount: 2,
      creditsMinor: 10_000,
      priceMinor: 300,
      startedAt,
    });
    // Each rental's first hour ends at this sweep: its usage is charged and posted at once.
    assert.deepEqual(await life.meter(), { charged: 600, posted: 600 });
    const c = await charges(seed.deploymentIds);
    for (const [id, x] of c) {
      assert.equal(x.usage, 300, id);
      assert.equal(x.entries, 1, id);
      assert.equal(x.posted, 300, id);
    }
    const balances: { n: string; total: string }[] = await ctx.services.ds.query(
      `SELECT COUNT(*) AS n, SUM(balance_minor) AS total FROM accounts WHERE id IN (?)`,
      [seed.accountIds],
    );
    assert.equal(Number(balances[0].total), 300 * (10_000 - 600));
    const keys: { spent: string }[] = await ctx.services.ds.query(
      `SELECT SUM(net_spent_minor) AS spent FROM api_keys WHERE id IN (?)`,
      [seed.keyIds],
    );
    assert.equal(Number(keys[0].spent), 600 * 300);
    // Nothing more is due at the same instant.
    assert.deepEqual(await life.meter(), { charged: 0, posted: 0 });
  });

  it('two sweeps at once charge every rental exactly once', async () => {
    const startedAt = new Date(ctx.clock.now().getTime() - 7200_000);
    const seed = await seedMeteredRentals(ctx.services.ds, {
      accounts: 40,
      perAccount: 3,
      creditsMinor: 10_000,
      priceMinor: 300,
      startedAt,
    });
    const other = createRentalLifecycle(lifecycleDepsOf(ctx.services), TIMING);
    const [a, b] = await Promise.all([life.meter(), other.meter()]);
    assert.equal(a.charged + b.charged, 120);
    assert.equal(a.posted + b.posted, 120);
    for (const [id, x] of await charges(seed.deploymentIds)) {
      assert.deepEqual([x.usage, x.entries, x.posted], [600, 1, 600], id);
    }
  });

  it('two sweeps a moment apart charge the metered time once: usage equals the price of the time metered, the ledger holds the first hour', async () => {
    const startedAt = new Date(ctx.clock.now().getTime() - 3600_000);
    const seed = await seedMeteredRentals(ctx.services.ds, {
      accounts: 30,
      perAccount: 4,
      creditsMinor: 10_000,
      priceMinor: 300,
      startedAt,
    });
    const later: Clock = { now: () => new Date(ctx.clock.now().getTime() + 37_000) };
    const other = createRentalLifecycle({ ...lifecycleDepsOf(ctx.services), clock: later }, TIMING);
    await Promise.all([life.meter(), other.meter()]);
    for (const [id, x] of await charges(seed.deploymentIds)) {
      assert.equal(x.usage, priceTo(x.startedMs, x.meteredMs), id);
      // Whichever sweep came first posted the hour that ended; the 37 s after it wait for the next hour.
      assert.deepEqual([x.entries, x.posted], [1, 300], id);
    }
  });

  it('a termination racing a sweep charges the rental once, up to the termination request', async () => {
    const ids = await offerIds(ctx);
    const who = await account(ctx, { billingModel: 'ACCOUNT_BALANCE', creditsMinor: 100_000 });
    const r = await rentOk(ctx, who, { offerId: ids['ms-a'] });
    for (let i = 0; i < 10 && (await dep(r.deploymentId)).status !== 'ACTIVE'; i++)
      await life.provision(r.deploymentId);
    assert.equal((await dep(r.deploymentId)).status, 'ACTIVE');
    ctx.clock.advance(3600_000);
    const res = await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(who.auth);
    assert.equal(res.status, 202);
    ctx.clock.advance(600_000);
    await Promise.all([life.meter(), life.terminate(r.deploymentId), life.meter()]);
    const d = await dep(r.deploymentId);
    assert.equal(d.status, 'TERMINATED');
    const expected = accrual({ ...d, usageMinor: 0 }, d.terminateRequestedAt!.getTime()).amount;
    assert.equal(expected, 300);
    const x = (await charges([r.deploymentId])).get(r.deploymentId)!;
    assert.equal(x.usage, expected);
    assert.equal(x.posted, expected);
  });

  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
});
