import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '../../src/clock.js';
import type { Store } from '../../src/db/store.js';
import type { AccountsRepository } from '../../src/modules/accounts/accounts.repository.js';
import type { LedgerKind } from '../../src/modules/billing/ledger-entry.entity.js';
import type { LedgerRepository, NewLedgerEntry } from '../../src/modules/billing/ledger.repository.js';
import { LedgerService, rentalSpentMinor, type Posting } from '../../src/modules/billing/ledger.service.js';
import { newAccount, newKey } from './accounts.contract.js';

export type LedgerStore = Store<{ ledger: LedgerRepository; accounts: AccountsRepository }>;

/** An event as the contract reads it back from the event log. */
export interface LoggedEvent {
  type: string;
  accountId: string;
  keyId: string | null;
  data: unknown;
}

/** A store, and what the contract needs around it. */
export interface LedgerFixture {
  store: LedgerStore;
  /** The events written for an account, oldest first (the event log is another aggregate's). */
  eventsOf(accountId: string): Promise<LoggedEvent[]>;
  /**
   * Takes the accounts' entries and money back to nothing after a test (the MariaDB run checks
   * every account and key against its ledger after each test; usage accrued here has no rental).
   */
  reset(accountIds: readonly string[], keyIds: readonly string[]): Promise<void>;
}

const T0 = new Date('2026-05-01T12:00:00.250Z');

/**
 * What every store's ledger repository does, and LedgerService's postings on it, run on MariaDB
 * (test/store/) and on the memory store (test/unit/).
 */
export function ledgerContract(kind: string, makeFixture: () => Promise<LedgerFixture>): void {
  describe(`ledger repository (${kind})`, () => {
    let f: LedgerFixture;
    let store: LedgerStore;
    let ledger: LedgerService;
    const clock = new ManualClock(T0);
    let accounts: string[];
    let keys: string[];
    before(async () => {
      f = await makeFixture();
      store = f.store;
      ledger = new LedgerService(store, clock, { lowCreditsMinor: 500 });
    });
    beforeEach(() => {
      accounts = [];
      keys = [];
    });
    afterEach(() => f.reset(accounts, keys));

    async function account(): Promise<string> {
      const a = newAccount();
      await store.transaction((r) => r.accounts.insert(a));
      accounts.push(a.id);
      return a.id;
    }

    async function key(accountId: string): Promise<string> {
      const k = newKey(accountId);
      await store.transaction((r) => r.accounts.keys.insert(k));
      keys.push(k.id);
      return k.id;
    }

    const entry = (accountId: string, o: Partial<NewLedgerEntry> = {}): NewLedgerEntry => ({
      accountId,
      keyId: null,
      rentalId: null,
      kind: 'TOPUP',
      amountMinor: 1000,
      balanceAfterMinor: 1000,
      externalRef: `contract:${randomUUID()}`,
      description: 'contract entry',
      createdAt: T0,
      ...o,
    });

    const money = (id: string) => store.read((r) => r.accounts.get(id));
    const spent = async (keyId: string) =>
      (await store.read((r) => r.accounts.keys.counters([keyId]))).get(keyId)!.netSpentMinor;
    const post = (p: Posting) => store.transaction((r) => ledger.post(r, p));
    const posting = (accountId: string, amountMinor: number, o: Partial<Posting> = {}): Posting => ({
      accountId,
      kind: 'ADJUSTMENT',
      amountMinor,
      externalRef: `contract:${randomUUID()}`,
      description: 'contract posting',
      ...o,
    });

    describe('entries', () => {
      it('appends an entry with a decimal string id and finds it by its reference', async () => {
        const a = await account();
        const e = entry(a, { rentalId: randomUUID(), description: 'with a rental' });
        const written = await store.transaction((r) => r.ledger.insert(e));
        assert.match(written.id, /^[1-9][0-9]*$/);
        const found = await store.read((r) => r.ledger.entryByRef(e.externalRef));
        assert.ok(found);
        assert.equal(found.id, written.id);
        assert.equal(typeof found.amountMinor, 'number');
        assert.deepEqual(
          { ...found, createdAt: found.createdAt.getTime() },
          { ...e, id: written.id, createdAt: T0.getTime() },
        );
        assert.equal(await store.read((r) => r.ledger.entryByRef(`contract:${randomUUID()}`)), null);
      });

      it('refuses a reference already posted (ER_DUP_ENTRY), and the transaction writes nothing', async () => {
        const a = await account();
        const e = entry(a);
        await store.transaction((r) => r.ledger.insert(e));
        const again = entry(a, { externalRef: e.externalRef, amountMinor: 5 });
        await assert.rejects(
          store.transaction(async (r) => {
            await r.ledger.setBalance(a, 77);
            await r.ledger.insert(again);
          }),
          (err: { code?: string }) => err.code === 'ER_DUP_ENTRY',
        );
        assert.equal((await store.read((r) => r.ledger.entryByRef(e.externalRef)))?.amountMinor, 1000);
        assert.equal((await money(a)).balanceMinor, 0);
      });

      it('appends many entries in one call, none for an empty list, and none of a batch with a taken reference', async () => {
        const a = await account();
        const batch = [entry(a), entry(a, { kind: 'USAGE', amountMinor: -5 })];
        await store.transaction((r) => r.ledger.insertMany(batch));
        await store.transaction((r) => r.ledger.insertMany([]));
        for (const e of batch) assert.ok(await store.read((r) => r.ledger.entryByRef(e.externalRef)));
        const fresh = entry(a);
        await assert.rejects(
          store.transaction((r) => r.ledger.insertMany([fresh, entry(a, { externalRef: batch[0].externalRef })])),
          (err: { code?: string }) => err.code === 'ER_DUP_ENTRY',
        );
        assert.equal(await store.read((r) => r.ledger.entryByRef(fresh.externalRef)), null);
        const all = await store.read((r) => r.ledger.visible({ kind: 'OWNER', accountId: a }, 10));
        assert.equal(all.length, 2);
      });

      it('lists what a viewer sees newest first, a page at a time below an id', async () => {
        const a = await account();
        const [k1, k2] = [await key(a), await key(a)];
        const refs: string[] = [];
        for (const keyId of [k1, null, k2, k1, k1]) {
          const e = entry(a, { keyId });
          refs.push(e.externalRef);
          await store.transaction((r) => r.ledger.insert(e));
        }
        const other = await account();
        await store.transaction((r) => r.ledger.insert(entry(other)));
        const owner = await store.read((r) => r.ledger.visible({ kind: 'OWNER', accountId: a }, 10));
        assert.deepEqual(
          owner.map((e) => e.externalRef),
          [...refs].reverse(),
        );
        const page = await store.read((r) => r.ledger.visible({ kind: 'OWNER', accountId: a }, 2));
        assert.deepEqual(
          page.map((e) => e.externalRef),
          [refs[4], refs[3]],
        );
        const below = await store.read((r) => r.ledger.visible({ kind: 'OWNER', accountId: a }, 2, Number(page[1].id)));
        assert.deepEqual(
          below.map((e) => e.externalRef),
          [refs[2], refs[1]],
        );
        const agent = await store.read((r) => r.ledger.visible({ kind: 'AGENT', accountId: a, keyId: k1 }, 10));
        assert.deepEqual(
          agent.map((e) => e.externalRef),
          [refs[4], refs[3], refs[0]],
        );
        const stranger = await store.read((r) => r.ledger.visible({ kind: 'AGENT', accountId: other, keyId: k1 }, 10));
        assert.deepEqual(stranger, []);
      });
    });

    describe('cached figures', () => {
      it('sets one balance, or many balances and unposted usage at once, leaving other accounts as they were', async () => {
        const [a, b, c] = [await account(), await account(), await account()];
        await store.transaction((r) => r.ledger.setBalance(a, 250));
        assert.equal((await money(a)).balanceMinor, 250);
        await store.transaction((r) =>
          r.ledger.setBalances(
            new Map([
              [a, { balanceMinor: 10, unpostedUsageMinor: 5 }],
              [b, { balanceMinor: -3, unpostedUsageMinor: 0 }],
            ]),
          ),
        );
        await store.transaction((r) => r.ledger.setBalances(new Map()));
        assert.deepEqual(
          [await money(a), await money(b), await money(c)].map((m) => [m.balanceMinor, m.unpostedUsageMinor]),
          [
            [10, 5],
            [-3, 0],
            [0, 0],
          ],
        );
      });

      it("adds to one key's net spend, or to many at once, a reversal taking it back", async () => {
        const a = await account();
        const [k1, k2, k3] = [await key(a), await key(a), await key(a)];
        await store.transaction((r) => r.ledger.addKeySpend(k1, 300));
        await store.transaction((r) => r.ledger.addKeySpend(k1, -100));
        await store.transaction((r) =>
          r.ledger.addKeySpends(
            new Map([
              [k1, 5],
              [k2, 40],
            ]),
          ),
        );
        await store.transaction((r) => r.ledger.addKeySpends(new Map()));
        assert.deepEqual([await spent(k1), await spent(k2), await spent(k3)], [205, 40, 0]);
      });

      it("sums a rental's entries of the kinds asked for, a transaction seeing its own (rentalSpentMinor)", async () => {
        const a = await account();
        const rental = randomUUID();
        const of = (kind: LedgerKind, amountMinor: number, rentalId: string | null = rental) =>
          entry(a, { kind, amountMinor, rentalId });
        await store.transaction((r) =>
          r.ledger.insertMany([
            of('RENTAL_DEBIT', -700),
            of('USAGE', -120),
            of('REVERSAL', 300),
            of('TOPUP', 5000),
            of('USAGE', -9, randomUUID()),
            of('USAGE', -11, null),
          ]),
        );
        assert.equal(await store.read((r) => r.ledger.sumOfRental(rental, ['RENTAL_DEBIT', 'USAGE'])), -820);
        assert.equal(await store.read((r) => rentalSpentMinor(r.ledger, rental)), 520);
        assert.equal(await store.read((r) => rentalSpentMinor(r.ledger, randomUUID())), 0);
        const inside = await store.transaction(async (r) => {
          await r.ledger.insert(of('USAGE', -30));
          return rentalSpentMinor(r.ledger, rental);
        });
        assert.equal(inside, 550);
      });

      it('writes an account event in the transaction, and a rolled-back one writes none', async () => {
        const a = await account();
        const event = { type: 'credits.low' as const, accountId: a, keyId: null, rentalId: null, at: T0 };
        await store.transaction((r) => r.ledger.appendEvent({ ...event, data: { thresholdMinor: 500 } }));
        await store.transaction(async (r, tx) => {
          await r.ledger.appendEvent({ ...event, data: { thresholdMinor: 1 } });
          tx.rollBackAtEnd();
        });
        assert.deepEqual(await f.eventsOf(a), [
          { type: 'credits.low', accountId: a, keyId: null, data: { thresholdMinor: 500 } },
        ]);
      });
    });

    describe('postings (LedgerService)', () => {
      it("posts once per reference: the entry, the balance after it and the key's spend move once", async () => {
        const a = await account();
        const k = await key(a);
        await post(posting(a, 2000, { kind: 'TOPUP', keyId: k }));
        const debit = posting(a, -700, { kind: 'RENTAL_DEBIT', keyId: k, rentalId: randomUUID() });
        const first = await post(debit);
        const again = await post(debit);
        assert.equal(first.posted, true);
        assert.equal(again.posted, false);
        assert.equal(again.entry.id, first.entry.id);
        assert.equal(first.entry.balanceAfterMinor, 1300);
        assert.equal((await money(a)).balanceMinor, 1300);
        // A top-up is not spending; the debit is, once.
        assert.equal(await spent(k), 700);
      });

      it('refuses a reference posted with other terms, and an account that does not exist (NOT_FOUND)', async () => {
        const a = await account();
        const p = posting(a, 100);
        await post(p);
        await assert.rejects(post({ ...p, amountMinor: 101 }), /already posted with different terms/);
        await assert.rejects(post(posting(randomUUID(), 100)), (e: { code?: string }) => e.code === 'NOT_FOUND');
        assert.equal((await money(a)).balanceMinor, 100);
      });

      it('writes credits.low once per crossing of the threshold, carrying the balance it left', async () => {
        const a = await account();
        await post(posting(a, 800));
        await post(posting(a, -400));
        await post(posting(a, -100));
        await post(posting(a, 1000));
        await post(posting(a, -900));
        const events = await f.eventsOf(a);
        assert.deepEqual(
          events.map((e) => [e.type, (e.data as { balance: { creditsMinor: number } }).balance.creditsMinor]),
          [
            ['credits.low', 400],
            ['credits.low', 400],
          ],
        );
        assert.equal((events[0].data as { thresholdMinor: number }).thresholdMinor, 500);
      });

      it('accrues usage from the balance into unposted usage and posts it to the ledger later, the sum holding', async () => {
        const a = await account();
        const k = await key(a);
        await post(posting(a, 1000, { kind: 'TOPUP' }));
        const usage = (amountMinor: number, o: Partial<Posting> = {}) =>
          posting(a, amountMinor, { kind: 'USAGE' as LedgerKind, keyId: k, ...o });
        const written = await store.transaction((r) =>
          ledger.accrueUsage(r, [{ accountId: a, keyId: k, amountMinor: 300 }], []),
        );
        assert.equal(written, 0);
        let m = await money(a);
        assert.deepEqual([m.balanceMinor, m.unpostedUsageMinor, await spent(k)], [700, 300, 300]);
        const posted = await store.transaction((r) =>
          ledger.accrueUsage(r, [{ accountId: a, keyId: k, amountMinor: 50 }], [usage(-350)]),
        );
        assert.equal(posted, 1);
        m = await money(a);
        assert.deepEqual([m.balanceMinor, m.unpostedUsageMinor, await spent(k)], [650, 0, 350]);
        const entries = await store.read((r) => r.ledger.visible({ kind: 'OWNER', accountId: a }, 10));
        assert.equal(
          entries.reduce((s, e) => s + e.amountMinor, 0),
          m.balanceMinor + m.unpostedUsageMinor,
        );
        assert.equal(entries[0].balanceAfterMinor, 650);
        await assert.rejects(
          store.transaction((r) => ledger.accrueUsage(r, [], [usage(-1)])),
          /more usage than it has accrued/,
        );
        await assert.rejects(
          store.transaction((r) => ledger.accrueUsage(r, [{ accountId: a, keyId: k, amountMinor: -1 }], [])),
          /positive amount/,
        );
      });

      it('writes credits.low once for a sweep that takes an account under the threshold', async () => {
        const a = await account();
        await post(posting(a, 600));
        await store.transaction((r) =>
          ledger.accrueUsage(
            r,
            [
              { accountId: a, keyId: null, amountMinor: 60 },
              { accountId: a, keyId: null, amountMinor: 60 },
            ],
            [],
          ),
        );
        const events = await f.eventsOf(a);
        assert.equal(events.length, 1);
        assert.equal((events[0].data as { balance: { creditsMinor: number } }).balance.creditsMinor, 480);
      });

      it('leaves nothing of a posting whose transaction rolls back', async () => {
        const a = await account();
        const p = posting(a, 900);
        const result = await store.transaction(async (r, tx) => {
          tx.rollBackAtEnd();
          return ledger.post(r, p);
        });
        assert.equal(result.posted, true);
        assert.equal(await store.read((r) => r.ledger.entryByRef(p.externalRef)), null);
        assert.equal((await money(a)).balanceMinor, 0);
        assert.equal((await post(p)).posted, true);
      });

      it('lists the newest entries of an account for its holder (recent)', async () => {
        const a = await account();
        const refs = [posting(a, 10), posting(a, 20), posting(a, 30)];
        for (const p of refs) await post(p);
        const recent = await ledger.recent(a, 2);
        assert.deepEqual(
          recent.map((e) => [e.externalRef, e.balanceAfterMinor]),
          [
            [refs[2].externalRef, 60],
            [refs[1].externalRef, 30],
          ],
        );
      });
    });
  });
}
