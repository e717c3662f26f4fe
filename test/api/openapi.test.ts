import assert from 'node:assert/strict';
import { describeGpuChoice } from '../../src/modules/inventory/gpu-match.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

describe('OpenAPI document and reference page', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('publishes version v1 with the bearer scheme, every route and its error responses', async () => {
    const res = await ctx.api.get('/api/openapi.json');
    assert.equal(res.status, 200);
    const doc = res.body;
    assert.match(doc.openapi, /^3\./);
    assert.equal(doc.info.version, 'v1');
    assert.deepEqual(doc.servers, [{ url: 'http://gpu.test' }]);
    assert.equal(doc.components.securitySchemes.bearer.scheme, 'bearer');
    for (const [path, method] of [
      ['/api/v1/offers', 'get'],
      ['/api/v1/gpus', 'get'],
      ['/api/v1/gpus/{slug}', 'get'],
      ['/api/v1/providers', 'get'],
      ['/api/v1/signup', 'post'],
      ['/api/v1/me', 'get'],
      ['/api/v1/billing/balance', 'get'],
    ]) {
      assert.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path}`);
    }
    const signup = doc.paths['/api/v1/signup'].post;
    for (const s of ['201', '400', '409', '422', '429', '503']) assert.ok(signup.responses[s], `signup ${s}`);
    assert.ok(
      signup.parameters.some(
        (p: { in: string; name: string; required: boolean }) =>
          p.in === 'header' && p.name === 'Idempotency-Key' && p.required,
      ),
    );
    assert.deepEqual(doc.paths['/api/v1/me'].get.security, [{ bearer: ['read'] }]);
    assert.ok(
      doc.paths['/api/v1/me'].get.responses['401'].content['application/json'].schema.$ref.endsWith('ErrorEnvelope'),
    );
    const props = doc.components.schemas.SignupRequest.properties;
    assert.equal(props.maxPerRentalMinor.minimum, 500);
    assert.equal(props.budgetLimitMinor.default, 50000);
    assert.equal(doc.components.schemas.SignupRequest.additionalProperties, false);
  });

  it('declares on every route at least the statuses the v1 contract lists for it (docs/api.md), and integer types where it says integer', async () => {
    const doc = (await ctx.api.get('/api/openapi.json')).body;
    const spec: [string, string, number[]][] = [
      ['/api/v1/signup', 'post', [201, 409, 422, 429, 503]],
      ['/api/v1/agent-authorizations', 'post', [200, 409, 503]],
      ['/api/v1/agent-authorizations/approve', 'post', [200, 401, 402, 403, 404, 409, 422]],
      ['/api/v1/agent-setups/exchange', 'post', [200, 409, 422, 429, 503]],
      ['/api/v1/agent-keys', 'post', [200, 201, 400, 401, 402, 403, 404, 409, 422]],
      ['/api/v1/me', 'get', [200, 401, 402, 403, 404, 409, 422]],
      ['/api/v1/billing/balance', 'get', [200, 401, 402, 403, 404, 409, 422]],
      ['/api/v1/billing/topups', 'post', [200, 201, 400, 401, 402, 403, 404, 409, 410, 422]],
      ['/api/v1/rentals', 'post', [200, 201, 400, 401, 402, 403, 404, 409, 422, 503]],
      ['/api/v1/rentals/{id}', 'get', [200, 401, 402, 403, 404, 409, 422]],
      ['/api/v1/orders/checkout', 'post', [201, 401, 422]],
    ];
    for (const [path, method, codes] of spec) {
      const declared = Object.keys(doc.paths[path]?.[method]?.responses ?? {});
      const missing = codes.map(String).filter((c) => !declared.includes(c));
      assert.deepEqual(missing, [], `${method.toUpperCase()} ${path} lacks ${missing.join(', ')}`);
    }
    const offer = doc.components.schemas.OfferDto.properties;
    for (const f of ['vramGb', 'gpuCount', 'pricePerHourMinor', 'maximumDurationSeconds'])
      assert.equal(offer[f].type, 'integer', f);
    assert.equal(doc.components.schemas.SignupRequest.properties.budgetLimitMinor.maximum, 1_000_000_000);
  });

  it("words a rental's matchNote example exactly as admission words an offerId rental", async () => {
    const doc = (await ctx.api.get('/api/openapi.json')).body;
    const rental = doc.paths['/api/v1/rentals'].post.responses['201'].content['application/json'].example.data;
    assert.equal(rental.matchNote, describeGpuChoice(null, null).note);
  });

  it('serves a human-readable reference at /docs rendered from the document', async () => {
    const page = await ctx.api.get('/docs');
    assert.equal(page.status, 200);
    assert.match(page.headers['content-type'], /html/);
    assert.match(page.text, /\/api\/openapi\.json/);
    const bundle = await ctx.api.get('/docs/assets/swagger-ui-bundle.js');
    assert.equal(bundle.status, 200);
  });
});
