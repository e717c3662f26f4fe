import assert from 'node:assert/strict';
import { getMetadataArgsStorage } from 'typeorm';
import { AppError } from '../../src/errors/app-error.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import type { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import {
  cardTerms,
  creditTerms,
  maxCheckoutBudget,
  purchasedHours,
  waitingTerms,
  type AdmissionOffer,
  type AdmittingKey,
  type PayingAccount,
} from '../../src/modules/rentals/admission/admission-terms.js';
import { newDeployment, newOrder, rentalDebitTerms } from '../../src/modules/rentals/admission/admission-rows.js';
import { toRentalDto } from '../../src/modules/rentals/wire/rental-dto.js';
import { assertCreditLimits } from '../../src/modules/rentals/admission/admission-guards.js';
import { NO_MACHINE_COLUMNS } from '../../src/modules/rentals/store/machine-secrets.js';
import {
  intentRequestValue,
  rentalIntent as parseIntent,
  type GpuIntent,
} from '../../src/modules/rentals/admission/rental-intent.js';
import type { CreateRentalRequest } from '../../src/modules/rentals/wire/rentals.dto.js';
import { DEFAULT_MACHINE_SETTINGS } from '../../src/providers/provider.js';

const POLICY = { imageAllowlist: [], maxDiskGb: 1000 };
const rentalIntent = (body: CreateRentalRequest) => parseIntent(body, POLICY);
const plain = { machine: { ...DEFAULT_MACHINE_SETTINGS }, terminateAfterSeconds: null };

// The admission terms without a database: the races and the statements stay with the API tests.

function offer(id: string, pricePerHourMinor: number, maximumDurationSeconds = 7 * 24 * 3600): AdmissionOffer {
  return {
    id,
    name: 'NVIDIA H100 SXM',
    gpuCount: 1,
    pricePerHourMinor,
    currency: 'USD',
    maximumDurationSeconds,
    provider: 'local',
  };
}

function caller(
  limits: Partial<
    Pick<ApiKey, 'maxPerRentalMinor' | 'budgetLimitMinor' | 'maxConcurrentDeployments' | 'maxRentalSeconds'>
  > = {},
  billing = false,
): AdmittingKey {
  const key = {
    maxPerRentalMinor: 10_000,
    budgetLimitMinor: 50_000,
    maxConcurrentDeployments: 2,
    maxRentalSeconds: null,
    ...limits,
  } as ApiKey;
  return { key, scopes: billing ? ['rent', 'billing'] : ['rent'] };
}

const balance = (balanceMinor: number, frozen = false): PayingAccount => ({
  billingModel: 'ACCOUNT_BALANCE',
  frozen,
  balanceMinor,
});
const legacy = (balanceMinor: number): PayingAccount => ({
  billingModel: 'LEGACY_PREPAID',
  frozen: false,
  balanceMinor,
});

function refused(code: string, fn: () => unknown, message?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return true;
  });
}

/** The properties an entity declares as columns (read from its decorators, no connection needed). */
function columnsOf(target: object): string[] {
  return getMetadataArgsStorage()
    .columns.filter((c) => c.target === target)
    .map((c) => c.propertyName)
    .sort();
}

const usage = (netSpentMinor = 0, activeDeployments = 0) => ({
  netSpentMinor,
  remainingBudgetMinor: 0,
  activeDeployments,
});
const none = { accountMinor: 0, keyMinor: 0 };

describe('admission terms (no database)', () => {
  describe('the intent', () => {
    it('parses a GPU intent once: spellings of one intent hash equal, a count in the name is taken out', () => {
      const a = rentalIntent({ gpuModel: 'NVIDIA H100 SXM', gpuCount: 2, maxHourlyPriceMinor: 900, budgetMinor: 1000 });
      const b = rentalIntent({ gpuModel: ' 2x h100-sxm ', gpuCount: 2, maxHourlyPriceMinor: 900, budgetMinor: 1000 });
      assert.deepEqual(intentRequestValue(a), intentRequestValue(b));
      assert.equal((b as GpuIntent).gpuModel, 'h100-sxm');
      assert.equal((b as GpuIntent).refusal, null);
      assert.equal((a as GpuIntent).match.key, (b as GpuIntent).match.key);
    });

    it('keeps the value stored idempotency records were hashed from', () => {
      assert.deepEqual(intentRequestValue(rentalIntent({ gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 350 })), {
        kind: 'INTENT',
        gpuSlug: 'h100',
        gpuCount: 1,
        maxHourlyPriceMinor: 350,
        budgetMinor: null,
      });
      assert.deepEqual(
        intentRequestValue(rentalIntent({ offerId: 'ABCDEF00-0000-4000-8000-000000000000', budgetMinor: 700 })),
        {
          kind: 'OFFER',
          offerId: 'abcdef00-0000-4000-8000-000000000000',
          budgetMinor: 700,
        },
      );
    });

    it('carries a count in the name that disagrees with gpuCount as a refusal, not a throw, so a replay is still found first', () => {
      const intent = rentalIntent({ gpuModel: '2x H100', gpuCount: 1, maxHourlyPriceMinor: 900 }) as GpuIntent;
      assert.ok(intent.refusal instanceof AppError);
      assert.equal(intent.refusal.code, 'VALIDATION_FAILED');
    });
  });

  describe('credit terms', () => {
    const cheap = [offer('a', 300), offer('b', 400), offer('c', 500), offer('d', 600)];

    it('an ACCOUNT_BALANCE account without a budget is metered up to the key cap, with at most three candidates', () => {
      const t = creditTerms(balance(1000), caller({ maxPerRentalMinor: 2000 }), null, cheap);
      assert.equal(t.billingModel, 'ACCOUNT_BALANCE');
      assert.equal(t.spendCapMinor, 2000);
      assert.equal(t.totalMinor, 0);
      assert.equal(t.hours, null);
      assert.deepEqual(
        t.candidates.map((o) => o.id),
        ['a', 'b', 'c'],
      );
    });

    it('a budget makes it MAX_SPEND_METERED capped at the budget; one above the key cap is refused, not lowered', () => {
      const t = creditTerms(balance(1000), caller({ maxPerRentalMinor: 2000 }), 700, cheap);
      assert.equal(t.billingModel, 'MAX_SPEND_METERED');
      assert.equal(t.spendCapMinor, 700);
      refused('KEY_LIMIT_EXCEEDED', () => creditTerms(balance(1000), caller({ maxPerRentalMinor: 2000 }), 2001, cheap));
    });

    it('one budget floor for every model; frozen and negative accounts start nothing', () => {
      refused('BUDGET_TOO_SMALL', () => creditTerms(balance(1000), caller(), 499, cheap));
      refused('BUDGET_TOO_SMALL', () => creditTerms(legacy(1000), caller(), 499, cheap));
      refused('ACCOUNT_FROZEN', () => creditTerms(balance(1000, true), caller(), null, cheap), /frozen/);
      refused('ACCOUNT_FROZEN', () => creditTerms(balance(-1), caller(), null, cheap), /negative/);
    });

    it('LEGACY_PREPAID needs a budget, buys whole hours, and keeps only fallbacks that can run them', () => {
      refused('BUDGET_REQUIRED', () => creditTerms(legacy(5000), caller(), null, cheap), /\$5\.00/);
      const short = [offer('x', 300), offer('y', 310, 2 * 3600), offer('z', 320, 3 * 3600)];
      const t = creditTerms(legacy(5000), caller(), 1000, short);
      assert.deepEqual(
        [t.billingModel, t.hours, t.durationSeconds, t.totalMinor],
        ['LEGACY_PREPAID', 3, 3 * 3600, 900],
      );
      assert.deepEqual(
        t.candidates.map((o) => o.id),
        ['x', 'z'],
      );
      refused('BUDGET_TOO_SMALL', () => creditTerms(legacy(5000), caller(), 599, [offer('p', 600)]), /\$6\.00/);
      refused(
        'BUDGET_TOO_SMALL',
        () => creditTerms(legacy(5000), caller(), 5000, [offer('q', 100, 1800)]),
        /less than one hour/,
      );
    });

    it('purchased hours are bounded by the budget and by the offer', () => {
      assert.equal(purchasedHours(1000, offer('a', 300)), 3);
      assert.equal(purchasedHours(100_000, offer('a', 300, 2 * 3600 + 59)), 2);
    });
  });

  describe('credit limits', () => {
    const metered = creditTerms(balance(10_000), caller(), null, [offer('a', 300)]);
    const prepaid = creditTerms(legacy(10_000), caller(), 900, [offer('a', 300)]);

    it('a prepaid purchase above the key per-rental cap is refused', () => {
      refused(
        'KEY_LIMIT_EXCEEDED',
        () => assertCreditLimits(legacy(10_000), caller({ maxPerRentalMinor: 899 }), usage(), none, prepaid),
        /at most 899/,
      );
    });

    it('the key budget counts what it spent and what its running metered rentals reserve', () => {
      assertCreditLimits(balance(10_000), caller({ budgetLimitMinor: 1000 }), usage(700), none, metered);
      refused(
        'KEY_LIMIT_EXCEEDED',
        () =>
          assertCreditLimits(
            balance(10_000),
            caller({ budgetLimitMinor: 1000 }),
            usage(700),
            { accountMinor: 1, keyMinor: 1 },
            metered,
          ),
        /1 reserved/,
      );
    });

    it('a key at its concurrency limit is refused', () => {
      refused('CONCURRENCY_LIMIT_REACHED', () =>
        assertCreditLimits(balance(10_000), caller({ maxConcurrentDeployments: 2 }), usage(0, 2), none, metered),
      );
    });

    it('unreserved credits must pay the first hour (metered) or the whole purchase (prepaid), with the advice for the key', () => {
      assertCreditLimits(balance(300), caller(), usage(), none, metered);
      refused(
        'INSUFFICIENT_CREDITS',
        () => assertCreditLimits(balance(300), caller(), usage(), { accountMinor: 1, keyMinor: 0 }, metered),
        /ask the account owner/,
      );
      refused(
        'INSUFFICIENT_CREDITS',
        () => assertCreditLimits(legacy(899), caller({}, true), usage(), none, prepaid),
        /POST \/api\/v1\/billing\/topups/,
      );
    });
  });

  describe('card terms', () => {
    it('whole hours of the offer, up to its whole maximum duration', () => {
      const week = offer('w', 299);
      assert.equal(maxCheckoutBudget(week), 299 * 7 * 24);
      const t = cardTerms(week, 1000, caller());
      assert.deepEqual([t.billingModel, t.hours, t.totalMinor, t.spendCapMinor], ['LEGACY_PREPAID', 3, 897, null]);
      refused('VALIDATION_FAILED', () => cardTerms(offer('two', 300, 2 * 3600), 601, caller()), /at most 600/);
      refused('BUDGET_TOO_SMALL', () => cardTerms(week, 298, caller()));
    });
  });

  describe('rows', () => {
    const now = new Date('2026-01-02T03:04:05.006Z');
    const who = { id: 'order-1', accountId: 'acc', keyId: 'key', now };

    it('a credit rental of a GPU intent: PENDING, the name as matched, its candidates, every column given', () => {
      const intent = rentalIntent({ gpuModel: '2x H100', gpuCount: 2, maxHourlyPriceMinor: 900, budgetMinor: 1000 });
      const terms = creditTerms(legacy(5000), caller(), 1000, [offer('a', 300), offer('b', 320)]);
      const match = { slug: 'h100', modelsOnSale: ['h100-sxm'] };
      const order = newOrder({ ...who, funding: 'CREDITS' }, intent, match, terms, NO_MACHINE_COLUMNS);
      assert.equal(order.status, 'PENDING');
      assert.equal(order.requestKind, 'INTENT');
      assert.equal(order.offerId, null);
      assert.equal(order.gpuModel, 'H100');
      assert.deepEqual(order.candidateOfferIds, ['a', 'b']);
      assert.deepEqual(
        [order.hourlyPriceMinor, order.totalMinor, order.durationSeconds, order.budgetMinor],
        [300, 900, 3 * 3600, 1000],
      );
      assert.deepEqual(Object.keys(order).sort(), columnsOf(Order));
      assert.ok(Object.values(order).every((v) => v !== undefined));
      const d = newDeployment('dep-1', order, terms);
      assert.deepEqual(
        [d.status, d.offerId, d.providerId, d.hoursPurchased, d.attempt, d.usageMinor],
        ['PENDING', 'a', 'local', 3, 0, 0],
      );
      assert.deepEqual(Object.keys(d).sort(), columnsOf(Deployment));
      assert.ok(Object.values(d).every((v) => v !== undefined));
      assert.deepEqual(rentalDebitTerms(order, terms), {
        amountMinor: -900,
        description: 'Rental order-1: 3 h at 300 cents/h',
      });
    });

    it("a family intent's match note suggests only the models on sale for it at admission, and says when none is", () => {
      const intent = rentalIntent({ gpuModel: 'A100', gpuCount: 1, maxHourlyPriceMinor: 900 });
      const named = (id: string, name: string, price: number) => ({ ...offer(id, price), name });
      const terms = creditTerms(balance(5000), caller(), null, [
        named('a', 'A100 SXM4 40GB', 129),
        named('b', 'A100 SXM4 80GB', 179),
      ]);
      const rental = { ...who, funding: 'CREDITS' as const };
      const orderWith = (modelsOnSale: string[]) =>
        newOrder(rental, intent, { slug: 'a100', modelsOnSale }, terms, NO_MACHINE_COLUMNS);
      const taken =
        '"A100" names the family A100, so the cheapest offer of any of its models was taken. The cheapest offer was A100 SXM4 40GB (40 GB).';
      assert.equal(
        orderWith(['a100-sxm4-40gb', 'a100-sxm4-80gb']).matchNote,
        `${taken} To choose, name a model on sale at admission for this gpuCount, price ceiling and machine settings: "A100 80GB" for 80 GB, or "A100 SXM4 80GB".`,
      );
      assert.equal(
        orderWith(['a100-sxm4-40gb']).matchNote,
        `${taken} No other model of A100 was on sale at admission for this gpuCount, price ceiling and machine settings; naming a model narrows the choice to that model alone.`,
      );
      // Reads show the note kept; an order admitted before notes were kept gets one that suggests no model.
      const order = orderWith(['a100-sxm4-40gb', 'a100-pcie-40gb']);
      const machine = { gpuName: 'A100 SXM4 40GB', gpuCount: 1, provider: 'local' };
      assert.match(order.matchNote!, /settings: "A100 PCIe 40GB"\.$/);
      assert.deepEqual(
        [toRentalDto(order, null, machine).matchedBy, toRentalDto(order, null, machine).matchNote],
        ['family', order.matchNote],
      );
      const older = toRentalDto({ ...order, matchNote: null }, null, machine);
      assert.equal(older.matchedBy, 'family');
      assert.equal(
        older.matchNote,
        `${taken} To choose, name one of its models; GET /api/v1/offers?gpu=a100 lists those on sale now.`,
      );
      const byOffer = newOrder(rental, rentalIntent({ offerId: 'a' }), null, terms, NO_MACHINE_COLUMNS);
      assert.equal(byOffer.matchNote, null);
      assert.equal(toRentalDto(byOffer, null, machine).matchedBy, 'offer');
    });

    it('a card order: AWAITING_PAYMENT, the offer asked for, the whole price charged to the card', () => {
      const terms = cardTerms(offer('w', 299), 1000, caller());
      const order = newOrder(
        { ...who, funding: 'CARD' },
        { kind: 'OFFER', offerId: 'w', budgetMinor: 1000, ...plain },
        null,
        terms,
        NO_MACHINE_COLUMNS,
      );
      assert.deepEqual(
        [order.status, order.funding, order.requestKind, order.offerId, order.totalMinor],
        ['AWAITING_PAYMENT', 'CARD', 'OFFER', 'w', 897],
      );
      const d = newDeployment('dep-2', order, terms);
      assert.deepEqual(
        [d.status, d.billingModel, d.hoursPurchased, d.hourlyPriceMinor],
        ['AWAITING_PAYMENT', 'LEGACY_PREPAID', 3, 299],
      );
    });

    it('a metered rental debits nothing at admission', () => {
      const terms = creditTerms(balance(5000), caller(), null, [offer('a', 300)]);
      const order = newOrder(
        { ...who, funding: 'CREDITS' },
        rentalIntent({ offerId: 'a' }),
        null,
        terms,
        NO_MACHINE_COLUMNS,
      );
      assert.equal(rentalDebitTerms(order, terms), null);
    });

    it('an intent admitted to wait for capacity: no candidate, the ceiling as its price, the phase and the deadline', () => {
      const intent = rentalIntent({
        gpuModel: 'H100',
        gpuCount: 1,
        maxHourlyPriceMinor: 400,
        waitForCapacitySeconds: 1800,
      }) as GpuIntent;
      const terms = waitingTerms(balance(5000), caller(), intent);
      assert.deepEqual([terms.candidates, terms.hourlyPriceMinor, terms.billingModel], [[], 400, 'ACCOUNT_BALANCE']);
      const match = { slug: 'h100', modelsOnSale: [] };
      const order = newOrder({ ...who, funding: 'CREDITS' }, intent, match, terms, NO_MACHINE_COLUMNS);
      assert.deepEqual([order.offerId, order.candidateOfferIds, order.hourlyPriceMinor], [null, [], 400]);
      assert.match(
        order.matchNote!,
        /None was on sale at admission for this gpuCount, price ceiling and machine settings/,
      );
      assert.equal(order.waitForCapacityUntil?.toISOString(), new Date(now.getTime() + 1800_000).toISOString());
      const d = newDeployment('dep-3', order, terms);
      assert.deepEqual(
        [d.offerId, d.providerId, d.phase, d.phaseSince?.toISOString()],
        [null, null, 'waiting_for_capacity', now.toISOString()],
      );
    });
  });

  describe('leases and waiting', () => {
    it('the lease asked for is kept, and fallbacks that cannot run it are dropped', () => {
      const t = creditTerms(
        balance(5000),
        caller(),
        null,
        [offer('a', 300, 7200), offer('short', 310, 1800), offer('b', 320, 7200)],
        3600,
      );
      assert.equal(t.leaseSeconds, 3600);
      assert.deepEqual(
        t.candidates.map((o) => o.id),
        ['a', 'b'],
      );
    });

    it("a key's longest rental is the lease of a rental without one, and a longer lease is refused, never shortened", () => {
      assert.equal(
        creditTerms(balance(5000), caller({ maxRentalSeconds: 5400 }), null, [offer('a', 300)]).leaseSeconds,
        5400,
      );
      refused(
        'VALIDATION_FAILED',
        () => creditTerms(balance(5000), caller({ maxRentalSeconds: 5400 }), null, [offer('a', 300)], 7200),
        /terminateAfterSeconds.*5400/,
      );
      assert.equal(cardTerms(offer('w', 500), 500, caller({ maxRentalSeconds: 3600 })).leaseSeconds, 3600);
    });

    it('a prepaid purchase longer than its lease is refused with the budget that fits, never shortened', () => {
      refused(
        'VALIDATION_FAILED',
        () => creditTerms(legacy(5000), caller(), 1000, [offer('a', 300)], 3600),
        /buys 3 whole hours.*at most 300 \(1 hour/,
      );
      refused(
        'VALIDATION_FAILED',
        () => creditTerms(legacy(5000), caller({ maxRentalSeconds: 1800 }), 1000, [offer('a', 300)]),
        /lease must be at least 3600/,
      );
      assert.equal(creditTerms(legacy(5000), caller(), 600, [offer('a', 300)], 7200).hours, 2);
      refused(
        'VALIDATION_FAILED',
        () => cardTerms(offer('w', 299), 1000, caller({ maxRentalSeconds: 7200 })),
        /buys 3 whole hours/,
      );
    });

    it('only a metered account may wait for capacity', () => {
      const intent = rentalIntent({
        gpuModel: 'H100',
        gpuCount: 1,
        maxHourlyPriceMinor: 400,
        budgetMinor: 1000,
        waitForCapacitySeconds: 600,
      }) as GpuIntent;
      refused('VALIDATION_FAILED', () => waitingTerms(legacy(5000), caller(), intent), /waitForCapacitySeconds/);
    });

    it('settings, a lease and a wait change the idempotency value; a plain request hashes as it always did', () => {
      const base = { gpuModel: 'H100', gpuCount: 1 as const, maxHourlyPriceMinor: 400 };
      const plainValue = intentRequestValue(rentalIntent(base));
      assert.deepEqual(Object.keys(plainValue).sort(), [
        'budgetMinor',
        'gpuCount',
        'gpuSlug',
        'kind',
        'maxHourlyPriceMinor',
      ]);
      const withEnv = (v: string) => intentRequestValue(rentalIntent({ ...base, machine: { env: { TOKEN: v } } }));
      assert.notDeepEqual(withEnv('a'), plainValue);
      assert.notDeepEqual(withEnv('a'), withEnv('b'));
      assert.ok(
        !JSON.stringify(withEnv('s3cret-value')).includes('s3cret-value'),
        'a secret value never enters the record',
      );
      assert.notDeepEqual(intentRequestValue(rentalIntent({ ...base, terminateAfterSeconds: 600 })), plainValue);
      assert.notDeepEqual(intentRequestValue(rentalIntent({ ...base, waitForCapacitySeconds: 600 })), plainValue);
      assert.deepEqual(
        intentRequestValue(rentalIntent({ ...base, machine: { ports: [9000, 8000] } })),
        intentRequestValue(rentalIntent({ ...base, machine: { ports: [8000, 9000] } })),
      );
    });
  });
});
