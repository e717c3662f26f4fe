import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { signup, type SignedUp } from '../helpers/factories.js';
import { createStripeContext, createTopup, type StripeTestContext } from '../helpers/payments.js';
import { credit, offerIds, rent } from '../helpers/rentals.js';

const ROOT = join(fileURLToPath(import.meta.url), '../../..');
const MODULE = 'src/modules/idempotency/';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'idem-l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
  },
];

const LIMITS = { maxPerRentalMinor: 700, budgetLimitMinor: 3000, maxConcurrentDeployments: 2 };

describe('Idempotency-Key: one protocol for every create', () => {
  it('keeps the record and its SQL in the idempotency module', () => {
    const offenders: string[] = [];
    for (const e of readdirSync(join(ROOT, 'src'), { withFileTypes: true, recursive: true })) {
      if (!e.isFile() || !e.name.endsWith('.ts')) continue;
      const path = relative(ROOT, join(e.parentPath, e.name));
      if (path.startsWith(MODULE) || path.startsWith('src/generated/')) continue;
      const text = readFileSync(join(ROOT, path), 'utf8');
      // The entity list registers the record and the composition root binds its repository; code
      // outside the module reaches the records through that repository (test/unit/store-layer.test.ts
      // holds who may name the table), never through the entity or SQL of its own.
      const entityImport = /idempotency-record\.entity\.js'/.test(text) && path !== 'src/entities.ts';
      if (/idempotency_records/.test(text) || entityImport) offenders.push(path);
    }
    assert.deepEqual(offenders, []);
    assert.deepEqual(
      readdirSync(join(ROOT, 'src/http')).filter((f) => /idempotency/.test(f)),
      [],
    );
  });

  describe('against the service', () => {
    let ctx: StripeTestContext;
    let offer: string;
    before(async () => {
      ctx = await createStripeContext({ offers: OFFERS });
      offer = (await offerIds(ctx))['idem-l4'];
    });
    after(() => ctx.close());

    async function withEmail(): Promise<SignedUp> {
      const who = await signup(ctx, { maxConcurrentDeployments: 20 });
      const res = await ctx.api
        .put('/api/v1/me/email')
        .set(who.auth)
        .send({ email: `idem+${who.accountId.slice(0, 8)}@example.com` });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return who;
    }

    async function owner(): Promise<{ accountId: string; auth: { Authorization: string } }> {
      const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
      const { token } = await ctx.services.accounts.issueOwnerKey(account.id);
      return { accountId: account.id, auth: { Authorization: `Bearer ${token}` } };
    }

    const checkout = (who: SignedUp, key: string, budgetMinor = 600) =>
      ctx.api
        .post('/api/v1/orders/checkout')
        .set(who.auth)
        .set('Idempotency-Key', key)
        .send({ offerId: offer, budgetMinor });
    const issue = (by: { auth: { Authorization: string } }, key: string, name = 'twin') =>
      ctx.api
        .post('/api/v1/agent-keys')
        .set(by.auth)
        .set('Idempotency-Key', key)
        .send({ name, scopes: ['read', 'rent'], ...LIMITS });

    it('answers concurrent card checkouts with one key with one order and one payment page, never an error', async () => {
      const who = await withEmail();
      const key = randomUUID();
      ctx.stripe.simulatedLatencyMs = 100;
      try {
        const results = await Promise.all(Array.from({ length: 6 }, () => checkout(who, key)));
        assert.deepEqual(
          results.map((r) => r.status),
          [201, 201, 201, 201, 201, 201],
          JSON.stringify(results.map((r) => r.body)),
        );
        assert.equal(new Set(results.map((r) => r.body.data.orderId)).size, 1);
        assert.equal(new Set(results.map((r) => r.body.data.checkoutUrl)).size, 1);
      } finally {
        ctx.stripe.simulatedLatencyMs = 0;
      }
      assert.equal(await ctx.services.ds.getRepository(Order).countBy({ accountId: who.accountId }), 1);
    });

    it('refuses a card checkout replay with a changed body before judging the offer again (409)', async () => {
      const who = await withEmail();
      const key = randomUUID();
      assert.equal((await checkout(who, key)).status, 201);
      const changed = await checkout(who, key, 900);
      assert.equal(changed.status, 409);
      assert.equal(changed.body.error.code, 'IDEMPOTENCY_CONFLICT');
    });

    it('answers concurrent agent-key issues with one key with one key, its token shown once', async () => {
      const by = await owner();
      const key = randomUUID();
      const results = await Promise.all(Array.from({ length: 6 }, () => issue(by, key)));
      assert.deepEqual(
        results.map((r) => r.status).sort(),
        [200, 200, 200, 200, 200, 201],
        JSON.stringify(results.map((r) => r.body)),
      );
      assert.equal(new Set(results.map((r) => r.body.data.key.id)).size, 1);
      assert.equal(results.filter((r) => r.body.data.token !== null).length, 1);
      const changed = await issue(by, key, 'another name');
      assert.equal(changed.status, 409);
      assert.equal(changed.body.error.code, 'IDEMPOTENCY_CONFLICT');
    });

    it('commits every claimed key together with what its request created', async () => {
      const who = await withEmail();
      await credit(ctx, who.accountId, 5000);
      const by = await owner();
      const refusedKey = randomUUID();
      await Promise.all([
        createTopup(ctx, who, 1000),
        checkout(who, randomUUID()),
        issue(by, randomUUID()),
        rent(ctx, who, { offerId: offer }),
        // A refused request leaves no record: its key stays free for a corrected retry.
        checkout(who, refusedKey, 10_000_000),
      ]);
      const rows: { scope: string; resource_id: string | null }[] = await ctx.services.ds.query(
        `SELECT scope, resource_id FROM idempotency_records WHERE scope LIKE ? OR scope LIKE ? OR idem_key = ?`,
        [`%:${who.accountId}`, `%:${by.accountId}`, refusedKey],
      );
      assert.deepEqual(rows.map((r) => r.scope.split(':')[0]).sort(), ['agent-keys', 'checkout', 'rental', 'topup']);
      assert.deepEqual(
        rows.filter((r) => r.resource_id === null),
        [],
      );
    });
  });
});
