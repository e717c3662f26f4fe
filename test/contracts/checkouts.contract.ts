import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { AccountsRepository } from '../../src/modules/accounts/accounts.repository.js';
import { Checkout } from '../../src/modules/billing/checkout.entity.js';
import type { CheckoutsRepository } from '../../src/modules/billing/checkouts.repository.js';
import { newAccount } from './accounts.contract.js';

export type CheckoutsStore = Store<{ checkouts: CheckoutsRepository; accounts: AccountsRepository }>;

const T0 = new Date('2026-05-01T12:00:00.500Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

export function newCheckout(accountId: string, o: Partial<Checkout> = {}): Checkout {
  return Object.assign(new Checkout(), {
    id: randomUUID(),
    purpose: 'TOPUP',
    accountId,
    keyId: null,
    orderId: null,
    amountMinor: 2500,
    currency: 'USD',
    status: 'CREATING',
    provider: 'stripe',
    sessionId: null,
    checkoutUrl: null,
    expiresAt: null,
    paidAt: null,
    paidEventId: null,
    refundId: null,
    refundedAt: null,
    refundStatus: null,
    refundRequestedAt: null,
    refundAttempts: 0,
    createdAt: T0,
    updatedAt: T0,
    ...o,
  });
}

const plain = <T extends object>(x: T) => ({ ...x });
const isDuplicate = (err: { code?: string }) => err.code === 'ER_DUP_ENTRY';

/**
 * What every store's checkouts repository does (checkouts and their payment events), run on
 * MariaDB (test/store/) and on the memory store (test/unit/). The MariaDB database is shared by
 * a worker's files, so reads of every checkout (refunds due, stale sessions) are read for this
 * test's rows, dated long before anyone else's.
 */
export function checkoutsContract(kind: string, makeStore: () => Promise<CheckoutsStore>): void {
  describe(`checkouts repository (${kind})`, () => {
    let store: CheckoutsStore;
    let accountId: string;
    before(async () => (store = await makeStore()));
    beforeEach(async () => {
      const a = newAccount();
      await store.transaction((r) => r.accounts.insert(a));
      accountId = a.id;
    });

    const insert = async (o: Partial<Checkout> = {}) => {
      const c = newCheckout(accountId, o);
      await store.transaction((r) => r.checkouts.insert(c));
      return c;
    };
    const find = (id: string) => store.read((r) => r.checkouts.find(id));

    describe('rows', () => {
      it('writes a checkout and reads it back whole; get refuses an id it does not hold', async () => {
        const c = await insert({ keyId: null, expiresAt: at(60) });
        const found = await find(c.id);
        assert.ok(found instanceof Checkout);
        assert.deepEqual(plain(found), plain(c));
        assert.deepEqual(plain(await store.read((r) => r.checkouts.get(c.id))), plain(c));
        assert.equal(await find(randomUUID()), null);
        await assert.rejects(store.read((r) => r.checkouts.get(randomUUID())));
      });

      it("refuses a card order's second checkout (ER_DUP_ENTRY), and a rolled-back insert leaves nothing", async () => {
        const orderId = randomUUID();
        await insert({ purpose: 'ORDER', orderId });
        const second = newCheckout(accountId, { purpose: 'ORDER', orderId });
        await assert.rejects(
          store.transaction((r) => r.checkouts.insert(second)),
          isDuplicate,
        );
        assert.equal(await find(second.id), null);
        const dropped = newCheckout(accountId);
        await store.transaction(async (r, tx) => {
          await r.checkouts.insert(dropped);
          tx.rollBackAtEnd();
        });
        assert.equal(await find(dropped.id), null);
      });

      it('refuses a second checkout of one provider session (ER_DUP_ENTRY)', async () => {
        const sessionId = `cs_${randomUUID()}`;
        await insert({ status: 'OPEN', sessionId });
        const other = await insert();
        await assert.rejects(
          store.transaction((r) => r.checkouts.insert(newCheckout(accountId, { sessionId }))),
          isDuplicate,
        );
        await assert.rejects(
          store.transaction((r) => r.checkouts.markPaid(other.id, 'evt_x', sessionId, at(1))),
          isDuplicate,
        );
        assert.equal((await find(other.id))?.status, 'CREATING');
      });

      it('shows a top-up to its key and to the account holder only', async () => {
        const keyId = randomUUID();
        const topup = await insert({ keyId });
        const order = await insert({ purpose: 'ORDER', orderId: randomUUID(), keyId });
        const visible = (viewer: Parameters<CheckoutsRepository['visibleTopup']>[0], id: string) =>
          store.read((r) => r.checkouts.visibleTopup(viewer, id));
        assert.equal((await visible({ kind: 'AGENT', accountId, keyId }, topup.id))?.id, topup.id);
        assert.equal((await visible({ kind: 'OWNER', accountId }, topup.id))?.id, topup.id);
        assert.equal(await visible({ kind: 'AGENT', accountId, keyId: randomUUID() }, topup.id), null);
        assert.equal(await visible({ kind: 'OWNER', accountId: randomUUID() }, topup.id), null);
        assert.equal(await visible({ kind: 'OWNER', accountId }, order.id), null);
      });
    });

    describe('sessions and status', () => {
      it('stores a session only while the checkout is CREATING', async () => {
        const c = await insert();
        const session = (n: number) => ({
          status: 'OPEN' as const,
          sessionId: `cs_${n}_${c.id}`,
          checkoutUrl: `https://pay.example/${n}`,
          expiresAt: at(3600),
          updatedAt: at(n),
        });
        await store.read((r) => r.checkouts.storeSession(c.id, session(1)));
        await store.read((r) => r.checkouts.storeSession(c.id, session(2)));
        const stored = await find(c.id);
        assert.deepEqual(
          [stored?.status, stored?.sessionId, stored?.checkoutUrl, stored?.expiresAt?.getTime()],
          ['OPEN', `cs_1_${c.id}`, 'https://pay.example/1', at(3600).getTime()],
        );
        assert.equal(stored?.updatedAt.getTime(), at(1).getTime());
      });

      it('locks a checkout in a transaction, and sets its status and the proof of its payment', async () => {
        const c = await insert({ status: 'OPEN', sessionId: `cs_${c0()}` });
        const locked = await store.transaction((r) => r.checkouts.lock(c.id));
        assert.equal(locked?.id, c.id);
        assert.equal(await store.transaction((r) => r.checkouts.lock(randomUUID())), null);
        await store.transaction((r) => r.checkouts.setStatus(c.id, 'EXPIRED', null, at(5)));
        let row = await find(c.id);
        assert.deepEqual([row?.status, row?.sessionId, row?.updatedAt.getTime()], ['EXPIRED', null, at(5).getTime()]);
        const session = `cs_${c0()}`;
        await store.transaction((r) => r.checkouts.markPaid(c.id, 'evt_paid', session, at(9)));
        row = await find(c.id);
        assert.deepEqual(
          [row?.status, row?.paidEventId, row?.sessionId, row?.paidAt?.getTime(), row?.updatedAt.getTime()],
          ['PAID', 'evt_paid', session, at(9).getTime(), at(9).getTime()],
        );
      });

      it("finds a card order's checkout, and its paid one once it is paid", async () => {
        const orderId = randomUUID();
        const c = await insert({ purpose: 'ORDER', orderId, status: 'OPEN' });
        assert.equal((await store.read((r) => r.checkouts.ofOrder(orderId))).id, c.id);
        await assert.rejects(store.read((r) => r.checkouts.ofOrder(randomUUID())));
        assert.equal(await store.read((r) => r.checkouts.paidOfOrder(orderId)), null);
        await store.transaction((r) => r.checkouts.markPaid(c.id, 'evt', `cs_${c0()}`, at(1)));
        assert.equal((await store.read((r) => r.checkouts.paidOfOrder(orderId)))?.id, c.id);
      });

      it("lists card orders' unpaid checkouts in the orders' order, leaving out paid ones and top-ups", async () => {
        const orders = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
        const open = await insert({ purpose: 'ORDER', orderId: orders[0], status: 'OPEN', sessionId: `cs_${c0()}` });
        const creating = await insert({ purpose: 'ORDER', orderId: orders[1] });
        await insert({ purpose: 'ORDER', orderId: orders[2], status: 'PAID' });
        await insert({ purpose: 'ORDER', orderId: orders[3], status: 'EXPIRED' });
        const rows = await store.read((r) => r.checkouts.unpaidOfOrders([orders[3], orders[1], orders[2], orders[0]]));
        assert.deepEqual(rows.map(plain), [
          { id: creating.id, sessionId: null, provider: 'stripe', orderId: orders[1] },
          { id: open.id, sessionId: open.sessionId, provider: 'stripe', orderId: orders[0] },
        ]);
        assert.deepEqual(await store.read((r) => r.checkouts.unpaidOfOrders([])), []);
      });

      it('lists OPEN checkouts whose session expired before a moment, the longest expired first', async () => {
        const base = Date.UTC(1990, 0, 1) + randomInt(1_000_000) * 1000;
        const old = (s: number) => new Date(base + s * 1000);
        const second = await insert({ status: 'OPEN', expiresAt: old(20) });
        const first = await insert({ status: 'OPEN', expiresAt: old(10) });
        await insert({ status: 'OPEN', expiresAt: old(40) });
        await insert({ status: 'EXPIRED', expiresAt: old(5) });
        const stale = await store.read((r) => r.checkouts.staleOpen(old(30), 1000));
        assert.deepEqual(
          stale.filter((c) => c.accountId === accountId).map((c) => c.id),
          [first.id, second.id],
        );
        assert.ok(stale.every((c) => c.status === 'OPEN' && c.expiresAt!.getTime() < old(30).getTime()));
        const one = await store.read((r) => r.checkouts.staleOpen(old(30), 1));
        assert.equal(one.length, 1);
        if (one[0].accountId === accountId) assert.equal(one[0].id, first.id);
      });
    });

    describe('refunds', () => {
      it('asks for a refund once, counts failed attempts while it is owed, and records it made once', async () => {
        const c = await insert({ status: 'PAID' });
        await store.read((r) => r.checkouts.countRefundAttempt(c.id, at(1)));
        assert.equal((await find(c.id))?.refundAttempts, 0, 'nothing owed, nothing counted');
        await store.transaction((r) => r.checkouts.markRefundPending(c.id, at(2)));
        await store.transaction((r) => r.checkouts.markRefundPending(c.id, at(3)));
        let row = await find(c.id);
        assert.deepEqual([row?.refundStatus, row?.refundRequestedAt?.getTime()], ['PENDING', at(2).getTime()]);
        await store.read((r) => r.checkouts.countRefundAttempt(c.id, at(4)));
        await store.read((r) => r.checkouts.countRefundAttempt(c.id, at(5)));
        assert.equal((await find(c.id))?.refundAttempts, 2);
        assert.equal(await store.transaction((r) => r.checkouts.markRefunded(c.id, 're_1', at(6))), true);
        assert.equal(await store.transaction((r) => r.checkouts.markRefunded(c.id, 're_2', at(7))), false);
        row = await find(c.id);
        assert.deepEqual(
          [row?.refundStatus, row?.refundId, row?.refundedAt?.getTime(), row?.refundAttempts],
          ['SUCCEEDED', 're_1', at(6).getTime(), 2],
        );
        await store.read((r) => r.checkouts.countRefundAttempt(c.id, at(8)));
        assert.equal((await find(c.id))?.refundAttempts, 2);
      });

      it('lists the refunds owed, the longest owed first, until they are made', async () => {
        const base = Date.UTC(1991, 0, 1) + randomInt(1_000_000) * 1000;
        const owed = [30, 10, 20].map((s) => new Date(base + s * 1000));
        const rows: { id: string }[] = [];
        for (const when of owed) {
          const c = await insert({ status: 'PAID' });
          await store.transaction((r) => r.checkouts.markRefundPending(c.id, when));
          rows.push(c);
        }
        const mine = (ids: string[]) => ids.filter((id) => rows.some((c) => c.id === id));
        assert.deepEqual(mine(await store.read((r) => r.checkouts.refundsDue(10_000))), [
          rows[1].id,
          rows[2].id,
          rows[0].id,
        ]);
        assert.equal((await store.read((r) => r.checkouts.refundsDue(2))).length, 2);
        for (const c of rows) await store.transaction((r) => r.checkouts.markRefunded(c.id, `re_${c.id}`, at(1)));
        assert.deepEqual(mine(await store.read((r) => r.checkouts.refundsDue(10_000))), []);
      });
    });

    describe('payment events', () => {
      it('records an event once per event id, a redelivery keeping the first row, its type cut to 100 characters', async () => {
        const c = await insert();
        const eventId = `evt_${randomUUID()}`;
        const type = `checkout.session.completed${'x'.repeat(120)}`;
        await store.transaction((r) =>
          r.checkouts.paymentEvents.record({ eventId, type, checkoutId: c.id, outcome: 'CREDITED', at: at(1) }),
        );
        await store.transaction((r) =>
          r.checkouts.paymentEvents.record({
            eventId,
            type: 'again',
            checkoutId: null,
            outcome: 'ALREADY_PAID',
            at: at(2),
          }),
        );
        const found = await store.read((r) => r.checkouts.paymentEvents.find('stripe', eventId));
        assert.deepEqual(found && { ...found, receivedAt: found.receivedAt.getTime() }, {
          provider: 'stripe',
          eventId,
          type: type.slice(0, 100),
          checkoutId: c.id,
          outcome: 'CREDITED',
          receivedAt: at(1).getTime(),
        });
        assert.equal(await store.read((r) => r.checkouts.paymentEvents.find('stripe', `evt_${randomUUID()}`)), null);
      });

      it('leaves no event of a transaction that rolls back', async () => {
        const eventId = `evt_${randomUUID()}`;
        await assert.rejects(
          store.transaction(async (r) => {
            await r.checkouts.paymentEvents.record({
              eventId,
              type: 't',
              checkoutId: null,
              outcome: 'IGNORED',
              at: T0,
            });
            throw new Error('the decision failed');
          }),
          /the decision failed/,
        );
        assert.equal(await store.read((r) => r.checkouts.paymentEvents.find('stripe', eventId)), null);
      });
    });
  });
}

/** A session id nobody else holds. */
function c0(): string {
  return randomUUID().replace(/-/g, '');
}
