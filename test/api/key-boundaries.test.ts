import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup, type SignedUp } from '../helpers/factories.js';
import { createTopup } from '../helpers/payments.js';
import { account, addKey, credit, offerIds, postForKey } from '../helpers/rentals.js';

const OWNER_SCOPES = ['read', 'rent', 'manage', 'billing'] as const;

describe('what a key may do beyond its own limits', () => {
  let ctx: TestContext;
  let offers: Record<string, string>;
  before(async () => {
    ctx = await createTestContext();
    // The database is shared by every file of a run: only offers on sale now, not another file's withdrawn ones.
    const live = new Set((await ctx.api.get('/api/v1/offers')).body.data.map((o: { id: string }) => o.id));
    offers = Object.fromEntries(Object.entries(await offerIds(ctx)).filter(([, id]) => live.has(id)));
  });
  after(async () => {
    await ctx.services.ds.query(`DELETE FROM agenda_jobs WHERE name LIKE 'rental.%' AND locked_at IS NULL`);
    await ctx.close();
  });

  describe('POST /api/v1/agent-keys', () => {
    it("refuses an agent key with any limit above the owner key's own: 403 KEY_LIMIT_EXCEEDED", async () => {
      const owner = await account(ctx, {
        kind: 'OWNER',
        scopes: [...OWNER_SCOPES],
        maxPerRentalMinor: 1000,
        budgetLimitMinor: 5000,
        maxConcurrentDeployments: 2,
      });
      const within = {
        name: 'worker',
        scopes: ['read', 'rent'],
        maxPerRentalMinor: 1000,
        budgetLimitMinor: 5000,
        maxConcurrentDeployments: 2,
      };
      const issue = (body: object) =>
        ctx.api.post('/api/v1/agent-keys').set(owner.auth).set('Idempotency-Key', randomUUID()).send(body);
      for (const over of [{ maxPerRentalMinor: 1001 }, { budgetLimitMinor: 5001 }, { maxConcurrentDeployments: 3 }]) {
        const res = await issue({ ...within, ...over });
        assert.equal(res.status, 403, JSON.stringify(over));
        assert.equal(res.body.error.code, 'KEY_LIMIT_EXCEEDED');
        assert.match(res.body.error.message, new RegExp(Object.keys(over)[0]));
      }
      assert.equal((await issue(within)).status, 201);
    });
  });

  describe('POST /api/v1/orders/checkout', () => {
    async function withEmail(who: SignedUp): Promise<void> {
      const res = await ctx.api.put('/api/v1/me/email').set(who.auth).send({ email: 'human@example.com' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    }
    const checkout = (who: SignedUp) =>
      ctx.api
        .post('/api/v1/orders/checkout')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ offerId: Object.values(offers)[0], budgetMinor: 5000 });

    it('needs the rent scope: 403 FORBIDDEN', async () => {
      const who = await signup(ctx);
      await withEmail(who);
      const reader = await addKey(ctx, who.accountId, { scopes: ['read', 'billing'] });
      const res = await checkout(reader);
      assert.equal(res.status, 403);
      assert.equal(res.body.error.code, 'FORBIDDEN');
    });

    it("honours the key's concurrency limit: an unpaid card order holds a slot (409 CONCURRENCY_LIMIT_REACHED)", async () => {
      const who = await signup(ctx); // maxConcurrentDeployments 1
      await withEmail(who);
      const first = await checkout(who);
      assert.equal(first.status, 201, JSON.stringify(first.body));
      const second = await checkout(who);
      assert.equal(second.status, 409);
      assert.equal(second.body.error.code, 'CONCURRENCY_LIMIT_REACHED');
      const rental = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ offerId: Object.values(offers)[0] });
      assert.equal(
        rental.body.error?.code,
        'CONCURRENCY_LIMIT_REACHED',
        'the card order counts for credit rentals too',
      );
      // The unpaid card order's deployment already names the machine it will run.
      const [dep] = (await ctx.api.get('/api/v1/deployments').set(who.auth)).body.data;
      assert.equal(dep.status, 'AWAITING_PAYMENT');
      const offer = (await ctx.api.get('/api/v1/offers')).body.data.find(
        (o: { id: string }) => o.id === Object.values(offers)[0],
      );
      assert.deepEqual([dep.gpuName, dep.gpuCount, dep.provider], [offer.name, offer.gpuCount, 'local']);
    });
  });

  describe('ledger, top-ups and the account e-mail', () => {
    it("an agent key sees only its own ledger entries and top-ups; an owner key sees the account's", async () => {
      const owner = await account(ctx, { kind: 'OWNER', scopes: [...OWNER_SCOPES] });
      const a = await addKey(ctx, owner.accountId, { scopes: ['read', 'rent', 'billing'] });
      const b = await addKey(ctx, owner.accountId, { scopes: ['read', 'rent', 'billing'] });
      await credit(ctx, owner.accountId, 5000);
      await postForKey(ctx, a, 'USAGE', -120);
      await postForKey(ctx, b, 'USAGE', -340);
      const { topup } = await createTopup(ctx, a, 700);

      const entries = async (who: SignedUp) =>
        (await ctx.api.get('/api/v1/billing/balance').set(who.auth)).body.data.entries as {
          amountMinor: number;
          keyId: string | null;
        }[];
      assert.deepEqual(
        (await entries(a)).map((e) => e.amountMinor),
        [-120],
      );
      assert.deepEqual(
        (await entries(b)).map((e) => e.amountMinor),
        [-340],
      );
      assert.deepEqual(
        (await entries(owner)).map((e) => e.amountMinor).sort((x, y) => x - y),
        [-340, -120, 5000],
      );

      assert.equal((await ctx.api.get(`/api/v1/billing/topups/${topup.topupId}`).set(a.auth)).status, 200);
      assert.equal((await ctx.api.get(`/api/v1/billing/topups/${topup.topupId}`).set(b.auth)).status, 404);
      assert.equal((await ctx.api.get(`/api/v1/billing/topups/${topup.topupId}`).set(owner.auth)).status, 200);
    });

    it("an agent key cannot change the account's e-mail even with billing (403 FORBIDDEN); owner and signup keys can", async () => {
      const owner = await account(ctx, { kind: 'OWNER', scopes: [...OWNER_SCOPES] });
      const agent = await addKey(ctx, owner.accountId, { scopes: ['read', 'rent', 'manage', 'billing'] });
      const refused = await ctx.api.put('/api/v1/me/email').set(agent.auth).send({ email: 'attacker@example.com' });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error.code, 'FORBIDDEN');
      assert.equal(
        (await ctx.api.put('/api/v1/me/email').set(owner.auth).send({ email: 'owner@example.com' })).status,
        200,
      );
      const me = await ctx.api.get('/api/v1/me').set(owner.auth);
      assert.equal(me.body.data.user.email, 'owner@example.com');
    });
  });

  describe('402 for a key without billing', () => {
    it('says the owner must top up, and how; a billing key is pointed at the top-up route', async () => {
      const owner = await account(ctx, { kind: 'OWNER', scopes: [...OWNER_SCOPES] });
      const agent = await addKey(ctx, owner.accountId, { scopes: ['read', 'rent', 'manage'] });
      const offerId = Object.values(offers)[0];
      const res = await ctx.api
        .post('/api/v1/rentals')
        .set(agent.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ offerId });
      assert.equal(res.status, 402);
      assert.equal(res.body.error.code, 'INSUFFICIENT_CREDITS');
      assert.match(res.body.error.message, /owner/);
      assert.match(res.body.error.message, /\/topup/);
      assert.match(res.body.error.message, /POST \/api\/v1\/billing\/topups/);
      const own = await ctx.api
        .post('/api/v1/rentals')
        .set(owner.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ offerId });
      assert.equal(own.status, 402);
      assert.doesNotMatch(own.body.error.message, /ask the account owner/);
      assert.match(own.body.error.message, /POST \/api\/v1\/billing\/topups/);

      await credit(ctx, owner.accountId, -5, 'ADJUSTMENT');
      const negative = await ctx.api
        .post('/api/v1/rentals')
        .set(agent.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ offerId });
      assert.equal(negative.status, 402);
      assert.equal(negative.body.error.code, 'ACCOUNT_FROZEN');
      assert.match(negative.body.error.message, /ask the account owner to top up/);
    });
  });
});
