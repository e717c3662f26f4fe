import assert from 'node:assert/strict';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';

describe('GET /api/v1/me and /api/v1/billing/balance', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('describes user, key with limits and usage, balance and billing', async () => {
    const a = await signup(ctx, { maxPerRentalMinor: 1500, budgetLimitMinor: 7000, maxConcurrentDeployments: 2 });
    const res = await ctx.api.get('/api/v1/me').set(a.auth);
    assert.equal(res.status, 200);
    const d = res.body.data;
    assert.equal(d.user.id, a.accountId);
    assert.equal(d.user.email, null);
    assert.equal(d.key.id, a.keyId);
    assert.equal(d.key.kind, 'AGENT');
    assert.equal(d.key.prefix, a.token.slice(4, 12));
    assert.equal(d.key.maxPerRentalMinor, 1500);
    assert.equal(d.key.budgetLimitMinor, 7000);
    assert.equal(d.key.maxConcurrentDeployments, 2);
    assert.equal(d.key.netSpentMinor, 0);
    assert.equal(d.key.remainingBudgetMinor, 7000);
    assert.equal(d.key.activeDeployments, 0);
    assert.deepEqual(d.balance, { creditsMinor: 0, keyRemainingBudgetMinor: 7000, currency: 'USD', frozen: false });
    assert.deepEqual(d.billing, { model: 'ACCOUNT_BALANCE', budgetRequired: false });
    assert.doesNotMatch(JSON.stringify(d), /secret|hash/i);
  });

  it('computes remaining budget as lifetime budget minus net rental debits', async () => {
    const a = await signup(ctx, { budgetLimitMinor: 5000 });
    const { ledger, store } = ctx.services;
    await store.transaction(async (r) => {
      await ledger.post(r, {
        accountId: a.accountId,
        kind: 'TOPUP',
        amountMinor: 10_000,
        externalRef: `test-topup:${a.keyId}`,
        description: 'test top-up',
      });
      await ledger.post(r, {
        accountId: a.accountId,
        keyId: a.keyId,
        kind: 'RENTAL_DEBIT',
        amountMinor: -1200,
        externalRef: `test-debit:${a.keyId}`,
        description: 'rental',
      });
      await ledger.post(r, {
        accountId: a.accountId,
        keyId: a.keyId,
        kind: 'REVERSAL',
        amountMinor: 200,
        externalRef: `test-rev:${a.keyId}`,
        description: 'reversal',
      });
    });
    const me = await ctx.api.get('/api/v1/me').set(a.auth);
    assert.equal(me.body.data.key.netSpentMinor, 1000);
    assert.equal(me.body.data.key.remainingBudgetMinor, 4000);
    assert.equal(me.body.data.balance.creditsMinor, 9000);
    const bal = await ctx.api.get('/api/v1/billing/balance?limit=2').set(a.auth);
    assert.equal(bal.status, 200);
    assert.equal(bal.body.data.creditsMinor, 9000);
    assert.equal(bal.body.data.keyRemainingBudgetMinor, 4000);
    assert.deepEqual(
      bal.body.data.entries.map((e: { kind: string; amountMinor: number; balanceAfterMinor: number }) => [
        e.kind,
        e.amountMinor,
        e.balanceAfterMinor,
      ]),
      [
        ['REVERSAL', 200, 9000],
        ['RENTAL_DEBIT', -1200, 8800],
      ],
    );
    // Usage settled after a stop can go past the budget: the remainder says so rather than hiding it at 0.
    await store.transaction((r) =>
      ledger.post(r, {
        accountId: a.accountId,
        keyId: a.keyId,
        kind: 'USAGE',
        amountMinor: -4300,
        externalRef: `test-usage:${a.keyId}`,
        description: 'usage',
      }),
    );
    assert.equal((await ctx.api.get('/api/v1/me').set(a.auth)).body.data.key.remainingBudgetMinor, -300);
  });

  it('shows a new account an empty ledger', async () => {
    const a = await signup(ctx);
    const bal = await ctx.api.get('/api/v1/billing/balance').set(a.auth);
    assert.equal(bal.status, 200);
    assert.equal(bal.body.data.creditsMinor, 0);
    assert.deepEqual(bal.body.data.entries, []);
  });

  it('reports budgetRequired for a frozen ACCOUNT_BALANCE account, from the same eligibility rule', async () => {
    const a = await signup(ctx);
    await ctx.services.ds.query('UPDATE accounts SET frozen = 1 WHERE id = ?', [a.accountId]);
    const me = await ctx.api.get('/api/v1/me').set(a.auth);
    assert.equal(me.body.data.billing.model, 'ACCOUNT_BALANCE');
    assert.equal(me.body.data.billing.budgetRequired, true);
    assert.equal(me.body.data.balance.frozen, true);
  });

  it('rejects a balance limit out of range with 422', async () => {
    const a = await signup(ctx);
    const res = await ctx.api.get('/api/v1/billing/balance?limit=0').set(a.auth);
    assert.equal(res.status, 422);
    assert.match(res.body.error.message, /limit/);
  });
});
