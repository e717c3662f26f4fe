import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { LedgerEntry } from '../../src/modules/billing/ledger-entry.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';
import { sentRequests } from '../helpers/sql-requests.js';
import { balanceOf } from '../helpers/payments.js';
import {
  account,
  addKey,
  credit,
  offerIds,
  postForKey,
  rent,
  rentOk,
  setStatus,
  queuedJobs,
} from '../helpers/rentals.js';

const H100 = {
  name: 'NVIDIA H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  maximumDurationSeconds: 7 * 86400,
};
const OFFERS: LocalInventoryOffer[] = [
  { key: 'h100-c', ...H100, pricePerHourMinor: 400 },
  { key: 'h100-a', ...H100, pricePerHourMinor: 300 },
  { key: 'h100-d', ...H100, pricePerHourMinor: 450 },
  { key: 'h100-b', ...H100, pricePerHourMinor: 350 },
  { key: 'h100-dear', ...H100, pricePerHourMinor: 1000 },
  { key: 'h100-8x', ...H100, gpuCount: 8, pricePerHourMinor: 2400 },
  {
    key: 'b200-half-hour',
    name: 'NVIDIA B200',
    category: 'datacenter',
    vramGb: 192,
    gpuCount: 1,
    pricePerHourMinor: 900,
    maximumDurationSeconds: 1800,
  },
  {
    key: 'a100-two-hours',
    name: 'NVIDIA A100 80GB',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 100,
    maximumDurationSeconds: 7200,
  },
  {
    key: 'a100-one-hour',
    name: 'NVIDIA A100 80GB',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 150,
    maximumDurationSeconds: 3600,
  },
  {
    key: 'gb200-gone',
    name: 'NVIDIA GB200',
    category: 'datacenter',
    vramGb: 192,
    gpuCount: 1,
    pricePerHourMinor: 1200,
    maximumDurationSeconds: 86400,
  },
  {
    key: 'l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 50,
    maximumDurationSeconds: 86400,
  },
];

/** A quote without its words, which one test holds exactly. */
const withoutNote = (quote: unknown) => {
  const { note: _note, ...rest } = quote as { note?: string; [k: string]: unknown };
  return rest;
};

describe('POST /api/v1/rentals', () => {
  let ctx: TestContext;
  let offer: Record<string, string>;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    offer = await offerIds(ctx);
    // Cached once, then gone from the provider: the cache still knows it, marked unavailable.
    await ctx.setInventory(OFFERS.map((o) => (o.key === 'gb200-gone' ? { ...o, available: false } : o)));
  });
  after(() => ctx.close());

  const orderRows = (accountId: string) => ctx.services.ds.getRepository(Order).findBy({ accountId });
  const deploymentRows = (accountId: string) => ctx.services.ds.getRepository(Deployment).findBy({ accountId });

  describe('ACCOUNT_BALANCE accounts', () => {
    it('admits an explicit offer with nothing debited: 201, the contract shape, one order and one deployment', async () => {
      const who = await account(ctx, { creditsMinor: 1000, maxPerRentalMinor: 700 });
      const me = await ctx.api.get('/api/v1/me').set(who.auth);
      assert.equal(me.body.data.billing.budgetRequired, false, 'the same eligibility decision as admission');
      const res = await rent(ctx, who, { offerId: offer['h100-a'] });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const r = res.body.data;
      assert.equal(r.rentalId, r.orderId);
      assert.equal(r.status, 'PENDING');
      assert.equal(r.endedAt, null);
      assert.equal(r.billingModel, 'ACCOUNT_BALANCE');
      assert.deepEqual(withoutNote(r.quote), {
        hourlyPriceMinor: 300,
        durationSeconds: null,
        totalMinor: 0,
        currency: 'USD',
        charging: 'PER_SECOND',
      });
      assert.deepEqual(r.candidateOfferIds, [offer['h100-a']]);
      assert.equal(r.failureReason, null);
      assert.equal(r.reversalStatus, null);
      assert.equal(r.deployment.id, r.deploymentId);
      assert.equal(r.deployment.billingModel, 'ACCOUNT_BALANCE');
      for (const f of ['hoursPurchased', 'durationSeconds', 'endsAt', 'endedAt'])
        assert.equal(r.deployment[f], null, f);

      const [order] = await orderRows(who.accountId);
      const [dep] = await deploymentRows(who.accountId);
      assert.equal(order.id, r.rentalId);
      assert.equal(order.funding, 'CREDITS');
      assert.equal(order.requestKind, 'OFFER');
      assert.equal(order.totalMinor, 0);
      assert.deepEqual(order.candidateOfferIds, [offer['h100-a']]);
      assert.equal(dep.id, r.deploymentId);
      assert.equal(dep.status, 'PENDING');
      assert.equal(dep.orderId, order.id);
      assert.equal(dep.keyId, who.keyId);
      assert.equal(dep.hourlyPriceMinor, 300);
      assert.equal(dep.offerId, offer['h100-a']);
      assert.equal(dep.providerId, 'local');
      // The per-rental cap bounds every metered rental, budget or not.
      assert.equal(dep.spendCapMinor, 700);
      assert.ok(dep.statusChangedAt);
      assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 1000, entries: 1 });
    });

    it('makes a rental with budgetMinor MAX_SPEND_METERED, capped at the budget; a budget above the key per-rental cap is refused, not lowered', async () => {
      const who = await account(ctx, { creditsMinor: 5000, maxPerRentalMinor: 800 });
      const small = await rentOk(ctx, who, { offerId: offer['h100-a'], budgetMinor: 550 });
      const over = await rent(ctx, who, { offerId: offer['h100-a'], budgetMinor: 10_000 });
      assert.equal(over.status, 403, JSON.stringify(over.body));
      assert.equal(over.body.error.code, 'KEY_LIMIT_EXCEEDED');
      const large = await rentOk(ctx, who, { offerId: offer['h100-a'], budgetMinor: 800 });
      for (const r of [small, large]) {
        assert.equal(r.billingModel, 'MAX_SPEND_METERED');
        assert.deepEqual(withoutNote(r.quote), {
          hourlyPriceMinor: 300,
          durationSeconds: null,
          totalMinor: 0,
          currency: 'USD',
          charging: 'PER_SECOND',
        });
        assert.equal((r.deployment as { hoursPurchased: unknown }).hoursPurchased, null);
      }
      const caps = Object.fromEntries((await deploymentRows(who.accountId)).map((d) => [d.orderId, d.spendCapMinor]));
      assert.equal(caps[small.rentalId], 550);
      assert.equal(caps[large.rentalId], 800);
      assert.equal((await balanceOf(ctx, who.accountId)).balance, 5000);
    });

    it('needs credits for the first hour (or the whole cap when smaller): 402 INSUFFICIENT_CREDITS otherwise', async () => {
      const broke = await account(ctx);
      const none = await rent(ctx, broke, { offerId: offer['h100-a'] });
      assert.equal(none.status, 402);
      assert.equal(none.body.error.code, 'INSUFFICIENT_CREDITS');

      const some = await account(ctx, { creditsMinor: 999 });
      const short = await rent(ctx, some, { offerId: offer['h100-dear'] });
      assert.equal(short.status, 402);
      assert.equal(short.body.error.code, 'INSUFFICIENT_CREDITS');
      // A 500-cent ceiling on a 1000-cent hour needs only 500 cents.
      await rentOk(ctx, some, { offerId: offer['h100-dear'], budgetMinor: 500 });
      assert.equal((await orderRows(some.accountId)).length, 1);
    });

    it('refuses a metered rental the key budget cannot pay an hour of: 403 KEY_LIMIT_EXCEEDED', async () => {
      const who = await account(ctx, { creditsMinor: 5000, budgetLimitMinor: 1400 });
      await postForKey(ctx, who, 'USAGE', -800);
      const res = await rent(ctx, who, { offerId: offer['h100-dear'] });
      assert.equal(res.status, 403);
      assert.equal(res.body.error.code, 'KEY_LIMIT_EXCEEDED');
      // 600 cents of key budget still pay for a 500-cent ceiling.
      await rentOk(ctx, who, { offerId: offer['h100-dear'], budgetMinor: 500 });
    });
  });

  describe('LEGACY_PREPAID accounts', () => {
    it('debits whole hours at admission through the ledger and quotes the purchased runtime', async () => {
      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 2000 });
      const r = await rentOk(ctx, who, { offerId: offer['h100-a'], budgetMinor: 1000 });
      assert.equal(r.billingModel, 'LEGACY_PREPAID');
      assert.deepEqual(withoutNote(r.quote), {
        hourlyPriceMinor: 300,
        durationSeconds: 3 * 3600,
        totalMinor: 900,
        currency: 'USD',
        charging: 'PREPAID',
      });
      const d = r.deployment as Record<string, unknown>;
      assert.equal(d.hoursPurchased, 3);
      assert.equal(d.durationSeconds, 3 * 3600);
      assert.equal(d.endsAt, null, 'endsAt is set when the rental becomes ACTIVE');
      assert.equal(d.spendCapMinor, null);

      const entries = await ctx.services.ds
        .getRepository(LedgerEntry)
        .findBy({ accountId: who.accountId, kind: 'RENTAL_DEBIT' });
      assert.equal(entries.length, 1);
      assert.equal(entries[0].amountMinor, -900);
      assert.equal(entries[0].externalRef, `rental:${r.rentalId}:debit`);
      assert.equal(entries[0].rentalId, r.rentalId);
      assert.equal(entries[0].keyId, who.keyId);
      assert.equal((await balanceOf(ctx, who.accountId)).balance, 1100);
      const me = await ctx.api.get('/api/v1/me').set(who.auth);
      assert.equal(me.body.data.key.netSpentMinor, 900);
    });

    it('buys no more hours than the offer allows', async () => {
      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 2000 });
      const r = await rentOk(ctx, who, { offerId: offer['a100-two-hours'], budgetMinor: 1000 });
      assert.deepEqual(withoutNote(r.quote), {
        hourlyPriceMinor: 100,
        durationSeconds: 7200,
        totalMinor: 200,
        currency: 'USD',
        charging: 'PREPAID',
      });
      assert.equal((await balanceOf(ctx, who.accountId)).balance, 1800);
    });

    it('requires a budget of at least 500 that buys a whole hour (422 BUDGET_REQUIRED / BUDGET_TOO_SMALL)', async () => {
      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 5000 });
      const me = await ctx.api.get('/api/v1/me').set(who.auth);
      assert.equal(me.body.data.billing.budgetRequired, true);
      const cases: [unknown, string][] = [
        [{ offerId: offer['h100-a'] }, 'BUDGET_REQUIRED'],
        [{ offerId: offer['h100-a'], budgetMinor: 499 }, 'BUDGET_TOO_SMALL'],
        [{ offerId: offer['h100-a'], budgetMinor: 0 }, 'BUDGET_TOO_SMALL'],
        [{ offerId: offer['h100-dear'], budgetMinor: 999 }, 'BUDGET_TOO_SMALL'],
        [{ offerId: offer['b200-half-hour'], budgetMinor: 5000 }, 'BUDGET_TOO_SMALL'],
        [{ gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 }, 'BUDGET_REQUIRED'],
      ];
      for (const [body, code] of cases) {
        const res = await rent(ctx, who, body);
        assert.equal(res.status, 422, JSON.stringify(body));
        assert.equal(res.body.error.code, code, JSON.stringify(body));
      }
      assert.equal((await orderRows(who.accountId)).length, 0);
      assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 5000, entries: 1 });
    });

    it('refuses a purchase above the key per-rental cap (403) or beyond its remaining budget (403), counting reversals back', async () => {
      const capped = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 5000, maxPerRentalMinor: 600 });
      const over = await rent(ctx, capped, { offerId: offer['h100-a'], budgetMinor: 900 });
      assert.equal(over.status, 403);
      assert.equal(over.body.error.code, 'KEY_LIMIT_EXCEEDED');
      await rentOk(ctx, capped, { offerId: offer['h100-a'], budgetMinor: 600 });

      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 5000, budgetLimitMinor: 1000 });
      const first = await rentOk(ctx, who, { offerId: offer['h100-a'], budgetMinor: 600 });
      const second = await rent(ctx, who, { offerId: offer['h100-a'], budgetMinor: 600 });
      assert.equal(second.status, 403);
      assert.equal(second.body.error.code, 'KEY_LIMIT_EXCEEDED');
      // A reversed debit no longer counts towards the key's net spend.
      await setStatus(ctx, first.deploymentId, 'FAILED');
      await postForKey(ctx, who, 'REVERSAL', 600, first.rentalId);
      await rentOk(ctx, who, { offerId: offer['h100-a'], budgetMinor: 600 });
    });

    it('needs the whole debit in credits: 402 INSUFFICIENT_CREDITS, nothing written', async () => {
      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 800 });
      const res = await rent(ctx, who, { offerId: offer['h100-a'], budgetMinor: 900 });
      assert.equal(res.status, 402);
      assert.equal(res.body.error.code, 'INSUFFICIENT_CREDITS');
      assert.equal((await orderRows(who.accountId)).length, 0);
      assert.equal((await deploymentRows(who.accountId)).length, 0);
      assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 800, entries: 1 });
    });
  });

  describe('frozen and negative accounts', () => {
    it('refuses rentals with 402 ACCOUNT_FROZEN', async () => {
      const frozen = await account(ctx, { creditsMinor: 5000 });
      await ctx.services.ds.getRepository(Account).update({ id: frozen.accountId }, { frozen: true });
      const a = await rent(ctx, frozen, { offerId: offer['h100-a'] });
      assert.equal(a.status, 402);
      assert.equal(a.body.error.code, 'ACCOUNT_FROZEN');

      const negative = await account(ctx, { billingModel: 'LEGACY_PREPAID' });
      await credit(ctx, negative.accountId, -1, 'ADJUSTMENT');
      const b = await rent(ctx, negative, { offerId: offer['h100-a'], budgetMinor: 600 });
      assert.equal(b.status, 402);
      assert.equal(b.body.error.code, 'ACCOUNT_FROZEN');
      assert.equal((await orderRows(frozen.accountId)).length + (await orderRows(negative.accountId)).length, 0);
    });
  });

  describe('concurrency limit', () => {
    it('counts non-terminal deployments of the key: 409 CONCURRENCY_LIMIT_REACHED until one ends', async () => {
      const who = await account(ctx, { creditsMinor: 5000, maxConcurrentDeployments: 2 });
      const first = await rentOk(ctx, who, { offerId: offer['l4'] });
      const second = await rentOk(ctx, who, { offerId: offer['l4'] });
      await setStatus(ctx, first.deploymentId, 'ACTIVE');
      await setStatus(ctx, second.deploymentId, 'TERMINATING');
      const third = await rent(ctx, who, { offerId: offer['l4'] });
      assert.equal(third.status, 409);
      assert.equal(third.body.error.code, 'CONCURRENCY_LIMIT_REACHED');
      // Another key of the same account has its own limit.
      const other = await addKey(ctx, who.accountId, { maxConcurrentDeployments: 1 });
      await rentOk(ctx, other, { offerId: offer['l4'] });
      await setStatus(ctx, second.deploymentId, 'TERMINATED');
      await rentOk(ctx, who, { offerId: offer['l4'] });
    });
  });

  describe('GPU intent', () => {
    it('normalizes the model and stores up to three candidates at or under the ceiling, cheapest first', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const r = await rentOk(ctx, who, { gpuModel: '  nvidia h100-SXM ', gpuCount: 1, maxHourlyPriceMinor: 1000 });
      assert.deepEqual(r.candidateOfferIds, [offer['h100-a'], offer['h100-b'], offer['h100-c']]);
      assert.equal((r.quote as { hourlyPriceMinor: number }).hourlyPriceMinor, 300);
      const [order] = await orderRows(who.accountId);
      assert.equal(order.requestKind, 'INTENT');
      assert.equal(order.gpuSlug, 'h100-sxm');
      assert.equal(order.gpuCount, 1);
      assert.equal(order.maxHourlyPriceMinor, 1000);
      assert.equal(order.offerId, null);
      const [dep] = await deploymentRows(who.accountId);
      assert.equal(dep.offerId, offer['h100-a']);

      const two = await rentOk(ctx, who, { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 350 });
      assert.deepEqual(two.candidateOfferIds, [offer['h100-a'], offer['h100-b']]);
      const eight = await rentOk(ctx, who, { gpuModel: 'h100sxm', gpuCount: 8, maxHourlyPriceMinor: 2400 });
      assert.deepEqual(eight.candidateOfferIds, [offer['h100-8x']]);
    });

    it('answers 422 NO_MATCHING_OFFER when nothing fits (price, count, model, or only unavailable offers)', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      for (const body of [
        { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 299 },
        { gpuModel: 'H100 SXM', gpuCount: 2, maxHourlyPriceMinor: 10_000 },
        { gpuModel: 'MI300X', gpuCount: 1, maxHourlyPriceMinor: 10_000 },
        { gpuModel: 'GB200', gpuCount: 1, maxHourlyPriceMinor: 10_000 },
        { gpuModel: 'NVIDIA', gpuCount: 1, maxHourlyPriceMinor: 10_000 },
      ]) {
        const res = await rent(ctx, who, body);
        assert.equal(res.status, 422, JSON.stringify(body));
        assert.equal(res.body.error.code, 'NO_MATCHING_OFFER', JSON.stringify(body));
      }
      assert.equal((await orderRows(who.accountId)).length, 0);
    });

    it('legacy intent rentals only keep fallbacks that can run the purchased hours', async () => {
      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 5000 });
      const r = await rentOk(ctx, who, {
        gpuModel: 'A100 80GB',
        gpuCount: 1,
        maxHourlyPriceMinor: 500,
        budgetMinor: 500,
      });
      assert.deepEqual(withoutNote(r.quote), {
        hourlyPriceMinor: 100,
        durationSeconds: 7200,
        totalMinor: 200,
        currency: 'USD',
        charging: 'PREPAID',
      });
      // The cheaper offer buys two hours; the one-hour offer could not run them, so it is no fallback.
      assert.deepEqual(r.candidateOfferIds, [offer['a100-two-hours']]);
    });
  });

  describe('explicit offers', () => {
    it('answers 404 OFFER_NOT_FOUND for an id the inventory never had', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const res = await rent(ctx, who, { offerId: randomUUID() });
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'OFFER_NOT_FOUND');
      assert.equal((await orderRows(who.accountId)).length, 0);
    });

    it('admits a cached offer the provider has since dropped; provisioning reports OFFER_NOT_FOUND', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const r = await rentOk(ctx, who, { offerId: offer['gb200-gone'].toUpperCase() });
      assert.deepEqual(r.candidateOfferIds, [offer['gb200-gone']]);
    });
  });

  describe('validation', () => {
    it('accepts exactly one of the two shapes with no other properties (422 VALIDATION_FAILED)', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const bad: unknown[] = [
        {},
        { offerId: offer['h100-a'], gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 },
        { offerId: offer['h100-a'], gpuModel: 'H100 SXM' },
        { offerId: offer['h100-a'], extra: true },
        { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400, hours: 2 },
        { gpuModel: 'H100 SXM', gpuCount: 1 },
        { gpuModel: 'H100 SXM', gpuCount: 3, maxHourlyPriceMinor: 400 },
        { gpuModel: '', gpuCount: 1, maxHourlyPriceMinor: 400 },
        { gpuModel: 'x'.repeat(101), gpuCount: 1, maxHourlyPriceMinor: 400 },
        { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 0 },
        { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 1.5 },
        { offerId: 'not-a-uuid' },
        { offerId: offer['h100-a'], budgetMinor: 'lots' },
        { offerId: offer['h100-a'], budgetMinor: 1e20 },
        { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 2 ** 53 + 1 },
        [offer['h100-a']],
      ];
      for (const body of bad) {
        const res = await rent(ctx, who, body);
        assert.equal(res.status, 422, `${JSON.stringify(body)} -> ${res.status} ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      }
      assert.equal((await orderRows(who.accountId)).length, 0);
    });

    it('names what is wrong with the closest shape', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const count = await rent(ctx, who, { gpuModel: 'H100 SXM', gpuCount: 3, maxHourlyPriceMinor: 400 });
      assert.match(count.body.error.message, /gpuCount: must be one of 1, 2, 4, 8/);
      const extra = await rent(ctx, who, { offerId: offer['h100-a'], extra: true });
      assert.match(extra.body.error.message, /unknown property "extra"/);
      const mixed = await rent(ctx, who, {
        offerId: offer['h100-a'],
        gpuModel: 'H100 SXM',
        gpuCount: 1,
        maxHourlyPriceMinor: 400,
      });
      assert.match(
        mixed.body.error.message,
        /send either \{offerId, …\} or \{gpuModel, gpuCount, maxHourlyPriceMinor, …\}, not fields of both: offerId belongs to the first; gpuModel, gpuCount, maxHourlyPriceMinor belong to the second/,
      );
      const waiting = await rent(ctx, who, { offerId: offer['h100-a'], waitForCapacitySeconds: 600 });
      assert.match(
        waiting.body.error.message,
        /offerId belongs to the first; waitForCapacitySeconds belongs to the second/,
      );
      const lease = await rent(ctx, who, { offerId: offer['h100-a'], terminateAfterSeconds: '2h' });
      assert.match(
        lease.body.error.message,
        /^Invalid request: terminateAfterSeconds: must be a whole number of seconds: send 7200 for "2h"\.$/,
      );
      const ports = await rent(ctx, who, { offerId: offer['h100-a'], machine: { ports: ['8000:8000'] } });
      assert.match(
        ports.body.error.message,
        /machine\.ports\[0\]: must be a whole number: a port of the machine such as 8000/,
      );
      const env = await rent(ctx, who, { offerId: offer['h100-a'], machine: { env: ['HF_TOKEN=secret-value'] } });
      assert.match(
        env.body.error.message,
        /machine\.env: must be a valid object: an object of variable names to values/,
      );
      assert.doesNotMatch(env.text, /secret-value/, "a variable's value is never repeated");
      const list = await rent(ctx, who, [1]);
      assert.match(list.body.error.message, /body: must be a JSON object/);
    });

    it("refuses at the edge what machine's and the lease's schema rules out, each in one place, naming the field", async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const cases: [unknown, RegExp][] = [
        [
          { gpus: 2 },
          /^Invalid request: machine: unknown property "gpus"; machine accepts image, env, startupScript, ports, diskGb\.$/,
        ],
        [[], /^Invalid request: machine: must be a valid object\.$/],
        [{ ports: [0] }, /^Invalid request: machine\.ports\[0\]: must be at least 1\.$/],
        [{ ports: [65536] }, /^Invalid request: machine\.ports\[0\]: must be at most 65535\.$/],
        [{ ports: [1, 2, 3, 4, 5, 6] }, /^Invalid request: machine\.ports: must have at most 5 items\.$/],
        [{ diskGb: 0 }, /^Invalid request: machine\.diskGb: must be at least 1\.$/],
        [{ diskGb: 1.5 }, /^Invalid request: machine\.diskGb: must be a whole number\.$/],
        [{ env: { N: 1 } }, /^Invalid request: machine\.env\.N: /],
        [{ image: '' }, /^Invalid request: machine\.image: must have at least 1 characters\.$/],
      ];
      for (const [machine, message] of cases) {
        const res = await rent(ctx, who, { offerId: offer['h100-a'], machine });
        assert.equal(res.status, 422, JSON.stringify(machine));
        assert.equal(res.body.error.code, 'VALIDATION_FAILED');
        assert.match(res.body.error.message, message);
      }
      const short = await rent(ctx, who, { offerId: offer['h100-a'], terminateAfterSeconds: 59 });
      assert.match(short.body.error.message, /^Invalid request: terminateAfterSeconds: must be at least 60\.$/);
      const part = await rent(ctx, who, { offerId: offer['h100-a'], terminateAfterSeconds: 90.5 });
      assert.match(
        part.body.error.message,
        /^Invalid request: terminateAfterSeconds: must be a whole number of seconds/,
      );
      // What no schema states is the domain's, once the schema admitted the body.
      const ssh = await rent(ctx, who, { offerId: offer['h100-a'], machine: { ports: [22] } });
      assert.match(ssh.body.error.message, /^Invalid request: machine\.ports: 22 is SSH's port/);
      assert.equal((await orderRows(who.accountId)).length, 0);
    });

    it('requires an Idempotency-Key of 1 to 128 characters (400 INVALID_REQUEST)', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const missing = await ctx.api.post('/api/v1/rentals').set(who.auth).send({ offerId: offer['h100-a'] });
      assert.equal(missing.status, 400);
      assert.equal(missing.body.error.code, 'INVALID_REQUEST');
      const long = await rent(ctx, who, { offerId: offer['h100-a'] }, 'k'.repeat(129));
      assert.equal(long.status, 400);
      assert.equal(long.body.error.code, 'INVALID_REQUEST');
      const longest = await rent(ctx, who, { offerId: offer['h100-a'] }, 'k'.repeat(128));
      assert.equal(longest.status, 201);
      const one = await rent(ctx, who, { offerId: offer['h100-a'] }, 'k');
      assert.equal(one.status, 201);
    });

    it('needs the rent scope (403 FORBIDDEN) and a valid token (401)', async () => {
      const who = await account(ctx, { creditsMinor: 5000, scopes: ['read', 'manage'] });
      const res = await rent(ctx, who, { offerId: offer['h100-a'] });
      assert.equal(res.status, 403);
      assert.equal(res.body.error.code, 'FORBIDDEN');
      const anon = await ctx.api
        .post('/api/v1/rentals')
        .set('Idempotency-Key', randomUUID())
        .send({ offerId: offer['h100-a'] });
      assert.equal(anon.status, 401);
    });
  });

  describe('idempotency', () => {
    it('replays the same key and body with 200 and the same rental, and refuses a changed intent with 409', async () => {
      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 5000 });
      const key = randomUUID();
      const first = await rent(ctx, who, { offerId: offer['h100-a'], budgetMinor: 600 }, key);
      assert.equal(first.status, 201);
      // Field order does not change the request.
      const again = await rent(ctx, who, { budgetMinor: 600, offerId: offer['h100-a'] }, key);
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal(again.body.data.rentalId, first.body.data.rentalId);
      assert.deepEqual(again.body.data.quote, first.body.data.quote);
      const changed = await rent(ctx, who, { offerId: offer['h100-a'], budgetMinor: 900 }, key);
      assert.equal(changed.status, 409);
      assert.equal(changed.body.error.code, 'IDEMPOTENCY_CONFLICT');
      const otherShape = await rent(
        ctx,
        who,
        { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400, budgetMinor: 600 },
        key,
      );
      assert.equal(otherShape.status, 409);
      assert.equal((await orderRows(who.accountId)).length, 1);
      assert.equal((await balanceOf(ctx, who.accountId)).balance, 4400);
    });

    it('queues one rental.provision job per new deployment, after commit; a replay adds no second one', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const key = randomUUID();
      const first = await rent(ctx, who, { offerId: offer['l4'] }, key);
      assert.equal(first.status, 201);
      const deploymentId = first.body.data.deploymentId;
      assert.deepEqual(await queuedJobs(ctx, deploymentId), [{ name: 'rental.provision', deploymentId }]);
      assert.equal((await rent(ctx, who, { offerId: offer['l4'] }, key)).status, 200);
      assert.deepEqual(await queuedJobs(ctx, deploymentId), [{ name: 'rental.provision', deploymentId }]);
      // A refused request queues nothing.
      const before = await ctx.services.ds.query(`SELECT COUNT(*) AS n FROM agenda_jobs`);
      assert.equal((await rent(ctx, who, { offerId: randomUUID() })).status, 404);
      assert.deepEqual(await ctx.services.ds.query(`SELECT COUNT(*) AS n FROM agenda_jobs`), before);
    });

    it('treats spellings of the same GPU intent as the same request', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const key = randomUUID();
      const a = await rent(ctx, who, { gpuModel: 'NVIDIA H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 }, key);
      const b = await rent(ctx, who, { gpuModel: 'h100sxm', gpuCount: 1, maxHourlyPriceMinor: 400 }, key);
      assert.equal(a.status, 201);
      assert.equal(b.status, 200);
      assert.equal(b.body.data.rentalId, a.body.data.rentalId);
    });

    it('replays a rental even after its offer left the inventory', async () => {
      const who = await account(ctx, { creditsMinor: 5000 });
      const key = randomUUID();
      const body = { gpuModel: 'L4', gpuCount: 1, maxHourlyPriceMinor: 100 };
      const first = await rent(ctx, who, body, key);
      assert.equal(first.status, 201);
      await ctx.setInventory(
        OFFERS.map((o) => (o.key === 'gb200-gone' || o.key === 'l4' ? { ...o, available: false } : o)),
      );
      try {
        const again = await rent(ctx, who, body, key);
        assert.equal(again.status, 200);
        assert.equal(again.body.data.rentalId, first.body.data.rentalId);
        const fresh = await rent(ctx, who, body);
        assert.equal(fresh.status, 422);
        assert.equal(fresh.body.error.code, 'NO_MATCHING_OFFER');
      } finally {
        await ctx.setInventory(OFFERS.map((o) => (o.key === 'gb200-gone' ? { ...o, available: false } : o)));
      }
    });

    it('does not spend a key on a refused request: the same key succeeds once the cause is fixed', async () => {
      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 100 });
      const key = randomUUID();
      const refused = await rent(ctx, who, { offerId: offer['h100-a'], budgetMinor: 600 }, key);
      assert.equal(refused.status, 402);
      await credit(ctx, who.accountId, 1000);
      const ok = await rent(ctx, who, { offerId: offer['h100-a'], budgetMinor: 600 }, key);
      assert.equal(ok.status, 201);
    });

    it('scopes keys to the account: another account with the same key gets its own rental', async () => {
      const a = await account(ctx, { creditsMinor: 5000 });
      const b = await account(ctx, { creditsMinor: 5000 });
      const key = 'shared-key-1';
      const ra = await rent(ctx, a, { offerId: offer['l4'] }, key);
      const rb = await rent(ctx, b, { offerId: offer['h100-a'] }, key);
      assert.equal(ra.status, 201);
      assert.equal(rb.status, 201);
      assert.notEqual(ra.body.data.rentalId, rb.body.data.rentalId);
    });

    it('never answers one key with another key of the same account: 409 for a reused key', async () => {
      const a = await account(ctx, { creditsMinor: 5000 });
      const other = await addKey(ctx, a.accountId);
      const key = randomUUID();
      assert.equal((await rent(ctx, a, { offerId: offer['l4'] }, key)).status, 201);
      const res = await rent(ctx, other, { offerId: offer['l4'] }, key);
      assert.equal(res.status, 409);
      assert.equal(res.body.error.code, 'IDEMPOTENCY_CONFLICT');
    });

    it('creates one rental for concurrent requests with the same key', async () => {
      const who = await account(ctx, { billingModel: 'LEGACY_PREPAID', creditsMinor: 10_000 });
      const key = randomUUID();
      const body = { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400, budgetMinor: 600 };
      const results = await Promise.all(Array.from({ length: 20 }, () => rent(ctx, who, body, key)));
      const statuses = results.map((r) => r.status).sort();
      assert.deepEqual(statuses, [...Array(19).fill(200), 201]);
      assert.equal(new Set(results.map((r) => r.body.data.rentalId)).size, 1);
      assert.equal((await orderRows(who.accountId)).length, 1);
      assert.equal((await deploymentRows(who.accountId)).length, 1);
      assert.equal((await balanceOf(ctx, who.accountId)).balance, 10_000 - 600);
    });
  });

  describe('statements', () => {
    it('admits in one transaction of eleven statements sent in three requests, one commit, with the key read a moment ago', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      // The first request of a key reads it (and stamps last_used_at), and may reload the inventory snapshot.
      assert.equal((await rent(ctx, who, { offerId: offer['h100-a'] })).status, 201);
      const { result: res, sent } = await sentRequests(() => rent(ctx, who, { offerId: offer['h100-b'] }));
      assert.equal(res.status, 201, JSON.stringify(res.body));
      // SqlTransaction joins the statements of one request with `;\n`; the snapshot's version check may come and go.
      const requests = sent
        .filter((s) => !/inventory_state/.test(s))
        .map((s) => s.split(';\n').map((x) => x.trim().split(/\s+/).slice(0, 3).join(' ')));
      // No key lookup: the lock read re-checks the key's revocation (the next test). The account
      // row is written before it is locked, so that admissions on two nodes of a cluster conflict.
      assert.deepEqual(requests, [
        [
          'START TRANSACTION',
          'UPDATE accounts SET',
          'SELECT a.id, a.billing_model,',
          'INSERT IGNORE INTO',
          'SELECT hourly_price_minor, spend_cap_minor,',
          'SELECT usable_at FROM',
        ],
        ['INSERT INTO `orders`', 'INSERT INTO `deployments`', 'UPDATE api_keys SET', 'INSERT INTO agenda_jobs'],
        ['COMMIT'],
      ]);
    });

    it("ends a replay's transaction with ROLLBACK, so the account row it wrote while locking is left as it was", async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      const key = randomUUID();
      const first = await rent(ctx, who, { offerId: offer['h100-a'] }, key);
      assert.equal(first.status, 201);
      const lockVersion = async () =>
        Number(
          (await ctx.services.ds.query('SELECT lock_version FROM accounts WHERE id = ?', [who.accountId]))[0]
            .lock_version,
        );
      const before = await lockVersion();
      const { result: res, sent } = await sentRequests(() => rent(ctx, who, { offerId: offer['h100-a'] }, key));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.data.rentalId, first.body.data.rentalId);
      const requests = sent
        .filter((s) => !/inventory_state/.test(s))
        .map((s) => s.split(';\n').map((x) => x.trim().split(/\s+/).slice(0, 3).join(' ')));
      // The claim found the key used: it reads the claim's row, and the transaction ends.
      assert.deepEqual(requests.slice(0, 3), [
        [
          'START TRANSACTION',
          'UPDATE accounts SET',
          'SELECT a.id, a.billing_model,',
          'INSERT IGNORE INTO',
          'SELECT hourly_price_minor, spend_cap_minor,',
          'SELECT usable_at FROM',
        ],
        ['SELECT * FROM'],
        ['ROLLBACK'],
      ]);
      assert.ok(!requests.flat().includes('COMMIT'), JSON.stringify(requests));
      assert.equal(await lockVersion(), before);
    });

    it('refuses a key revoked in another process on its very next admission, and on every other route', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      assert.equal((await rent(ctx, who, { offerId: offer['h100-a'] })).status, 201);
      // Another process of the service: its own services and memory, the same database.
      const other = await createTestContext({ offers: OFFERS });
      try {
        await other.services.keys.revoke(who.accountId, who.keyId);
      } finally {
        await other.close();
      }
      const before = await orderRows(who.accountId);
      const res = await rent(ctx, who, { offerId: offer['h100-a'] });
      assert.equal(res.status, 401, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'UNAUTHENTICATED');
      assert.equal(res.headers['www-authenticate'], 'Bearer');
      assert.equal((await orderRows(who.accountId)).length, before.length, 'nothing written');
      assert.equal((await ctx.api.get('/api/v1/rentals').set(who.auth)).status, 401);
      // And again: the key is no longer held anywhere.
      assert.equal((await rent(ctx, who, { offerId: offer['h100-a'] })).status, 401);
    });
  });

  describe('under load', () => {
    it('admits exactly 10 of 200 parallel legacy rentals when credits pay for 10', async function () {
      this.timeout(60_000);
      const who = await account(ctx, {
        billingModel: 'LEGACY_PREPAID',
        creditsMinor: 10 * 300,
        maxConcurrentDeployments: 1000,
      });
      const results = await Promise.all(
        Array.from({ length: 200 }, () => rent(ctx, who, { offerId: offer['h100-a'], budgetMinor: 500 })),
      );
      const by = new Map<string, number>();
      for (const r of results) {
        const k = r.status === 201 ? '201' : `${r.status} ${r.body.error?.code}`;
        by.set(k, (by.get(k) ?? 0) + 1);
      }
      assert.deepEqual(Object.fromEntries(by), { '201': 10, '402 INSUFFICIENT_CREDITS': 190 });
      assert.equal((await orderRows(who.accountId)).length, 10);
      assert.equal((await deploymentRows(who.accountId)).length, 10);
      const debits = await ctx.services.ds
        .getRepository(LedgerEntry)
        .findBy({ accountId: who.accountId, kind: 'RENTAL_DEBIT' });
      assert.equal(debits.length, 10);
      assert.ok(debits.every((e) => e.amountMinor === -300));
      assert.deepEqual(await balanceOf(ctx, who.accountId), { balance: 0, entries: 11 });
    });

    it("holds each key's concurrency limit across parallel admissions of one account from many keys", async function () {
      this.timeout(60_000);
      const owner = await signup(ctx);
      await credit(ctx, owner.accountId, 5 * 300);
      const keys = await Promise.all(
        Array.from({ length: 8 }, () => addKey(ctx, owner.accountId, { maxConcurrentDeployments: 1 })),
      );
      // Two requests per key, one key slot each: exactly one per key is admitted.
      const results = await Promise.all(
        keys.flatMap((k) => [rent(ctx, k, { offerId: offer['l4'] }), rent(ctx, k, { offerId: offer['l4'] })]),
      );
      assert.equal(results.filter((r) => r.status === 201).length, 8);
      assert.ok(
        results
          .filter((r) => r.status !== 201)
          .every((r) => r.status === 409 && r.body.error.code === 'CONCURRENCY_LIMIT_REACHED'),
      );
    });
  });
});
