import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, discardQueuedRentalJobs, offerIds, rent } from '../helpers/rentals.js';

const base = { category: 'datacenter', gpuCount: 1, maximumDurationSeconds: 86400 };
const OFFERS: LocalInventoryOffer[] = [
  { ...base, key: 'sxm', name: 'NVIDIA H100 80GB HBM3', vramGb: 80, pricePerHourMinor: 299 },
  { ...base, key: 'sxm-8x', name: 'gpu_8x_h100_sxm5', vramGb: 80, gpuCount: 8, pricePerHourMinor: 2392 },
  { ...base, key: 'pcie', name: 'NVIDIA H100 PCIe', vramGb: 80, pricePerHourMinor: 249 },
  { ...base, key: 'nvl', name: 'NVIDIA H100 NVL', vramGb: 94, pricePerHourMinor: 279 },
  { ...base, key: 'a100-sxm-80', name: 'NVIDIA A100-SXM4-80GB', vramGb: 80, pricePerHourMinor: 179 },
  { ...base, key: 'a100-pcie-80', name: 'NVIDIA A100 80GB PCIe', vramGb: 80, pricePerHourMinor: 169 },
  { ...base, key: 'a100-sxm-40', name: 'A100 (40 GB SXM4)', vramGb: 40, pricePerHourMinor: 129 },
  { ...base, key: '4090', name: 'NVIDIA GeForce RTX 4090', category: 'consumer', vramGb: 24, pricePerHourMinor: 44 },
  { ...base, key: '4090-b', name: 'RTX 4090', category: 'consumer', vramGb: 24, pricePerHourMinor: 46 },
];

describe('GPU families and models on /offers, /gpus and GPU-intent rentals', () => {
  let ctx: TestContext;
  let id: Record<string, string>;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    id = await offerIds(ctx);
  });
  after(async () => {
    await discardQueuedRentalJobs(ctx);
    await ctx.close();
  });

  const filtered = async (gpu: string): Promise<string[]> => {
    const res = await ctx.api.get(`/api/v1/offers?gpu=${encodeURIComponent(gpu)}`);
    assert.equal(res.status, 200);
    return res.body.data.map((o: { id: string }) => o.id);
  };

  it('shows one /gpus row per model, whatever each provider calls it', async () => {
    const models = (await ctx.api.get('/api/v1/gpus')).body.data.models;
    const rows = Object.fromEntries(models.map((g: { slug: string }) => [g.slug, g]));
    assert.deepEqual(Object.keys(rows).sort(), [
      'a100-pcie-80gb',
      'a100-sxm4-40gb',
      'a100-sxm4-80gb',
      'h100-nvl',
      'h100-pcie',
      'h100-sxm',
      'rtx-4090',
    ]);
    assert.equal(rows['h100-sxm'].availableOffers, 2);
    assert.equal(rows['h100-sxm'].availableGpus, 9);
    assert.equal(rows['h100-sxm'].name, 'H100 SXM');
    assert.equal(rows['rtx-4090'].availableOffers, 2);
    assert.equal(rows['rtx-4090'].cheapestOfferId, id['4090']);
    assert.equal(rows['a100-sxm4-40gb'].vramGb, 40);
    assert.equal(rows['h100-nvl'].family, 'h100');
  });

  it('?gpu= with a family matches every model of it; with a model, that model', async () => {
    // The family: SXM, PCIe and NVL alike, cheapest first.
    for (const q of ['H100', 'nvidia h100', 'h100'])
      assert.deepEqual(await filtered(q), [id.pcie, id.nvl, id.sxm, id['sxm-8x']], q);
    for (const q of ['4090', 'rtx4090', 'GeForce RTX 4090'])
      assert.deepEqual(await filtered(q), [id['4090'], id['4090-b']], q);
    assert.deepEqual(await filtered('A100'), [id['a100-sxm-40'], id['a100-pcie-80'], id['a100-sxm-80']]);
    assert.deepEqual(await filtered('H100 SXM'), [id.sxm, id['sxm-8x']]);
    assert.deepEqual(await filtered('h100-pcie'), [id.pcie]);
    assert.deepEqual(await filtered('A100 80GB'), [id['a100-pcie-80'], id['a100-sxm-80']]);
    assert.deepEqual(await filtered('TPU v5'), []);
  });

  it('rents the cheapest offer of a family, or of the precise model asked for', async () => {
    const who = await account(ctx, { creditsMinor: 10_000 });
    const family = await rent(ctx, who, { gpuModel: 'NVIDIA H100', gpuCount: 1, maxHourlyPriceMinor: 1000 });
    assert.equal(family.status, 201, JSON.stringify(family.body));
    assert.deepEqual(family.body.data.candidateOfferIds, [id.pcie, id.nvl, id.sxm]);
    const model = await rent(ctx, who, { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 1000 });
    assert.deepEqual(model.body.data.candidateOfferIds, [id.sxm]);
    const vram = await rent(ctx, who, { gpuModel: 'a100 80 GB', gpuCount: 1, maxHourlyPriceMinor: 1000 });
    assert.deepEqual(vram.body.data.candidateOfferIds, [id['a100-pcie-80'], id['a100-sxm-80']]);
    const orders = await ctx.services.ds.getRepository(Order).findBy({ accountId: who.accountId });
    assert.deepEqual(orders.map((o) => o.gpuSlug).sort(), ['a100-80gb', 'h100', 'h100-sxm']);
  });

  it('says why nothing matched: an unknown model with the closest known, the ceiling with the cheapest price, or the count', async () => {
    const who = await account(ctx, { creditsMinor: 10_000 });
    const cases: [object, RegExp][] = [
      [
        { gpuModel: 'H10', gpuCount: 1, maxHourlyPriceMinor: 1000 },
        /No GPU model is known as "H10"\. Closest known: [^.]*\bh100\b/,
      ],
      [{ gpuModel: 'RTX 4900', gpuCount: 1, maxHourlyPriceMinor: 1000 }, /Closest known: [^.]*\brtx-4090\b/],
      [
        { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 200 },
        /above 200 cents per hour; the cheapest is 249 cents \(\$2\.49\) per hour/,
      ],
      [{ gpuModel: 'H100 SXM', gpuCount: 8, maxHourlyPriceMinor: 2000 }, /the cheapest is 2392 cents \(\$23\.92\)/],
      [
        { gpuModel: 'H100', gpuCount: 2, maxHourlyPriceMinor: 10_000 },
        /No offer of 2 x H100 right now; H100 is offered with 1, 8 GPU\(s\)/,
      ],
      [
        { gpuModel: 'L40S', gpuCount: 1, maxHourlyPriceMinor: 10_000 },
        /No offer of L40S \(l40s\) is available right now/,
      ],
    ];
    for (const [body, message] of cases) {
      const res = await rent(ctx, who, body);
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(res.body.error.code, 'NO_MATCHING_OFFER');
      assert.match(res.body.error.message, message);
    }
  });

  it('finds /gpus/{slug} by slug or by a spelling of one model, and explains a family', async () => {
    assert.equal((await ctx.api.get('/api/v1/gpus/h100-sxm')).body.data.offers.length, 2);
    assert.equal(
      (await ctx.api.get(`/api/v1/gpus/${encodeURIComponent('NVIDIA H100 80GB HBM3')}`)).body.data.slug,
      'h100-sxm',
    );
    const family = await ctx.api.get('/api/v1/gpus/h100');
    assert.equal(family.status, 404);
    assert.match(family.body.error.message, /names several models \(.*h100-sxm.*\)/);
    const unknown = await ctx.api.get('/api/v1/gpus/h10');
    assert.equal(unknown.status, 404);
    assert.match(unknown.body.error.message, /closest known: .*h100/);
  });
});
