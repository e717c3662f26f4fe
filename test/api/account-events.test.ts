import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Posting } from '../../src/modules/billing/ledger.service.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { createTopup } from '../helpers/payments.js';
import { account, addKey, credit } from '../helpers/rentals.js';

interface Event {
  id: string;
  type: string;
  data: {
    balance?: { creditsMinor: number; currency: string; frozen: boolean };
    billing?: { model: string; budgetRequired: boolean };
    amountMinor?: number;
    thresholdMinor?: number;
  };
}

const pathOf = (url: string) => new URL(url).pathname;

/** Account events: `topup.paid` with the credit, `credits.low` with the debit that crosses the threshold. */
describe('events: account events (topup.paid, credits.low)', function () {
  this.timeout(60_000);
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext({ env: { LOW_CREDITS_MINOR: '1000' } });
  });
  after(() => ctx.close());

  const start = async (who: SignedUp) =>
    (await ctx.api.get('/api/v1/events').set(who.auth)).body.meta.nextAfter as string;
  async function events(who: SignedUp, after: string): Promise<Event[]> {
    const res = await ctx.api.get('/api/v1/events').query({ after, limit: 100 }).set(who.auth);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.data;
  }
  const debit = (accountId: string, amountMinor: number): Posting => ({
    accountId,
    kind: 'ADJUSTMENT',
    amountMinor: -amountMinor,
    externalRef: `test:debit:${randomUUID()}`,
    description: 'test debit',
  });
  const post = (p: Posting) => ctx.services.store.transaction((r) => ctx.services.ledger.post(r, p));

  it('writes topup.paid with the credit, carrying the balance and billing as /me shows them, for owner keys only', async () => {
    const owner = await account(ctx, { kind: 'OWNER', scopes: ['read', 'billing'] });
    const agent = await addKey(ctx, owner.accountId);
    const from = await start(owner);
    const { topup } = await createTopup(ctx, owner, 2500);
    assert.equal((await ctx.api.post(pathOf(topup.paymentUrl))).status, 303);
    assert.equal((await ctx.api.post(pathOf(topup.paymentUrl))).status, 303, 'paying again credits nothing');
    const seen = await events(owner, from);
    assert.deepEqual(
      seen.map((e) => e.type),
      ['topup.paid'],
    );
    const me = (await ctx.api.get('/api/v1/me').set(owner.auth)).body.data;
    assert.equal(seen[0].data.amountMinor, 2500);
    assert.deepEqual(seen[0].data.billing, me.billing);
    assert.deepEqual(seen[0].data.balance, {
      creditsMinor: 2500,
      currency: me.balance.currency,
      frozen: me.balance.frozen,
    });
    assert.deepEqual(await events(agent, from), [], 'an agent key is not told of top-ups');
  });

  it('writes credits.low once per crossing under the threshold, which agents see too', async () => {
    const agent = await account(ctx, { creditsMinor: 1500 });
    const owner = await addKey(ctx, agent.accountId, { kind: 'OWNER' });
    const from = await start(owner);
    await post(debit(agent.accountId, 400)); // 1100: still at or above 1000
    await post(debit(agent.accountId, 200)); // 900: crosses
    await post(debit(agent.accountId, 100)); // 800: already under
    await credit(ctx, agent.accountId, 1000); // 1800
    await post(debit(agent.accountId, 800)); // 1000: at the threshold is not under it
    await post(debit(agent.accountId, 1)); // 999: crosses again
    const low = (await events(owner, from)).filter((e) => e.type === 'credits.low');
    assert.deepEqual(
      low.map((e) => e.data.balance?.creditsMinor),
      [900, 999],
    );
    assert.ok(low.every((e) => e.data.thresholdMinor === 1000));
    assert.deepEqual(
      (await events(agent, from)).map((e) => e.type),
      ['credits.low', 'credits.low'],
      'agent keys see credits.low',
    );
  });
});
