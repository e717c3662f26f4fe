import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { addScriptedCloud, cloudOffer, type ScriptedCloud } from '../inventory/scripted-provider.js';

const NONE = { customImage: false, startupScript: false, ports: 0, maxDiskGb: null };
// A local offer that declares nothing its machine can be given.
const local: LocalInventoryOffer = {
  key: 'h1',
  name: 'NVIDIA H100 SXM',
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  pricePerHourMinor: 299,
  maximumDurationSeconds: 86400,
  capabilities: NONE,
};
const FULL = { customImage: true, startupScript: true, ports: 3, maxDiskGb: 400 };

interface OfferBody {
  id: string;
  provider: string;
  capabilities: typeof NONE | typeof FULL;
}

describe('offer capabilities on the public inventory', () => {
  let ctx: TestContext;
  let acme: ScriptedCloud;
  before(async () => {
    ctx = await createTestContext({ offers: [local] });
    acme = addScriptedCloud(ctx.services.providers, 'acme');
    acme.offers = [cloudOffer({ key: 'l4', name: 'L4', vramGb: 24, pricePerHourMinor: 60, capabilities: FULL })];
    await ctx.services.inventory.refresh();
    ctx.services.inventory.invalidate();
  });
  after(async () => {
    acme.offers = [];
    await ctx.services.inventory.refresh();
    await ctx.close();
  });

  const offers = async (path = '/api/v1/offers'): Promise<OfferBody[]> => (await ctx.api.get(path)).body.data;

  it('shows on every offer what a rental may set in machine, nothing for an offer that declares nothing', async () => {
    const list = await offers();
    assert.deepEqual(
      list.map((o) => [o.provider, o.capabilities]),
      [
        ['acme', FULL],
        ['local', NONE],
      ],
    );
    // The same on the per-model view and a filtered list.
    assert.deepEqual((await ctx.api.get('/api/v1/gpus/l4')).body.data.offers[0].capabilities, FULL);
    assert.deepEqual((await offers('/api/v1/offers?gpu=h100'))[0].capabilities, NONE);
  });

  it('serves one offer by id, as the list shows it, with its ETag; an id not on offer is a 404', async () => {
    const [l4] = await offers();
    const one = await ctx.api.get(`/api/v1/offers/${l4.id}`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.body.data, l4);
    assert.equal(one.headers['access-control-allow-origin'], '*');
    const again = await ctx.api.get(`/api/v1/offers/${l4.id}`).set('If-None-Match', one.headers.etag);
    assert.equal(again.status, 304);
    const missing = await ctx.api.get('/api/v1/offers/3f6c2a9e-8d41-4b7a-9c2e-5d1f0a7b6e42');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'NOT_FOUND');
    assert.match(missing.body.error.message, /GET \/api\/v1\/offers/);
  });

  it('sends the same bytes from the serialised snapshot as from the controller', async () => {
    const [l4] = await offers();
    for (const path of ['/api/v1/offers', `/api/v1/offers/${l4.id}`]) {
      // A query parameter the fast path does not know leaves the request to the generated route.
      const fast = await ctx.api.get(path).set('X-Request-Id', 'trace-fast-0002');
      const routed = await ctx.api.get(`${path}?via=controller`).set('X-Request-Id', 'trace-slow-0002');
      assert.equal(routed.status, 200, path);
      assert.equal(fast.text.replace('trace-fast-0002', 'trace-slow-0002'), routed.text, path);
      assert.equal(fast.headers.etag, routed.headers.etag, path);
      assert.match(fast.text, /"capabilities":\{"customImage":true,"startupScript":true,"ports":3,"maxDiskGb":400\}/);
    }
  });

  it('shows a change of capabilities after a refresh, under the same offer id', async () => {
    const [before] = await offers();
    const etag = (await ctx.api.get('/api/v1/offers')).headers.etag;
    acme.offers = [
      cloudOffer({ key: 'l4', name: 'L4', vramGb: 24, pricePerHourMinor: 60, capabilities: { ...FULL, ports: 1 } }),
    ];
    const [result] = (await ctx.services.inventory.refresh()).filter((r) => r.provider === 'acme');
    assert.equal(result.added, 1);
    ctx.services.inventory.invalidate();
    const changed = await ctx.api.get('/api/v1/offers').set('If-None-Match', etag);
    assert.equal(changed.status, 200);
    const [after] = changed.body.data as OfferBody[];
    assert.equal(after.id, before.id);
    assert.deepEqual(after.capabilities, { ...FULL, ports: 1 });
  });

  it('documents capabilities in the OpenAPI document, with an example', async () => {
    const doc = (await ctx.api.get('/api/openapi.json')).body;
    const { schemas } = doc.components;
    assert.equal(schemas.OfferDto.properties.capabilities.$ref, '#/components/schemas/OfferCapabilitiesDto');
    assert.ok(schemas.OfferDto.required.includes('capabilities'));
    const caps = schemas.OfferCapabilitiesDto;
    assert.deepEqual(caps.required, ['customImage', 'startupScript', 'ports', 'maxDiskGb']);
    assert.equal(caps.properties.ports.type, 'integer');
    assert.equal(caps.properties.maxDiskGb.nullable, true);
    const example = doc.paths['/api/v1/offers'].get.responses['200'].content['application/json'].example.data[0];
    assert.deepEqual(example.capabilities, { customImage: true, startupScript: true, ports: 5, maxDiskGb: 500 });
    const one = doc.paths['/api/v1/offers/{id}'].get;
    assert.deepEqual(one.responses['200'].content['application/json'].example.data.capabilities, example.capabilities);
    assert.ok(one.responses['404']);
  });
});
