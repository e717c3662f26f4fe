import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { customerPriceMinor } from '../../src/providers/pricing.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, discardQueuedRentalJobs, rent } from '../helpers/rentals.js';
import { addScriptedCloud, cloudOffer } from './scripted-provider.js';

const base = { category: 'datacenter', gpuCount: 1, maximumDurationSeconds: 86400 };
/** The local provider's prices are its costs, in cents. */
const COSTS: LocalInventoryOffer[] = [
  { ...base, key: 'h100', name: 'NVIDIA H100 SXM', vramGb: 80, pricePerHourMinor: 299 },
  { ...base, key: 'a100', name: 'NVIDIA A100 80GB', vramGb: 80, pricePerHourMinor: 179 },
  { ...base, key: 'l4', name: 'NVIDIA L4', vramGb: 24, pricePerHourMinor: 48 },
  { ...base, key: 'penny', name: 'NVIDIA GeForce RTX 3090', category: 'consumer', vramGb: 24, pricePerHourMinor: 1 },
];

async function pricesByKey(ctx: TestContext): Promise<Record<string, number>> {
  const listed = new Map<string, number>(
    (await ctx.api.get('/api/v1/offers')).body.data.map((o: { id: string; pricePerHourMinor: number }) => [
      o.id,
      o.pricePerHourMinor,
    ]),
  );
  const out: Record<string, number> = {};
  for (const row of await ctx.services.ds.getRepository(Offer).findBy({ available: true })) {
    if (listed.has(row.id)) out[`${row.provider}:${row.providerOfferKey}`] = listed.get(row.id)!;
  }
  return out;
}

describe('customer prices with markup', () => {
  let ctx: TestContext | undefined;
  afterEach(async () => {
    if (!ctx) return;
    await discardQueuedRentalJobs(ctx);
    await ctx.close();
    ctx = undefined;
  });

  it('are the provider costs when no markup is set', async () => {
    ctx = await createTestContext({ offers: COSTS });
    assert.deepEqual(await pricesByKey(ctx), {
      'local:h100': 299,
      'local:a100': 179,
      'local:l4': 48,
      'local:penny': 1,
    });
  });

  it('add PRICE_MARKUP_PERCENT to every provider, rounded up to a whole cent', async () => {
    ctx = await createTestContext({ offers: COSTS, env: { PRICE_MARKUP_PERCENT: '12.5' } });
    // 336.375, 201.375, 54 and 1.125 cents, each rounded up.
    assert.deepEqual(await pricesByKey(ctx), {
      'local:h100': 337,
      'local:a100': 202,
      'local:l4': 54,
      'local:penny': 2,
    });
    for (const o of COSTS)
      assert.equal((await pricesByKey(ctx))[`local:${o.key}`], customerPriceMinor(o.pricePerHourMinor, 12.5));
    // The cost is kept beside the price.
    const row = await ctx.services.ds
      .getRepository(Offer)
      .findOneByOrFail({ providerOfferKey: 'h100', available: true });
    assert.equal(row.costPerHourMinor, 299);
    const gpus = (await ctx.api.get('/api/v1/gpus')).body.data.models;
    assert.equal(gpus.find((g: { slug: string }) => g.slug === 'h100-sxm').minPricePerHourMinor, 337);
  });

  it('take <ID>_PROVIDER_MARKUP_PERCENT over the global markup, per provider', async () => {
    ctx = await createTestContext({
      offers: COSTS,
      env: { PRICE_MARKUP_PERCENT: '12.5', LOCAL_PROVIDER_MARKUP_PERCENT: '30' },
    });
    assert.equal(ctx.config.providers[0].markupPercent, 30);
    // A provider without a markup of its own carries the global one.
    const cloud = addScriptedCloud(ctx.services.providers, 'acme', 12.5);
    cloud.offers = [
      cloudOffer({ key: 'c-h100', pricePerHourMinor: 250 }),
      cloudOffer({ key: 'c-l4', name: 'L4', vramGb: 24, pricePerHourMinor: 33 }),
    ];
    await ctx.services.inventory.refresh();
    ctx.services.inventory.invalidate();
    assert.deepEqual(await pricesByKey(ctx), {
      'local:h100': 389, // 388.7
      'local:a100': 233, // 232.7
      'local:l4': 63, // 62.4
      'local:penny': 2, // 1.3
      'acme:c-h100': 282, // 281.25
      'acme:c-l4': 38, // 37.125
    });
    cloud.offers = [];
    await ctx.services.inventory.refresh();
  });

  it('are what admission compares with the ceiling and quotes', async () => {
    ctx = await createTestContext({ offers: COSTS, env: { PRICE_MARKUP_PERCENT: '12.5' } });
    const who = await account(ctx, { creditsMinor: 5000 });
    const atCost = await rent(ctx, who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 299 });
    assert.equal(atCost.status, 422);
    assert.equal(atCost.body.error.code, 'NO_MATCHING_OFFER');
    assert.match(atCost.body.error.message, /cheapest is 337 cents \(\$3\.37\)/);
    const ok = await rent(ctx, who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 337 });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.equal(ok.body.data.quote.hourlyPriceMinor, 337);
  });
});
