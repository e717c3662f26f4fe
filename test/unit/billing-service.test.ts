import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Account } from '../../src/modules/accounts/account.entity.js';
import { SIGNUP_ORIGIN } from '../../src/modules/keys/account-holder.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import { newKey } from '../contracts/accounts.contract.js';
import { billingWorld, post, principal, refusal, T0, type BillingWorld } from '../fakes/billing-services.js';
import { assertMemoryLedgerConsistent } from '../helpers/memory-ledger.js';

describe('BillingService (memory store)', () => {
  let w: BillingWorld;
  let agent: Principal;
  beforeEach(async () => {
    w = billingWorld();
    agent = await principal(w);
  });
  afterEach(() => assertMemoryLedgerConsistent(w.store.tables));

  const account = () => w.store.tables.table<Account>('accounts').get(agent.accountId)!;

  describe('balance', () => {
    it("shows the account's credits, the calling key's remaining budget and the entries it caused", async () => {
      const rentalId = randomUUID();
      await post(w, {
        accountId: agent.accountId,
        kind: 'TOPUP',
        amountMinor: 3000,
        keyId: agent.keyId,
        externalRef: 'topup:t1',
        description: 'Card top-up t1',
      });
      w.clock.advance(1000);
      await post(w, {
        accountId: agent.accountId,
        kind: 'RENTAL_DEBIT',
        amountMinor: -1200,
        keyId: agent.keyId,
        rentalId,
        externalRef: `rental:${rentalId}`,
        description: 'Rental',
      });
      const b = await w.billing.balance(agent);
      assert.equal(b.creditsMinor, 1800);
      assert.equal(b.currency, 'USD');
      assert.equal(b.frozen, false);
      assert.equal(b.keyRemainingBudgetMinor, 5000 - 1200, "the key's budget less its net rental spend");
      assert.equal(b.nextBefore, null);
      const [debit, topup] = b.entries;
      assert.deepEqual(debit, {
        id: debit.id,
        kind: 'RENTAL_DEBIT',
        amountMinor: -1200,
        balanceAfterMinor: 1800,
        description: 'Rental',
        reference: `rental:${rentalId}`,
        rentalId,
        keyId: agent.keyId,
        createdAt: new Date(T0.getTime() + 1000).toISOString(),
      });
      assert.equal(typeof debit.id, 'number');
      assert.ok(debit.id > topup.id);
      assert.equal(topup.reference, 'topup:t1');
      assert.equal(topup.rentalId, null);
    });

    it("shows an agent key only its own entries, and the owner the whole account's", async () => {
      const owner = await principal(w, 'OWNER', agent.accountId);
      const sibling = await principal(w, 'AGENT', agent.accountId);
      await post(w, { accountId: agent.accountId, kind: 'TOPUP', amountMinor: 1000, keyId: agent.keyId });
      await post(w, { accountId: agent.accountId, kind: 'RENTAL_DEBIT', amountMinor: -300, keyId: sibling.keyId });
      await post(w, { accountId: agent.accountId, kind: 'ADJUSTMENT', amountMinor: 50 });
      const seen = async (p: Principal) => (await w.billing.balance(p)).entries.map((e) => e.amountMinor);
      assert.deepEqual(await seen(agent), [1000]);
      assert.deepEqual(await seen(sibling), [-300]);
      assert.deepEqual(await seen(owner), [50, -300, 1000]);
      assert.equal((await w.billing.balance(sibling)).creditsMinor, 750, "credits are the account's");
      assert.equal((await w.billing.balance(sibling)).keyRemainingBudgetMinor, 4700);
      assert.equal((await w.billing.balance(agent)).keyRemainingBudgetMinor, 5000);
    });

    it('pages newest first, with nextBefore naming the last entry shown until none is left', async () => {
      for (const amountMinor of [600, 700, 800, 900, 1000])
        await post(w, { accountId: agent.accountId, kind: 'TOPUP', amountMinor, keyId: agent.keyId });
      const first = await w.billing.balance(agent, 2);
      assert.deepEqual(
        first.entries.map((e) => e.amountMinor),
        [1000, 900],
      );
      assert.equal(first.nextBefore, first.entries[1].id);
      const second = await w.billing.balance(agent, 2, first.nextBefore!);
      assert.deepEqual(
        second.entries.map((e) => e.amountMinor),
        [800, 700],
      );
      const last = await w.billing.balance(agent, 2, second.nextBefore!);
      assert.deepEqual(
        last.entries.map((e) => e.amountMinor),
        [600],
      );
      assert.equal(last.nextBefore, null);
      assert.equal(last.creditsMinor, 4000, 'every page shows the whole balance');
      const exact = await w.billing.balance(agent, 5);
      assert.equal(exact.entries.length, 5);
      assert.equal(exact.nextBefore, null, 'a page that holds the rest has no next');
    });

    it('shows a frozen account as frozen, and an empty ledger as no entries', async () => {
      w.store.tables.table<Account>('accounts').update(agent.accountId, { frozen: true });
      const b = await w.billing.balance(agent);
      assert.equal(b.frozen, true);
      assert.deepEqual(b.entries, []);
      assert.equal(b.creditsMinor, 0);
    });
  });

  describe('setEmail', () => {
    it("lets an owner key set the account's e-mail, trimmed", async () => {
      const owner = await principal(w, 'OWNER', agent.accountId);
      assert.deepEqual(await w.billing.setEmail(owner, '  human@example.com '), { email: 'human@example.com' });
      assert.equal(account().email, 'human@example.com');
    });

    it('lets the key a headless signup created set it: that key holds the account', async () => {
      const key = newKey(agent.accountId, { kind: 'AGENT', origin: SIGNUP_ORIGIN, scopes: ['read', 'billing'] });
      await w.store.transaction((r) => r.accounts.keys.insert(key));
      const signupKey: Principal = { keyId: key.id, accountId: key.accountId, kind: 'AGENT', scopes: key.scopes, key };
      assert.deepEqual(await w.billing.setEmail(signupKey, 'a@example.com'), { email: 'a@example.com' });
      assert.equal(account().email, 'a@example.com');
    });

    it("refuses an owner's agent keys with 403, whatever their scopes, and changes nothing", async () => {
      const err = await refusal(w.billing.setEmail(agent, 'a@example.com'));
      assert.equal(err.code, 'FORBIDDEN');
      assert.match(err.message, /agent keys cannot change their owner's address/);
      assert.equal(account().email, null);
    });

    it('refuses what is not an e-mail address with 422 VALIDATION_FAILED', async () => {
      const owner = await principal(w, 'OWNER', agent.accountId);
      for (const bad of ['', 'no-at-sign', 'a@b', 'a b@example.com', `${'x'.repeat(250)}@example.com`]) {
        const err = await refusal(w.billing.setEmail(owner, bad));
        assert.equal(err.code, 'VALIDATION_FAILED', bad);
        assert.match(err.message, /email: must be an e-mail address/);
      }
      assert.equal(account().email, null);
    });
  });
});
