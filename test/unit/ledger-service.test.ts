import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Account } from '../../src/modules/accounts/account.entity.js';
import type { AccountMoney } from '../../src/modules/accounts/accounts.repository.js';
import { AppError } from '../../src/errors/app-error.js';
import { accountEventData, crossesLow, DEFAULT_LOW_CREDITS_MINOR } from '../../src/modules/billing/account-events.js';
import {
  LedgerService,
  postedBalanceMinor,
  type LedgerRepos,
  type Posting,
} from '../../src/modules/billing/ledger.service.js';
import type { UnitRepositories as Repositories } from '../fakes/store/memory-repositories.js';
import { billingWorld, post, principal, T0, type BillingWorld } from '../fakes/billing-services.js';
import type { MemoryKeyRow } from '../fakes/store/accounts.js';
import { memoryEvents } from '../fakes/store/ledger.js';
import { assertMemoryLedgerConsistent, memoryEntries } from '../helpers/memory-ledger.js';

describe('LedgerService (memory store)', () => {
  let w: BillingWorld;
  /** Usage accrued to each key and not posted yet: the part of its net spend no entry holds. */
  let unpostedByKey: Map<string, number>;
  beforeEach(() => {
    w = billingWorld();
    unpostedByKey = new Map();
  });
  afterEach(() => assertMemoryLedgerConsistent(w.store.tables, unpostedByKey));

  const account = (id: string) => w.store.tables.table<Account>('accounts').get(id)!;
  const keyRow = (id: string) => w.store.tables.table<MemoryKeyRow>('api_keys').get(id)!;
  const entries = () => memoryEntries(w.store.tables);
  const events = (type?: string) => memoryEvents(w.store.tables).filter((e) => !type || e.type === type);
  const tx = <T>(fn: (r: Repositories) => Promise<T>) => w.store.transaction((r) => fn(r));
  /** A new account with `balanceMinor` credited by a top-up (no credits.low: it only rises). */
  async function funded(balanceMinor: number) {
    const p = await principal(w);
    if (balanceMinor !== 0) await post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor: balanceMinor });
    return p;
  }
  /** The thrown error of `p`, whatever its type. */
  const thrown = (p: Promise<unknown>) =>
    p.then(
      () => assert.fail('expected it to throw'),
      (e: unknown) => e as Error & { code?: string },
    );
  /** The repositories of one transaction, counting the account locks taken through them. */
  function counting(r: Repositories) {
    const locks = { account: 0, balances: 0 };
    const repos: LedgerRepos = {
      ledger: r.ledger,
      accounts: {
        lockAccount: (id) => (locks.account++, r.accounts.lockAccount(id)),
        lockAccountBalances: (ids) => (locks.balances++, r.accounts.lockAccountBalances(ids)),
      },
    };
    return { repos, locks };
  }

  describe('post', () => {
    it('appends the entry with its cause and moves the cached balance in the same transaction', async () => {
      const p = await principal(w);
      const rentalId = randomUUID();
      const ref = `topup:${randomUUID()}`;
      const { entry, posted } = await post(w, {
        accountId: p.accountId,
        kind: 'TOPUP',
        amountMinor: 2500,
        externalRef: ref,
        description: 'Card top-up',
        keyId: p.keyId,
        rentalId,
      });
      assert.equal(posted, true);
      assert.match(entry.id, /^\d+$/);
      assert.deepEqual(
        { ...entry },
        {
          id: entry.id,
          accountId: p.accountId,
          keyId: p.keyId,
          rentalId,
          kind: 'TOPUP',
          amountMinor: 2500,
          balanceAfterMinor: 2500,
          externalRef: ref,
          description: 'Card top-up',
          createdAt: T0,
        },
      );
      assert.equal(account(p.accountId).balanceMinor, 2500);
      assert.equal(entries().length, 1);
    });

    it('takes a debit off the balance, and the entry says what was left', async () => {
      const p = await funded(1000);
      const { entry } = await post(w, { accountId: p.accountId, kind: 'RENTAL_DEBIT', amountMinor: -300 });
      assert.equal(entry.balanceAfterMinor, 700);
      assert.equal(account(p.accountId).balanceMinor, 700);
      assert.deepEqual(
        entries().map((e) => [e.kind, e.amountMinor, e.balanceAfterMinor]),
        [
          ['TOPUP', 1000, 1000],
          ['RENTAL_DEBIT', -300, 700],
        ],
      );
    });

    it('writes each cause once: a replay answers the first entry and moves nothing', async () => {
      const p = await funded(0);
      const ref = `topup:${randomUUID()}`;
      const first = await post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor: 900, externalRef: ref });
      w.clock.advance(60_000);
      const again = await post(w, {
        accountId: p.accountId,
        kind: 'TOPUP',
        amountMinor: 900,
        externalRef: ref,
        description: 'a retry says it differently',
      });
      assert.equal(again.posted, false);
      assert.equal(again.entry.id, first.entry.id);
      assert.equal(again.entry.description, first.entry.description);
      assert.deepEqual(again.entry.createdAt, T0);
      assert.equal(account(p.accountId).balanceMinor, 900);
      assert.equal(entries().length, 1);
    });

    it('refuses a reference already posted with another amount, kind or account, and the transaction writes nothing', async () => {
      const p = await funded(0);
      const other = await funded(0);
      const ref = `topup:${randomUUID()}`;
      await post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor: 900, externalRef: ref });
      for (const changed of [
        { amountMinor: 901 },
        { kind: 'ADJUSTMENT' as const },
        { accountId: other.accountId },
      ] satisfies Partial<Posting>[]) {
        const err = await thrown(
          tx(async (r) => {
            await w.ledger.post(r, {
              accountId: p.accountId,
              kind: 'TOPUP',
              amountMinor: 5,
              externalRef: `other:${randomUUID()}`,
              description: 'written first in the same transaction',
            });
            return w.ledger.post(r, {
              accountId: p.accountId,
              kind: 'TOPUP',
              amountMinor: 900,
              externalRef: ref,
              description: 'x',
              ...changed,
            });
          }),
        );
        assert.match(err.message, new RegExp(`ledger reference ${ref} was already posted with different terms`));
      }
      assert.equal(entries().length, 1);
      assert.equal(account(p.accountId).balanceMinor, 900);
      assert.equal(account(other.accountId).balanceMinor, 0);
    });

    it("adds a key's rental debits and usage to its net spend and takes its reversals off", async () => {
      const p = await funded(5000);
      await post(w, { accountId: p.accountId, kind: 'RENTAL_DEBIT', amountMinor: -1200, keyId: p.keyId });
      assert.equal(keyRow(p.keyId).netSpentMinor, 1200);
      await post(w, { accountId: p.accountId, kind: 'USAGE', amountMinor: -300, keyId: p.keyId });
      assert.equal(keyRow(p.keyId).netSpentMinor, 1500);
      await post(w, { accountId: p.accountId, kind: 'REVERSAL', amountMinor: 500, keyId: p.keyId });
      assert.equal(keyRow(p.keyId).netSpentMinor, 1000);
      assert.equal(account(p.accountId).balanceMinor, 4000);
    });

    it("leaves a key's net spend alone for top-ups, adjustments and postings that name no key", async () => {
      const p = await funded(0);
      await post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor: 2000, keyId: p.keyId });
      await post(w, { accountId: p.accountId, kind: 'ADJUSTMENT', amountMinor: -100, keyId: p.keyId });
      await post(w, { accountId: p.accountId, kind: 'RENTAL_DEBIT', amountMinor: -400 });
      assert.equal(keyRow(p.keyId).netSpentMinor, 0);
      assert.equal(account(p.accountId).balanceMinor, 1500);
    });

    it('refuses an account that does not exist (404 NOT_FOUND) and writes nothing', async () => {
      const err = await thrown(post(w, { accountId: randomUUID(), kind: 'TOPUP', amountMinor: 100 }));
      assert.ok(err instanceof AppError);
      assert.equal(err.code, 'NOT_FOUND');
      assert.equal(entries().length, 0);
    });

    it('refuses amounts that are not safe integers, and a balance that would leave the safe range', async () => {
      const p = await funded(0);
      for (const amountMinor of [1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 2]) {
        const err = await thrown(post(w, { accountId: p.accountId, kind: 'ADJUSTMENT', amountMinor }));
        assert.match(err.message, /is not a safe integer/);
      }
      await post(w, { accountId: p.accountId, kind: 'ADJUSTMENT', amountMinor: Number.MAX_SAFE_INTEGER });
      const err = await thrown(post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor: 1 }));
      assert.match(err.message, /safe integer range/);
      assert.equal(entries().length, 1);
      assert.equal(account(p.accountId).balanceMinor, Number.MAX_SAFE_INTEGER);
    });

    it('locks the account itself, or trusts the row its caller locked and moves it along', async () => {
      const p = await funded(2000);
      const locks = await tx(async (r) => {
        const c = counting(r);
        await w.ledger.post(c.repos, posting(p.accountId, -100));
        return c.locks;
      });
      assert.deepEqual(locks, { account: 1, balances: 0 });

      const { locked, counted } = await tx(async (r) => {
        const c = counting(r);
        const row = await w.ledger.lockAccount(r, p.accountId);
        await w.ledger.post(c.repos, posting(p.accountId, -200), row);
        await w.ledger.post(c.repos, posting(p.accountId, -300), row);
        return { locked: row, counted: c.locks };
      });
      assert.deepEqual(counted, { account: 0, balances: 0 });
      assert.equal(locked.balanceMinor, 1400, 'the caller sees the balance it left');
      assert.deepEqual(
        entries().map((e) => e.balanceAfterMinor),
        [2000, 1900, 1700, 1400],
      );
    });

    it("refuses a locked row that is not the posting's account", async () => {
      const p = await funded(1000);
      const other = await funded(1000);
      const err = await thrown(
        tx(async (r) => w.ledger.post(r, posting(p.accountId, -100), await w.ledger.lockAccount(r, other.accountId))),
      );
      assert.match(err.message, /not the posting's account/);
      assert.equal(account(p.accountId).balanceMinor, 1000);
    });

    it('counts usage taken but not posted into the balance an entry records', async () => {
      const p = await funded(1000);
      await tx((r) => w.ledger.accrueUsage(r, [{ accountId: p.accountId, keyId: null, amountMinor: 250 }], []));
      assert.equal(account(p.accountId).balanceMinor, 750);
      const { entry } = await post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor: 100 });
      assert.equal(account(p.accountId).balanceMinor, 850);
      assert.equal(entry.balanceAfterMinor, 1100, 'the ledger holds the balance plus the usage no entry holds yet');
      assert.equal(postedBalanceMinor(account(p.accountId)), 1100);
    });

    it('posts once when its transaction loses at commit and runs again', async () => {
      const p = await funded(0);
      const attempts = w.store.attempts;
      w.store.loseNextCommits(2);
      await post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor: 700 });
      assert.equal(w.store.attempts - attempts, 3);
      assert.equal(entries().length, 1);
      assert.equal(account(p.accountId).balanceMinor, 700);
    });

    it('leaves nothing behind when the transaction it joined fails after it', async () => {
      const p = await funded(600);
      await thrown(
        tx(async (r) => {
          await w.ledger.post(r, posting(p.accountId, -200));
          throw new Error('the rest of the transaction failed');
        }),
      );
      assert.equal(account(p.accountId).balanceMinor, 600);
      assert.equal(entries().length, 1);
      assert.equal(events().length, 0);
    });
  });

  describe('credits.low', () => {
    it('is written with the debit that takes the balance under the threshold, as the account now stands', async () => {
      const p = await funded(600);
      w.clock.advance(5000);
      await post(w, { accountId: p.accountId, kind: 'RENTAL_DEBIT', amountMinor: -200, keyId: p.keyId });
      const [low] = events('credits.low');
      assert.ok(low);
      assert.equal(low.accountId, p.accountId);
      assert.equal(low.keyId, null, 'an account event, whichever key spent');
      assert.equal(low.rentalId, null);
      assert.deepEqual(low.createdAt, new Date(T0.getTime() + 5000));
      assert.deepEqual(low.data, {
        balance: { creditsMinor: 400, currency: 'USD', frozen: false },
        billing: { model: 'ACCOUNT_BALANCE', budgetRequired: false },
        thresholdMinor: 500,
      });
    });

    it('is written once per crossing: not again while the balance stays under, again after a top-up', async () => {
      const p = await funded(600);
      await post(w, posting(p.accountId, -200));
      await post(w, posting(p.accountId, -100));
      assert.equal(events('credits.low').length, 1);
      await post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor: 1000 });
      assert.equal(events('credits.low').length, 1, 'a credit never warns');
      await post(w, posting(p.accountId, -900));
      assert.equal(events('credits.low').length, 2);
    });

    it('counts a balance at the threshold as not low: 700 to 500 is quiet, 500 to 499 crosses', async () => {
      const p = await funded(700);
      await post(w, posting(p.accountId, -200));
      assert.equal(events('credits.low').length, 0);
      await post(w, posting(p.accountId, -1));
      assert.equal(events('credits.low').length, 1);
    });

    it('says a budget is required once the balance goes negative', async () => {
      const p = await funded(600);
      await post(w, posting(p.accountId, -700));
      const [low] = events('credits.low');
      assert.deepEqual(low.data, {
        balance: { creditsMinor: -100, currency: 'USD', frozen: false },
        billing: { model: 'ACCOUNT_BALANCE', budgetRequired: true },
        thresholdMinor: 500,
      });
    });

    it('is not written again by a replayed posting', async () => {
      const p = await funded(600);
      const ref = `debit:${randomUUID()}`;
      await post(w, { ...posting(p.accountId, -200), externalRef: ref });
      await post(w, { ...posting(p.accountId, -200), externalRef: ref });
      assert.equal(events('credits.low').length, 1);
      assert.equal(account(p.accountId).balanceMinor, 400);
    });

    it('follows the configured threshold, 500 cents when none is', async () => {
      assert.equal(new LedgerService(w.store, w.clock).lowCreditsMinor, DEFAULT_LOW_CREDITS_MINOR);
      assert.equal(DEFAULT_LOW_CREDITS_MINOR, 500);
      const strict = new LedgerService(w.store, w.clock, { lowCreditsMinor: 2000 });
      const p = await funded(2500);
      await tx((r) => strict.post(r, posting(p.accountId, -600)));
      const [low] = events('credits.low');
      assert.equal((low.data as { thresholdMinor: number }).thresholdMinor, 2000);
    });
  });

  describe('accrueUsage', () => {
    it('does nothing, not even a lock, with no accruals and no postings', async () => {
      const untouchable = new Proxy({} as LedgerRepos, {
        get: () => assert.fail('nothing is read or written'),
      });
      assert.equal(await w.ledger.accrueUsage(untouchable, [], []), 0);
    });

    it("takes usage from the balance at once, into the unposted counter and the key's net spend, with no entry", async () => {
      const p = await funded(3000);
      const written = await tx((r) =>
        w.ledger.accrueUsage(
          r,
          [
            { accountId: p.accountId, keyId: p.keyId, amountMinor: 120 },
            { accountId: p.accountId, keyId: p.keyId, amountMinor: 80 },
          ],
          [],
        ),
      );
      unpostedByKey.set(p.keyId, 200);
      assert.equal(written, 0);
      assert.equal(account(p.accountId).balanceMinor, 2800);
      assert.equal(account(p.accountId).unpostedUsageMinor, 200);
      assert.equal(keyRow(p.keyId).netSpentMinor, 200);
      assert.equal(entries().length, 1);
    });

    it('posts accrued usage as USAGE entries that move it out of the counter and leave the balance', async () => {
      const p = await funded(3000);
      const rentalId = randomUUID();
      await tx((r) => w.ledger.accrueUsage(r, [{ accountId: p.accountId, keyId: p.keyId, amountMinor: 500 }], []));
      w.clock.advance(1000);
      const written = await tx((r) =>
        w.ledger.accrueUsage(
          r,
          [{ accountId: p.accountId, keyId: p.keyId, amountMinor: 100 }],
          [{ ...usage(p.accountId, -600), keyId: p.keyId, rentalId }],
        ),
      );
      assert.equal(written, 1);
      assert.equal(account(p.accountId).balanceMinor, 2400);
      assert.equal(account(p.accountId).unpostedUsageMinor, 0);
      assert.equal(keyRow(p.keyId).netSpentMinor, 600, 'the posting does not count the usage twice');
      const last = entries().at(-1)!;
      assert.equal(last.kind, 'USAGE');
      assert.equal(last.amountMinor, -600);
      assert.equal(last.balanceAfterMinor, 2400);
      assert.equal(last.rentalId, rentalId);
      assert.equal(last.keyId, p.keyId);
      assert.deepEqual(last.createdAt, new Date(T0.getTime() + 1000));
    });

    it('refuses to post more usage than was accrued, and writes none of the call', async () => {
      const p = await funded(3000);
      await tx((r) => w.ledger.accrueUsage(r, [{ accountId: p.accountId, keyId: null, amountMinor: 100 }], []));
      const err = await thrown(
        tx((r) =>
          w.ledger.accrueUsage(
            r,
            [{ accountId: p.accountId, keyId: null, amountMinor: 50 }],
            [usage(p.accountId, -151)],
          ),
        ),
      );
      assert.match(err.message, /would post more usage than it has accrued/);
      assert.equal(account(p.accountId).balanceMinor, 2900);
      assert.equal(account(p.accountId).unpostedUsageMinor, 100);
    });

    it('posts only USAGE debits, and accrues only amounts of zero or more', async () => {
      const p = await funded(3000);
      await tx((r) => w.ledger.accrueUsage(r, [{ accountId: p.accountId, keyId: null, amountMinor: 100 }], []));
      for (const bad of [{ ...usage(p.accountId, -50), kind: 'RENTAL_DEBIT' as const }, usage(p.accountId, 50)]) {
        const err = await thrown(tx((r) => w.ledger.accrueUsage(r, [], [bad])));
        assert.match(err.message, /only accrued usage/);
      }
      const err = await thrown(
        tx((r) => w.ledger.accrueUsage(r, [{ accountId: p.accountId, keyId: null, amountMinor: -1 }], [])),
      );
      assert.match(err.message, /positive amount/);
      assert.equal(account(p.accountId).unpostedUsageMinor, 100);
      assert.equal(entries().length, 1);
    });

    it('refuses usage of an account that does not exist (404 NOT_FOUND)', async () => {
      const err = await thrown(
        tx((r) => w.ledger.accrueUsage(r, [{ accountId: randomUUID(), keyId: null, amountMinor: 10 }], [])),
      );
      assert.ok(err instanceof AppError);
      assert.equal(err.code, 'NOT_FOUND');
    });

    it('refuses a usage reference posted before, and the whole call rolls back', async () => {
      const p = await funded(3000);
      const ref = `usage:${randomUUID()}`;
      await tx((r) =>
        w.ledger.accrueUsage(
          r,
          [{ accountId: p.accountId, keyId: p.keyId, amountMinor: 100 }],
          [{ ...usage(p.accountId, -100), keyId: p.keyId, externalRef: ref }],
        ),
      );
      const err = await thrown(
        tx((r) =>
          w.ledger.accrueUsage(
            r,
            [{ accountId: p.accountId, keyId: p.keyId, amountMinor: 100 }],
            [{ ...usage(p.accountId, -100), keyId: p.keyId, externalRef: ref }],
          ),
        ),
      );
      assert.equal(err.code, 'ER_DUP_ENTRY');
      assert.equal(account(p.accountId).balanceMinor, 2900);
      assert.equal(keyRow(p.keyId).netSpentMinor, 100);
      assert.equal(entries().length, 2);
    });

    it('writes credits.low once per account that crosses, with the balance the whole call left', async () => {
      const a = await funded(600);
      const b = await funded(900);
      const c = await funded(300);
      await tx((r) =>
        w.ledger.accrueUsage(
          r,
          [
            { accountId: a.accountId, keyId: a.keyId, amountMinor: 50 },
            { accountId: a.accountId, keyId: a.keyId, amountMinor: 100 },
            { accountId: b.accountId, keyId: b.keyId, amountMinor: 100 },
            { accountId: c.accountId, keyId: c.keyId, amountMinor: 100 },
          ],
          [],
        ),
      );
      for (const p of [a, b, c]) unpostedByKey.set(p.keyId, p === a ? 150 : 100);
      const low = events('credits.low');
      assert.deepEqual(
        low.map((e) => [e.accountId, (e.data as { balance: { creditsMinor: number } }).balance.creditsMinor]),
        [[a.accountId, 450]],
        'b stays above the threshold and c was under it already',
      );
    });

    it('writes the events of several crossing accounts in account id order', async () => {
      const ps = await Promise.all([funded(510), funded(520), funded(530)]);
      await tx((r) =>
        w.ledger.accrueUsage(
          r,
          ps.map((p) => ({ accountId: p.accountId, keyId: null, amountMinor: 100 })),
          [],
        ),
      );
      assert.deepEqual(
        events('credits.low').map((e) => e.accountId),
        ps.map((p) => p.accountId).sort(),
      );
    });

    it('takes no lock with the balances its caller locked, and moves them along', async () => {
      const p = await funded(1000);
      const { locked, locks } = await tx(async (r) => {
        const c = counting(r);
        const money: Map<string, AccountMoney> = await r.accounts.lockAccountBalances([p.accountId]);
        await w.ledger.accrueUsage(
          c.repos,
          [{ accountId: p.accountId, keyId: null, amountMinor: 300 }],
          [usage(p.accountId, -200)],
          money,
        );
        return { locked: money.get(p.accountId)!, locks: c.locks };
      });
      assert.deepEqual(locks, { account: 0, balances: 0 });
      assert.deepEqual(locked, { balanceMinor: 700, unpostedUsageMinor: 100 });
      assert.equal(account(p.accountId).balanceMinor, 700);
      assert.equal(account(p.accountId).unpostedUsageMinor, 100);
    });
  });

  describe('recent', () => {
    it("pages an account's entries newest first, below an entry, and shows no other account's", async () => {
      const p = await funded(0);
      const other = await funded(999);
      for (const amountMinor of [100, 200, 300, 400])
        await post(w, { accountId: p.accountId, kind: 'TOPUP', amountMinor });
      const first = await w.ledger.recent(p.accountId, 3);
      assert.deepEqual(
        first.map((e) => e.amountMinor),
        [400, 300, 200],
      );
      const rest = await w.ledger.recent(p.accountId, 3, Number(first.at(-1)!.id));
      assert.deepEqual(
        rest.map((e) => e.amountMinor),
        [100],
      );
      assert.equal((await w.ledger.recent(other.accountId)).length, 1);
    });
  });

  describe('account event rules', () => {
    it('crosses low only from at or above the threshold to under it', () => {
      assert.equal(crossesLow(500, 499, 500), true);
      assert.equal(crossesLow(10_000, -1, 500), true);
      assert.equal(crossesLow(501, 500, 500), false);
      assert.equal(crossesLow(499, 100, 500), false);
      assert.equal(crossesLow(100, 600, 500), false);
    });

    it("shows an account's balance and billing as /me does, a frozen or negative one needing a budget", () => {
      assert.deepEqual(accountEventData({ billingModel: 'ACCOUNT_BALANCE', balanceMinor: 42, frozen: false }), {
        balance: { creditsMinor: 42, currency: 'USD', frozen: false },
        billing: { model: 'ACCOUNT_BALANCE', budgetRequired: false },
      });
      assert.equal(
        accountEventData({ billingModel: 'ACCOUNT_BALANCE', balanceMinor: 42, frozen: true }).billing.budgetRequired,
        true,
      );
      assert.equal(
        accountEventData({ billingModel: 'ACCOUNT_BALANCE', balanceMinor: -1, frozen: false }).billing.budgetRequired,
        true,
      );
    });
  });
});

/** A debit of `amountMinor` (negative) under a reference of its own. */
function posting(accountId: string, amountMinor: number): Posting {
  return { accountId, kind: 'RENTAL_DEBIT', amountMinor, externalRef: `debit:${randomUUID()}`, description: 'debit' };
}

/** A posting of usage accrued already. */
function usage(accountId: string, amountMinor: number): Posting {
  return { accountId, kind: 'USAGE', amountMinor, externalRef: `usage:${randomUUID()}`, description: 'usage' };
}
