import assert from 'node:assert/strict';
import { lifecycleDepsOf } from '../../src/container.js';
import { LedgerEntry } from '../../src/modules/billing/ledger-entry.entity.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { createRentalLifecycle, type RentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { usageRef } from '../../src/modules/rentals/lifecycle/labels.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { seedMeteredRentals } from '../helpers/metered-seed.js';
import { createTopup } from '../helpers/payments.js';
import { account, offerIds, rentOk } from '../helpers/rentals.js';

/** 1000 cents an hour: a cent every 3.6 s, so the per-second figure is seldom a multiple of a sweep's. */
const PRICE = 1000;
const OFFER: LocalInventoryOffer = {
  key: 'hu-a',
  name: 'NVIDIA H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  pricePerHourMinor: PRICE,
  maximumDurationSeconds: 86400,
  provisionSeconds: 0,
  create: 'ok',
  destroy: 'ok',
};
/** A cent a second. */
const OFFERS: LocalInventoryOffer[] = [OFFER, { ...OFFER, key: 'hu-b', pricePerHourMinor: 3600 }];
const TIMING = { adoptBoundMs: 5000, activeBoundMs: 60_000, sshTimeoutMs: 1500, meterChunkRentals: 7 };
const SWEEP_MS = 15_000;
/** The cumulative price of `secs` seconds at PRICE, the per-second figure the customer must see. */
const priceOf = (secs: number, price = PRICE) => Math.floor((secs * price) / 3600);

describe('usage posted by the hour', function () {
  this.timeout(180_000);
  let ctx: TestContext;
  let life: RentalLifecycle;
  let offer: string;
  let fast: string;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { LOW_CREDITS_MINOR: '1000' } });
    life = createRentalLifecycle(lifecycleDepsOf(ctx.services), TIMING);
    const ids = await offerIds(ctx);
    offer = ids['hu-a'];
    fast = ids['hu-b'];
  });
  after(() => ctx.close());

  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const usageEntries = (rentalId: string) =>
    ctx.services.ds.getRepository(LedgerEntry).find({ where: { rentalId, kind: 'USAGE' }, order: { id: 'ASC' } });
  const unposted = async (accountId: string) =>
    (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: accountId })).unpostedUsageMinor;

  /** A metered rental of a new account (or of `who`), ACTIVE from the clock's present. */
  async function running(
    opts: { credits?: number; budgetLimitMinor?: number; budgetMinor?: number; who?: SignedUp } = {},
  ) {
    const who =
      opts.who ??
      (await account(ctx, {
        billingModel: 'ACCOUNT_BALANCE',
        creditsMinor: opts.credits ?? 100_000,
        budgetLimitMinor: opts.budgetLimitMinor,
      }));
    const r = await rentOk(ctx, who, {
      offerId: offer,
      ...(opts.budgetMinor ? { budgetMinor: opts.budgetMinor } : {}),
    });
    for (let i = 0; i < 10 && (await dep(r.deploymentId)).status !== 'ACTIVE'; i++)
      await life.provision(r.deploymentId);
    const d = await dep(r.deploymentId);
    assert.equal(d.status, 'ACTIVE');
    return { who, rentalId: r.rentalId, deploymentId: r.deploymentId, startedMs: d.startedAt!.getTime() };
  }

  it('a rental metered for 2 h 30 by sweeps every 15 s posts 3 entries (2 hourly, 1 at the end) summing to its usage, and the API shows the per-second figure at every sweep', async () => {
    const credits = 100_000;
    const r = await running({ credits });
    const sweeps = (150 * 60_000) / SWEEP_MS;
    for (let i = 1; i <= sweeps; i++) {
      ctx.clock.advance(SWEEP_MS);
      await life.meter();
      const secs = (i * SWEEP_MS) / 1000;
      const [bal, me] = await Promise.all([
        ctx.api.get('/api/v1/billing/balance?limit=1').set(r.who.auth),
        ctx.api.get('/api/v1/me').set(r.who.auth),
      ]);
      assert.equal(bal.body.data.creditsMinor, credits - priceOf(secs), `credits after ${secs} s`);
      assert.equal(me.body.data.key.netSpentMinor, priceOf(secs), `key spend after ${secs} s`);
      if (secs % 3600 === 0 || secs === 1800) {
        // Posted: the hours that ended, each priced to its end; the rest is unposted.
        const hours = Math.floor(secs / 3600);
        assert.equal((await usageEntries(r.rentalId)).length, hours, `entries after ${secs} s`);
        assert.equal(await unposted(r.who.accountId), priceOf(secs) - priceOf(hours * 3600));
      }
    }
    assert.equal((await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(r.who.auth)).status, 202);
    ctx.clock.advance(40_000);
    await life.terminate(r.deploymentId);
    const d = await dep(r.deploymentId);
    assert.equal(d.status, 'TERMINATED');
    assert.equal(d.usageMinor, priceOf(9000));
    const entries = await usageEntries(r.rentalId);
    assert.deepEqual(
      entries.map((e) => e.amountMinor),
      [-1000, -1000, -500],
    );
    assert.equal(-entries.reduce((s, e) => s + e.amountMinor, 0), d.usageMinor);
    assert.deepEqual(
      entries.map((e) => e.externalRef),
      [3600_000, 7200_000, 9000_000].map((ms) => usageRef(d.id, r.startedMs + ms)),
    );
    assert.equal(await unposted(r.who.accountId), 0);
    // As the customer reads them: one entry per rental-hour, named by the rental and its span.
    const shown = (await ctx.api.get('/api/v1/billing/balance').set(r.who.auth)).body.data.entries.filter(
      (e: { kind: string }) => e.kind === 'USAGE',
    );
    assert.equal(shown.length, 3);
    // UTC to the second; the end's date is written only when the hour crosses midnight.
    const day = (ms: number) => new Date(r.startedMs + ms).toISOString().slice(0, 10);
    const t = (ms: number) => new Date(r.startedMs + ms).toISOString().slice(11, 19);
    const end = day(3600_000) === day(0) ? t(3600_000) : `${day(3600_000)} ${t(3600_000)}`;
    assert.equal(shown[2].description, `Usage of rental ${r.rentalId}, ${day(0)} ${t(0)}–${end} UTC`);
    assert.equal(shown[0].balanceAfterMinor, credits - 2500);
    assert.equal(shown[1].balanceAfterMinor, credits - 2000);
  });

  it('a key budget, a spend cap and the end of the credits stop rentals at the very sweep the per-second usage reaches them', async () => {
    // At PRICE: 3900 cents take 14040 s, 2200 cents 7920 s, 2950 cents 10620 s; none ends on an hour.
    const budget = await running({ budgetLimitMinor: 3900 });
    const cap = await running({ budgetMinor: 2200 });
    const broke = await running({ credits: 2950 });
    const reachedAt = new Map([
      [budget.deploymentId, { secs: 14_040, reason: 'KEY_BUDGET' }],
      [cap.deploymentId, { secs: 7920, reason: 'SPEND_CAP' }],
      [broke.deploymentId, { secs: 10_620, reason: 'CREDITS' }],
    ]);
    const startMs = budget.startedMs;
    assert.equal(cap.startedMs, startMs);
    assert.equal(broke.startedMs, startMs);
    for (let secs = 0; secs < 14_040;) {
      // Long strides far from every limit, sweep by sweep near one.
      const near = [...reachedAt.values()].some((x) => x.secs - secs <= 60 && x.secs > secs);
      const step = near
        ? 15
        : Math.min(900, Math.min(...[...reachedAt.values()].map((x) => x.secs - 60 - secs).filter((n) => n > 0), 900));
      ctx.clock.advance(step * 1000);
      secs += step;
      await life.meter();
      for (const [id, x] of reachedAt) {
        const d = await dep(id);
        if (secs < x.secs) assert.equal(d.status, 'ACTIVE', `${x.reason} not reached at ${secs} s`);
        if (secs === x.secs)
          assert.deepEqual([d.status, d.terminationReason], ['TERMINATING', x.reason], `${x.reason} at ${secs} s`);
      }
    }
    // Each stopped with usage of its last hour not yet posted: the limit read the exact figure, not the ledger's.
    for (const r of [budget, cap, broke]) {
      assert.ok((await unposted(r.who.accountId)) > 0);
      await life.terminate(r.deploymentId);
      const d = await dep(r.deploymentId);
      assert.equal(d.status, 'TERMINATED');
      assert.equal(-(await usageEntries(r.rentalId)).reduce((s, e) => s + e.amountMinor, 0), d.usageMinor);
    }
    assert.equal((await dep(cap.deploymentId)).usageMinor, 2200);
  });

  it('credits.low and topup.paid carry the balance to the second, usage not yet posted included', async () => {
    // 3600 cents an hour is a cent a second: from 1100, under the 1000 threshold after 101 s.
    const who = await account(ctx, {
      billingModel: 'ACCOUNT_BALANCE',
      creditsMinor: 1100,
      kind: 'OWNER',
      scopes: ['read', 'rent', 'manage', 'billing'],
    });
    const from = (await ctx.api.get('/api/v1/events').set(who.auth)).body.meta.nextAfter as string;
    // A spend cap keeps its reservation within the credits.
    const r = await rentOk(ctx, who, { offerId: fast, budgetMinor: 600 });
    for (let i = 0; i < 10 && (await dep(r.deploymentId)).status !== 'ACTIVE'; i++)
      await life.provision(r.deploymentId);
    for (let i = 0; i < 7; i++) {
      ctx.clock.advance(SWEEP_MS);
      await life.meter();
    }
    assert.equal((await usageEntries(r.rentalId)).length, 0, 'no hour has ended');
    const { topup } = await createTopup(ctx, who, 2500);
    assert.equal((await ctx.api.post(new URL(topup.paymentUrl).pathname)).status, 303);
    const events: { type: string; data: { balance: { creditsMinor: number } } }[] = (
      await ctx.api.get('/api/v1/events').query({ after: from, limit: 100 }).set(who.auth)
    ).body.data;
    const low = events.filter((e) => e.type === 'credits.low');
    assert.deepEqual(
      low.map((e) => e.data.balance.creditsMinor),
      [1100 - 105],
      'the sweep at 105 s crossed',
    );
    const paid = events.filter((e) => e.type === 'topup.paid');
    assert.deepEqual(
      paid.map((e) => e.data.balance.creditsMinor),
      [1100 - 105 + 2500],
    );
    assert.equal((await ctx.api.get('/api/v1/me').set(who.auth)).body.data.balance.creditsMinor, 1100 - 105 + 2500);
    assert.equal((await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(who.auth)).status, 202);
    await life.terminate(r.deploymentId);
  });

  it('concurrent sweeps, and a sweep run again after one failed half-way, post each hour of each rental once', async () => {
    const startedAt = new Date(ctx.clock.now().getTime() - 3600_000 + SWEEP_MS);
    const seed = await seedMeteredRentals(ctx.services.ds, {
      accounts: 20,
      perAccount: 3,
      creditsMinor: 100_000,
      priceMinor: PRICE,
      startedAt,
    });
    const other = createRentalLifecycle(lifecycleDepsOf(ctx.services), TIMING);
    await Promise.all([life.meter(), other.meter()]);
    // A posting whose reference is already taken (here by a zero entry that moves no money) fails its
    // chunk: the one of the account sorted last, so the chunks before it commit and the sweep stops there.
    const [first, last] = [0, seed.accountIds.length - 1].map((i) => [...seed.accountIds].sort()[i]);
    const blocked = seed.deploymentIds[seed.accountIds.indexOf(last) * 3];
    const ref = usageRef(blocked, startedAt.getTime() + 3600_000);
    await ctx.services.ds.query(
      `INSERT INTO ledger_entries (account_id, kind, amount_minor, balance_after_minor, external_ref, description, created_at) VALUES (?, 'ADJUSTMENT', 0, 0, ?, 'blocker', ?)`,
      [last, ref, ctx.clock.now()],
    );
    ctx.clock.advance(SWEEP_MS);
    await assert.rejects(life.meter(), /Duplicate entry/);
    const entriesOf = async (accountId: string) =>
      Number(
        (
          await ctx.services.ds.query(
            `SELECT COUNT(*) AS n FROM ledger_entries WHERE kind = 'USAGE' AND account_id = ?`,
            [accountId],
          )
        )[0].n,
      );
    assert.equal(await entriesOf(first), 3, 'a chunk before the failing one committed');
    assert.equal(await entriesOf(last), 0, "the failing chunk's postings rolled back");
    assert.deepEqual(
      [(await dep(blocked)).usageMinor, (await dep(blocked)).postedUsageMinor],
      [priceOf(3585), 0],
      'and so did its charges',
    );
    await ctx.services.ds.query(`DELETE FROM ledger_entries WHERE external_ref = ? AND kind = 'ADJUSTMENT'`, [ref]);
    await Promise.all([life.meter(), other.meter(), life.meter()]);
    const rows: { id: string; usage_minor: string; posted_usage_minor: string; entries: string; posted: string }[] =
      await ctx.services.ds.query(
        `SELECT d.id, d.usage_minor, d.posted_usage_minor, COUNT(e.id) AS entries, -SUM(e.amount_minor) AS posted
         FROM deployments d JOIN ledger_entries e ON e.rental_id = d.order_id AND e.kind = 'USAGE'
        WHERE d.id IN (?) GROUP BY d.id, d.usage_minor, d.posted_usage_minor`,
        [seed.deploymentIds],
      );
    assert.equal(rows.length, 60);
    for (const r of rows)
      assert.deepEqual(
        [Number(r.entries), Number(r.posted), Number(r.posted_usage_minor), Number(r.usage_minor)],
        [1, PRICE, PRICE, PRICE],
        r.id,
      );
  });
});
