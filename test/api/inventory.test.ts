import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

const offer = (o: Partial<LocalInventoryOffer> & { key: string }): LocalInventoryOffer => ({
  name: 'NVIDIA H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  cpuCores: 26,
  memoryGb: 200,
  storageGb: 500,
  pricePerHourMinor: 299,
  maximumDurationSeconds: 86400,
  ...o,
});

describe('public inventory', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('serves the built-in inventory of a dozen offers, cheapest first, without auth and cross-origin', async () => {
    const res = await ctx.api.get('/api/v1/offers').set('Origin', 'https://agent.example');
    assert.equal(res.status, 200);
    assert.equal(res.headers['access-control-allow-origin'], '*');
    const offers = res.body.data;
    assert.ok(offers.length >= 12);
    const prices = offers.map((o: { pricePerHourMinor: number }) => o.pricePerHourMinor);
    assert.deepEqual(
      prices,
      [...prices].sort((a, b) => a - b),
    );
    const names = new Set(offers.map((o: { name: string }) => o.name));
    // Every provider spelling is shown under the catalog's one name.
    for (const n of ['H100 SXM', 'H100 PCIe', 'A100 SXM4 80GB', 'A100 SXM4 40GB', 'L40S', 'RTX 4090', 'RTX A6000'])
      assert.ok(names.has(n), n);
    for (const o of offers) {
      assert.match(o.id, /^[0-9a-f-]{36}$/);
      assert.equal(o.currency, 'USD');
      assert.ok(Number.isInteger(o.pricePerHourMinor) && o.pricePerHourMinor > 0);
      assert.ok(Number.isInteger(o.maximumDurationSeconds));
      assert.ok(Number.isInteger(o.gpuCount));
      assert.equal(typeof o.category, 'string');
      assert.equal(o.provider, 'local');
    }
    const preflight = await ctx.api
      .options('/api/v1/gpus')
      .set('Origin', 'https://agent.example')
      .set('Access-Control-Request-Method', 'GET');
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers['access-control-allow-origin'], '*');
  });

  it('keeps offer ids while an offer is unchanged, and changes them when its price changes', async () => {
    await ctx.setInventory([
      offer({ key: 'a', pricePerHourMinor: 300 }),
      offer({ key: 'b', name: 'NVIDIA L4', vramGb: 24, pricePerHourMinor: 50 }),
    ]);
    const first = (await ctx.api.get('/api/v1/offers')).body.data;
    await ctx.setInventory([
      offer({ key: 'a', pricePerHourMinor: 300 }),
      offer({ key: 'b', name: 'NVIDIA L4', vramGb: 24, pricePerHourMinor: 50 }),
    ]);
    const same = (await ctx.api.get('/api/v1/offers')).body.data;
    assert.deepEqual(
      same.map((o: { id: string }) => o.id),
      first.map((o: { id: string }) => o.id),
    );
    await ctx.setInventory([
      offer({ key: 'a', pricePerHourMinor: 310 }),
      offer({ key: 'b', name: 'NVIDIA L4', vramGb: 24, pricePerHourMinor: 50 }),
    ]);
    const changed = (await ctx.api.get('/api/v1/offers')).body.data;
    const h100Before = first.find((o: { name: string }) => o.name === 'H100 SXM');
    const h100After = changed.find((o: { name: string }) => o.name === 'H100 SXM');
    assert.notEqual(h100After.id, h100Before.id);
    assert.equal(h100After.pricePerHourMinor, 310);
    // The old offer stays in the cache, marked unavailable, and leaves the list.
    const old = await ctx.services.inventory.findCached(h100Before.id);
    assert.equal(old?.available, false);
    assert.ok(!changed.some((o: { id: string }) => o.id === h100Before.id));
  });

  it('drops vanished and unavailable offers from the list when the file is edited', async () => {
    await ctx.setInventory([
      offer({ key: 'a' }),
      offer({ key: 'c', name: 'NVIDIA L40S', vramGb: 48, pricePerHourMinor: 99 }),
    ]);
    assert.equal((await ctx.api.get('/api/v1/offers')).body.data.length, 2);
    await ctx.setInventory([
      offer({ key: 'a' }),
      offer({ key: 'c', name: 'NVIDIA L40S', vramGb: 48, pricePerHourMinor: 99, available: false }),
    ]);
    const after = (await ctx.api.get('/api/v1/offers')).body.data;
    assert.deepEqual(
      after.map((o: { name: string }) => o.name),
      ['H100 SXM'],
    );
  });

  it('keeps the cached offers when the provider fails', async () => {
    await ctx.setInventory([offer({ key: 'a' })]);
    const { writeFileSync } = await import('node:fs');
    writeFileSync(ctx.inventoryPath, '{ not json');
    const results = await ctx.services.inventory.refresh();
    assert.equal(results[0].ok, false);
    assert.match(results[0].error ?? '', /not valid JSON/);
    ctx.services.inventory.invalidate();
    assert.equal((await ctx.api.get('/api/v1/offers')).body.data.length, 1);
  });

  it('summarizes per GPU model with every field, and resolves url and offersUrl', async () => {
    await ctx.setInventory([
      offer({ key: 'h1', pricePerHourMinor: 299 }),
      offer({ key: 'h8', gpuCount: 8, pricePerHourMinor: 2392 }),
      offer({ key: 'g1', name: 'NVIDIA GeForce RTX 4090', category: 'consumer', vramGb: 24, pricePerHourMinor: 44 }),
    ]);
    const res = await ctx.api.get('/api/v1/gpus');
    assert.equal(res.status, 200);
    assert.equal(res.headers['access-control-allow-origin'], '*');
    const g = res.body.data;
    assert.equal(g.count, 2);
    assert.match(g.unit, /cents per hour/);
    assert.equal(g.offersUrl, 'http://gpu.test/api/v1/offers');
    assert.ok(!Number.isNaN(Date.parse(g.generatedAt)));
    const h100 = g.models.find((m: { slug: string }) => m.slug === 'h100-sxm');
    const offers = (await ctx.api.get('/api/v1/offers')).body.data;
    const cheapest = offers.find((o: { pricePerHourMinor: number }) => o.pricePerHourMinor === 299);
    assert.deepEqual(h100, {
      slug: 'h100-sxm',
      name: 'H100 SXM',
      family: 'h100',
      category: 'datacenter',
      vramGb: 80,
      availableOffers: 2,
      availableGpus: 9,
      minPricePerHourMinor: 299,
      maxPricePerHourMinor: 2392,
      cheapestOfferId: cheapest.id,
      currency: 'USD',
      maximumDurationSeconds: 86400,
      providers: ['local'],
      url: 'http://gpu.test/api/v1/gpus/h100-sxm',
      offersUrl: 'http://gpu.test/api/v1/offers?gpu=h100-sxm',
    });
    assert.equal(g.models[0].slug, 'rtx-4090', 'models cheapest first');

    const detail = await ctx.api.get('/api/v1/gpus/h100-sxm');
    assert.equal(detail.status, 200);
    assert.equal(detail.body.data.offers.length, 2);
    const bySpelling = await ctx.api.get(`/api/v1/gpus/${encodeURIComponent('NVIDIA H100 SXM')}`);
    assert.equal(bySpelling.body.data.slug, 'h100-sxm');
    const filtered = await ctx.api.get('/api/v1/offers?gpu=h100-sxm');
    assert.deepEqual(
      filtered.body.data.map((o: { pricePerHourMinor: number }) => o.pricePerHourMinor),
      [299, 2392],
    );
    const fuzzy = await ctx.api.get(`/api/v1/offers?gpu=${encodeURIComponent(' GeForce RTX 4090 ')}`);
    assert.equal(fuzzy.body.data.length, 1);
    const none = await ctx.api.get('/api/v1/offers?gpu=tpu');
    assert.deepEqual(none.body.data, []);
    const missing = await ctx.api.get('/api/v1/gpus/tpu-v5');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'NOT_FOUND');
  });

  it('answers If-None-Match with 304 until the inventory changes', async () => {
    await ctx.setInventory([offer({ key: 'a' })]);
    for (const path of ['/api/v1/offers', '/api/v1/gpus', '/api/v1/gpus/h100sxm', '/api/v1/offers?gpu=h100']) {
      const first = await ctx.api.get(path);
      const etag = first.headers.etag;
      assert.ok(etag, path);
      const again = await ctx.api.get(path).set('If-None-Match', etag);
      assert.equal(again.status, 304, path);
      assert.equal(again.text, '');
    }
    const etag = (await ctx.api.get('/api/v1/offers')).headers.etag;
    await ctx.setInventory([offer({ key: 'a' }), offer({ key: 'b', pricePerHourMinor: 100 })]);
    const changed = await ctx.api.get('/api/v1/offers').set('If-None-Match', etag);
    assert.equal(changed.status, 200);
    assert.equal(changed.body.data.length, 2);
  });

  it('lets another process see a refresh through the shared version counter', async () => {
    const other = await createTestContext();
    await ctx.setInventory([offer({ key: 'a' })]);
    other.services.inventory.invalidate();
    assert.equal((await other.api.get('/api/v1/offers')).body.data.length, 1);
    await ctx.setInventory([offer({ key: 'a' }), offer({ key: 'z', pricePerHourMinor: 5 })]);
    other.services.inventory.invalidate();
    assert.equal((await other.api.get('/api/v1/offers')).body.data.length, 2);
    await other.close();
  });
});
