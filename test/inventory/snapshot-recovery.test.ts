import assert from 'node:assert/strict';
import supertest from 'supertest';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createApp } from '../../src/app.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { inventoryVersion } from '../../src/modules/inventory/offers.repository.js';
import { READINESS_REUSE_MS, readinessProbe } from '../../src/readiness.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { waitFor } from '../helpers/wait.js';
import { account, discardQueuedRentalJobs, rent } from '../helpers/rentals.js';
import { ProviderStatus } from '../../src/modules/inventory/provider-status.entity.js';
import type { ProviderOffer } from '../../src/providers/provider.js';
import { cloudOffer, ScriptedCloud } from './scripted-provider.js';

// The api's offer snapshot follows the refreshes, not only the changes of offers: when the worker
// (or one provider's refresh) was away past OFFER_MAX_AGE_SECONDS, the offers it lists again
// unchanged move no version, and the api used to serve none of them until a restart. Here the
// "worker" is the refresher and the "api" is the app's snapshot, which no test step invalidates.

const H100 = {
  name: 'NVIDIA H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  maximumDurationSeconds: 86400,
};
const LOCAL: LocalInventoryOffer[] = [
  { ...H100, key: 'recover-300', pricePerHourMinor: 300 },
  { ...H100, key: 'recover-320', pricePerHourMinor: 320 },
  { ...H100, key: 'recover-8x', gpuCount: 8, pricePerHourMinor: 2400 },
];
const INTENT = { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 1000 };

/** How long the api may take to notice a refresh: its version check runs at most once a second. */
const NOTICE_MS = 15_000;

/** A scripted cloud whose listing can be held until the test lets it answer (a hung refresh). */
class HangingCloud extends ScriptedCloud {
  private gate?: { promise: Promise<void>; open: () => void };

  hang(): void {
    let open!: () => void;
    const promise = new Promise<void>((resolve) => (open = resolve));
    this.gate = { promise, open };
  }

  release(): void {
    this.gate?.open();
    this.gate = undefined;
  }

  override async listOffers(): Promise<ProviderOffer[]> {
    await this.gate?.promise;
    return super.listOffers();
  }
}

describe('offer snapshot recovery after the worker was away', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let api: supertest.Agent;
  let maxAgeMs: number;
  before(async () => {
    ctx = await createTestContext({ offers: LOCAL });
    maxAgeMs = ctx.config.inventory.offerMaxAgeSeconds * 1000;
    // Readiness answers are reused on the test's clock, so moving it past the reuse asks again.
    const readiness = readinessProbe(ctx.services, ['api'], { nowMs: () => ctx.clock.now().getTime() });
    api = supertest.agent(createApp(ctx.services, { readiness }));
  });
  after(async () => {
    await discardQueuedRentalJobs(ctx);
    await ctx.close();
  });

  const offerKeys = async (): Promise<string[]> => {
    const res = await api.get('/api/v1/offers');
    assert.equal(res.status, 200);
    return res.body.data
      .map((o: { pricePerHourMinor: number; gpuCount: number }) => `${o.gpuCount}x${o.pricePerHourMinor}`)
      .sort();
  };
  const intentStatus = async (): Promise<{ status: number; code?: string }> => {
    const who = await account(ctx, { creditsMinor: 100_000, maxPerRentalMinor: 100_000 });
    const res = await rent(ctx, who, INTENT);
    return { status: res.status, code: res.body.error?.code };
  };

  it('serves no offer and says not ready once the offers pass their age, and recovers within one unchanged refresh, with no restart', async () => {
    const all = ['1x300', '1x320', '8x2400'];
    assert.deepEqual(await offerKeys(), all);
    assert.equal((await api.get('/readyz')).status, 200);

    // The worker is away: nothing refreshes while the clock passes the offers' age.
    ctx.clock.advance(maxAgeMs + 1_000);
    assert.deepEqual(await offerKeys(), [], 'offers past their age are not served');
    assert.deepEqual(await intentStatus(), { status: 422, code: 'NO_MATCHING_OFFER' });
    const notReady = await api.get('/readyz');
    assert.equal(notReady.status, 503);
    assert.equal(notReady.body.checks.inventory, 'failed');
    assert.match(
      notReady.body.error.message,
      /no offer can be served: every listed offer is older than \d+ s \(OFFER_MAX_AGE_SECONDS\)/,
    );
    assert.equal((await api.get('/healthz')).status, 200, 'liveness does not depend on the offers');
    // What the audit saw: MySQL still lists the offers, only nothing renewed them.
    assert.equal(await ctx.services.ds.getRepository(Offer).countBy({ provider: 'local', available: true }), 3);

    // The worker returns: one refresh, listing the same offers unchanged, so the version stays.
    const version = await inventoryVersion(ctx.services.ds);
    const [local] = await ctx.services.inventory.refresh();
    assert.equal(local.ok, true);
    assert.equal(local.added, 0, 'nothing about the offers changed');
    assert.equal(await inventoryVersion(ctx.services.ds), version, 'an unchanged refresh leaves the version');

    await waitFor(async () => (await offerKeys()).length === all.length, {
      timeoutMs: NOTICE_MS,
      what: 'the offers back after one refresh',
    });
    assert.deepEqual(await offerKeys(), all);
    assert.deepEqual(await intentStatus(), { status: 201, code: undefined });
    ctx.clock.advance(READINESS_REUSE_MS);
    const ready = await api.get('/readyz');
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.equal(ready.body.data.checks.inventory, 'ok');
  });

  describe('with one provider whose listing hangs past the offer age', () => {
    let acme: HangingCloud;
    before(() => {
      acme = new HangingCloud('acme-recover');
      ctx.services.providers.register({
        id: acme.id,
        description: 'Scripted test cloud whose listing can hang',
        markupPercent: 0,
        provider: acme,
      });
    });
    after(async () => {
      acme.release();
      acme.offers = [];
      await ctx.services.inventory.refresh();
    });

    it('brings back its offers within the refresh that ends the hang, while the other provider kept the snapshot non-empty', async () => {
      acme.offers = [cloudOffer({ key: 'acme-150', pricePerHourMinor: 150 })];
      await ctx.services.inventory.refresh();
      await waitFor(async () => (await offerKeys()).includes('1x150'), {
        timeoutMs: NOTICE_MS,
        what: 'the new provider listed',
      });

      // A refresh in which acme's listing hangs: the local provider's answer is stored meanwhile.
      ctx.clock.advance(maxAgeMs / 2);
      acme.hang();
      const refreshing = ctx.services.inventory.refresh();
      const localRenewedAt = ctx.clock.now().getTime();
      await waitFor(
        async () =>
          (
            await ctx.services.ds.getRepository(ProviderStatus).findOneBy({ providerId: 'local' })
          )?.lastSuccessAt?.getTime() === localRenewedAt,
        { timeoutMs: NOTICE_MS, what: "the local provider's answer stored" },
      );
      ctx.clock.advance(maxAgeMs / 2 + 1_000);
      assert.deepEqual(await offerKeys(), ['1x300', '1x320', '8x2400'], "acme's offer passed its age");

      // The listing answers at last, the same offer: no change, no version move.
      const version = await inventoryVersion(ctx.services.ds);
      acme.release();
      const results = await refreshing;
      assert.equal(results.find((r) => r.provider === 'acme-recover')?.added, 0);
      assert.equal(await inventoryVersion(ctx.services.ds), version);
      await waitFor(async () => (await offerKeys()).includes('1x150'), {
        timeoutMs: NOTICE_MS,
        what: "acme's offer back after the refresh",
      });
      assert.deepEqual(await offerKeys(), ['1x150', '1x300', '1x320', '8x2400']);
    });
  });
});
