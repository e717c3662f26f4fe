import assert from 'node:assert/strict';
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { ERROR_STATUS } from '../../src/errors/error-codes.js';
import {
  ACTIVE_MEANS,
  LEASE_RULE,
  MACHINE_SETTINGS_RULE,
  PHASES_RULE,
  WAIT_FOR_CAPACITY_RULE,
} from '../../src/vocabulary/machine-hints.js';
import { DISCOVERY_STEP, MACHINE_EXAMPLE, QUICKSTART_STEPS, curlOf } from '../../src/http/quickstart.js';
import { OAUTH_PATH } from '../../src/vocabulary/remote-mcp.js';
import type { Json } from '../../src/http/openapi.js';
import { ROUTE_FACTS, specRoutes } from '../../src/http/route-facts.js';
import { newSigningSecret, signedHeaders } from '../../src/modules/webhooks/webhook-signing.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/**
 * The names generated clients give each operation: part of the contract, so a rename is a
 * breaking change and must show up here.
 */
const OPERATION_IDS: Record<string, string> = {
  'GET /api/v1/offers': 'listOffers',
  'GET /api/v1/offers/{id}': 'getOffer',
  'GET /api/v1/gpus': 'listGpus',
  'GET /api/v1/gpus/{slug}': 'getGpu',
  'GET /api/v1/providers': 'listProviders',
  'GET /api/v1/providers/check': 'checkProviders',
  'POST /api/v1/signup': 'signup',
  'GET /api/v1/me': 'getAccount',
  'PUT /api/v1/me/email': 'setAccountEmail',
  'GET /api/v1/billing/balance': 'getBalance',
  'POST /api/v1/billing/topups': 'createTopup',
  'GET /api/v1/billing/topups/{topupId}': 'getTopup',
  'POST /api/v1/rentals': 'createRental',
  'GET /api/v1/rentals': 'listRentals',
  'GET /api/v1/rentals/{id}': 'getRental',
  'GET /api/v1/rentals/{id}/receipt': 'getRentalReceipt',
  'POST /api/v1/orders/checkout': 'createCheckout',
  'GET /api/v1/deployments': 'listDeployments',
  'GET /api/v1/deployments/{id}': 'getDeployment',
  'POST /api/v1/deployments/{id}/terminate': 'terminateDeployment',
  'POST /api/v1/deployments/{id}/credentials/reveal': 'revealCredentials',
  'POST /api/v1/agent-authorizations': 'beginAgentAuthorization',
  'POST /api/v1/agent-authorizations/approve': 'approveAgentAuthorization',
  'POST /api/v1/agent-setups/exchange': 'exchangeSetupCode',
  'POST /api/v1/agent-keys': 'issueAgentKey',
  'GET /api/v1/agent-keys': 'listAgentKeys',
  'DELETE /api/v1/agent-keys/{id}': 'revokeAgentKey',
  'GET /api/v1/owner-keys': 'listOwnerKeys',
  'DELETE /api/v1/owner-keys/{id}': 'revokeOwnerKey',
  'GET /api/v1/events': 'listEvents',
  'POST /api/v1/webhook-endpoints': 'createWebhookEndpoint',
  'GET /api/v1/webhook-endpoints': 'listWebhookEndpoints',
  'DELETE /api/v1/webhook-endpoints/{id}': 'deleteWebhookEndpoint',
  'GET /api/v1/webhook-endpoints/{id}/deliveries': 'listWebhookDeliveries',
  'POST /api/v1/webhook-endpoints/{id}/deliveries/{deliveryId}/redeliver': 'redeliverWebhook',
  'POST /api/v1/webhooks/stripe': 'receiveStripeWebhook',
};

/** The routes an agent key is refused on (the services check the key's kind). */
const OWNER_ONLY = [
  'POST /api/v1/agent-authorizations/approve',
  'POST /api/v1/agent-keys',
  'GET /api/v1/agent-keys',
  'DELETE /api/v1/agent-keys/{id}',
  'GET /api/v1/owner-keys',
  'DELETE /api/v1/owner-keys/{id}',
  // Owner keys with admin only: the operator's.
  'GET /api/v1/providers/check',
];

function operations(doc: Json): { method: string; path: string; op: Json }[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ method, path, op: item[method] })),
  );
}

describe('discovery: index, llms.txt and the OpenAPI document', () => {
  let ctx: TestContext;
  let doc: Json;
  before(async () => {
    ctx = await createTestContext();
    doc = (await ctx.api.get('/api/openapi.json')).body;
  });
  after(() => ctx.close());

  it('answers /, /api and /api/v1 with a JSON index of links', async () => {
    for (const path of ['/', '/api', '/api/v1', '/api/v1/']) {
      const res = await ctx.api.get(path);
      assert.equal(res.status, 200, path);
      assert.match(res.headers['content-type'], /json/);
      assert.equal(res.body.meta.apiVersion, 'v1');
      const links = res.body.data.links;
      assert.deepEqual(
        {
          openapi: links.openapi,
          docs: links.docs,
          gpus: links.gpus,
          offers: links.offers,
          signup: links.signup,
          providers: links.providers,
          llms: links.llms,
        },
        {
          openapi: 'http://gpu.test/api/openapi.json',
          docs: 'http://gpu.test/docs',
          gpus: 'http://gpu.test/api/v1/gpus',
          offers: 'http://gpu.test/api/v1/offers',
          signup: 'http://gpu.test/api/v1/signup',
          providers: 'http://gpu.test/api/v1/providers',
          llms: 'http://gpu.test/llms.txt',
        },
      );
      assert.equal(links.releases, 'http://gpu.test/releases/latest.json', 'the clients are found from the index');
    }
    const llms = (await ctx.api.get('/llms.txt')).text;
    assert.match(llms, /^## Clients$/m);
    assert.ok(
      llms.includes('curl -s http://gpu.test/releases/latest.json'),
      'llms.txt shows how to install gpr from this service',
    );
    assert.match(llms, /^- Client releases: http:\/\/gpu\.test\/releases\/latest\.json$/m);
  });

  it('links remote MCP from / and /llms.txt, at the addresses the endpoint and its OAuth metadata answer', async () => {
    const links = (await ctx.api.get('/')).body.data.links;
    assert.deepEqual(
      { mcp: links.mcp, resource: links.mcpResourceMetadata, server: links.oauthAuthorizationServer },
      {
        mcp: 'http://gpu.test/mcp',
        resource: 'http://gpu.test/.well-known/oauth-protected-resource/mcp',
        server: 'http://gpu.test/.well-known/oauth-authorization-server/oauth',
      },
    );
    const path = (url: string) => new URL(url).pathname;
    const unauthorized = await ctx.api
      .post(path(links.mcp))
      .set('Host', 'gpu.test')
      .set('Accept', 'application/json, text/event-stream')
      .send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    assert.equal(unauthorized.status, 401, unauthorized.text);
    assert.ok(
      unauthorized.headers['www-authenticate'].includes(`resource_metadata="${links.mcpResourceMetadata}"`),
      unauthorized.headers['www-authenticate'],
    );
    const resource = (await ctx.api.get(path(links.mcpResourceMetadata))).body;
    assert.equal(resource.resource, links.mcp);
    assert.deepEqual(resource.authorization_servers, [`http://gpu.test${OAUTH_PATH}`]);
    const server = await ctx.api.get(path(links.oauthAuthorizationServer));
    assert.equal(server.status, 200);
    assert.equal(server.body.issuer, resource.authorization_servers[0]);

    const llms = (await ctx.api.get('/llms.txt')).text;
    assert.match(llms, /^## Remote MCP \(hosted agents\)$/m);
    assert.ok(llms.includes('connects to http://gpu.test/mcp (Streamable HTTP)'), 'the URL to add');
    assert.match(llms, /never billing/);
    assert.match(llms, /^- Remote MCP endpoint \(OAuth\): http:\/\/gpu\.test\/mcp$/m);
    for (const url of [links.mcpResourceMetadata, links.oauthAuthorizationServer])
      assert.ok(llms.includes(`: ${url}\n`), url);
  });

  it('/llms.txt says how to verify a webhook delivery, and its code accepts what the service signs and nothing else', async () => {
    const llms = (await ctx.api.get('/llms.txt')).text;
    assert.match(llms, /^## Webhooks: checking a delivery$/m);
    assert.match(llms, /Standard Webhooks/);
    const code = /```js\n([\s\S]*?)\n```/.exec(llms.slice(llms.indexOf('## Webhooks')))?.[1] ?? '';
    const body = code.replace(/^import .*$/m, '');
    const verified = new Function('createHmac', 'timingSafeEqual', `${body}\nreturn verified;`)(
      createHmac,
      timingSafeEqual,
    ) as (s: string, h: Record<string, string>, b: string) => boolean;
    const secret = newSigningSecret();
    const payload = JSON.stringify({ id: '7', type: 'rental.active', createdAt: new Date().toISOString(), data: {} });
    const headers = signedHeaders(secret, '7', Math.floor(Date.now() / 1000), payload);
    assert.equal(verified(secret, headers, payload), true);
    assert.equal(verified(secret, headers, payload.replace('active', 'failed')), false, 'a changed body');
    assert.equal(verified(newSigningSecret(), headers, payload), false, 'another secret');
    const old = signedHeaders(secret, '7', Math.floor(Date.now() / 1000) - 3600, payload);
    assert.equal(verified(secret, old, payload), false, 'an old timestamp');
  });

  it('serves /llms.txt as plain text with every quickstart call and its exact body, and the document carries the same steps', async () => {
    const res = await ctx.api.get('/llms.txt');
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'], /^text\/plain; charset=utf-8/);
    assert.equal(QUICKSTART_STEPS.length, 6);
    const description: string = doc.info.description;
    for (const step of [DISCOVERY_STEP, ...QUICKSTART_STEPS]) {
      const curl = curlOf(step, 'http://gpu.test');
      assert.ok(res.text.includes(curl), `llms.txt has ${step.operationId}`);
      assert.ok(description.includes(curl), `info.description has ${step.operationId}`);
      if (step.body) assert.ok(res.text.includes(`-d '${JSON.stringify(step.body)}'`));
      const op = operations(doc).find((o) => o.op.operationId === step.operationId);
      assert.ok(op, `the step calls a real operation: ${step.operationId}`);
      assert.equal(`${op.method.toUpperCase()} ${op.path}`, `${step.method} ${step.path.replace(/\{\w+\}/, '{id}')}`);
      if (step.body) assert.deepEqual(op.op.requestBody.content['application/json'].example, step.body);
    }
  });

  it('teaches the waiting read first: the quickstart waits for ACTIVE with waitFor, and the call it shows is answered as a waiting read', async () => {
    const wait = QUICKSTART_STEPS.find((s) => s.operationId === 'getRental')!;
    assert.equal(wait.query, 'waitFor=ACTIVE,FAILED&waitSeconds=25');
    const llms = (await ctx.api.get('/llms.txt')).text;
    assert.ok(
      llms.includes('"http://gpu.test/api/v1/rentals/$RENTAL_ID?waitFor=ACTIVE,FAILED&waitSeconds=25"'),
      'quoted, so the shell keeps the &',
    );
    assert.ok(
      llms.indexOf('waitFor=') < llms.indexOf('GET /api/v1/events'),
      'the waiting read before the event stream',
    );
    assert.match(llms, /webhook-endpoints/);
  });

  it('runs the quickstart bodies against the service as written', async () => {
    const signup = QUICKSTART_STEPS.find((s) => s.operationId === 'signup')!;
    const res = await ctx.api.post(signup.path).set('Idempotency-Key', randomUUID()).send(signup.body!);
    assert.equal(res.status, 201, res.text);
    const auth = { Authorization: `Bearer ${res.body.data.token}` };
    const topup = QUICKSTART_STEPS.find((s) => s.operationId === 'createTopup')!;
    assert.equal(
      (await ctx.api.post(topup.path).set(auth).set('Idempotency-Key', randomUUID()).send(topup.body!)).status,
      201,
    );
    const rental = QUICKSTART_STEPS.find((s) => s.operationId === 'createRental')!;
    const rent = await ctx.api.post(rental.path).set(auth).set('Idempotency-Key', randomUUID()).send(rental.body!);
    assert.equal(rent.body.error?.code, 'INSUFFICIENT_CREDITS', 'a valid request that only lacks credits');
  });

  it('/llms.txt explains machine settings, leases, waiting for capacity, phases and what ACTIVE means, with an example the service accepts as written', async () => {
    const llms = (await ctx.api.get('/llms.txt')).text;
    for (const rule of [MACHINE_SETTINGS_RULE, LEASE_RULE, WAIT_FOR_CAPACITY_RULE, ACTIVE_MEANS, PHASES_RULE])
      assert.ok(llms.includes(rule), rule.slice(0, 60));
    assert.ok(llms.includes(curlOf(MACHINE_EXAMPLE, 'http://gpu.test')), 'the worked example');
    for (const field of [
      'machine',
      'image',
      'env',
      'startupScript',
      'ports',
      'terminateAfterSeconds',
      'waitForCapacitySeconds',
      'endpoints',
      'phase',
    ]) {
      assert.match(llms, new RegExp(`\`${field}\``), field);
    }
    const description: string = doc.info.description;
    assert.match(
      description,
      /`machine`: image, env, startupScript, ports, diskGb/,
      'the quickstart names the options',
    );
    assert.ok(description.includes(ACTIVE_MEANS), 'and what ACTIVE means');

    // The example's fields are the request schema's, and an offer honours them: the service refuses it only for the credits the account lacks.
    const signup = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .send({ maxPerRentalMinor: 2000 });
    const rent = await ctx.api
      .post(MACHINE_EXAMPLE.path)
      .set({ Authorization: `Bearer ${signup.body.data.token}` })
      .set('Idempotency-Key', randomUUID())
      .send(MACHINE_EXAMPLE.body!);
    assert.equal(rent.body.error?.code, 'INSUFFICIENT_CREDITS', JSON.stringify(rent.body));
  });

  it('names every operation uniquely for clients, with the name its route declares', () => {
    const ids = operations(doc).map((o) => o.op.operationId as string);
    assert.equal(new Set(ids).size, ids.length, `duplicates in ${ids.join(', ')}`);
    for (const { method, path, op } of operations(doc))
      assert.match(op.operationId, /^[a-z][A-Za-z]+$/, `${method} ${path}`);
    assert.deepEqual(
      Object.fromEntries(operations(doc).map((o) => [`${o.method.toUpperCase()} ${o.path}`, o.op.operationId])),
      OPERATION_IDS,
    );
    // The routes name themselves (@OperationId): the generated spec already carries the names served.
    assert.deepEqual(
      Object.fromEntries(specRoutes().map((r) => [`${r.method.toUpperCase()} ${r.path}`, r.operation.operationId])),
      OPERATION_IDS,
    );
    for (const name of [
      'listOffers',
      'listGpus',
      'getGpu',
      'signup',
      'beginAgentAuthorization',
      'approveAgentAuthorization',
      'exchangeSetupCode',
      'issueAgentKey',
      'getAccount',
      'getBalance',
      'createTopup',
      'createRental',
      'getRental',
      'createCheckout',
      'listDeployments',
      'getDeployment',
      'terminateDeployment',
      'revealCredentials',
    ]) {
      assert.ok(ids.includes(name), name);
    }
  });

  it('has an example for every request body and every 2xx body', () => {
    for (const { method, path, op } of operations(doc)) {
      const request = op.requestBody?.content?.['application/json'];
      if (request) assert.ok(request.example !== undefined, `${method} ${path} request`);
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        const content = response.content?.['application/json'];
        if (/^2/.test(status) && content) assert.ok(content.example !== undefined, `${method} ${path} ${status}`);
      }
    }
    const signup = doc.paths['/api/v1/signup'].post.responses['201'].content['application/json'].example;
    assert.match(signup.data.token, /^gpr_[A-Za-z0-9]{8}\.[A-Za-z0-9_-]{43}$/);
    const begin = doc.paths['/api/v1/agent-authorizations'].post.responses['200'].content['application/json'].example;
    assert.match(begin.data.setupCode, /^gps_[A-Za-z0-9_-]{43}$/);
  });

  it('declares X-Request-Id everywhere, Retry-After on 429 and pending 409, ETag on inventory, WWW-Authenticate on 401', () => {
    for (const { method, path, op } of operations(doc)) {
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        assert.ok(response.headers?.['X-Request-Id'], `${method} ${path} ${status} X-Request-Id`);
        if (status === '429') assert.ok(response.headers['Retry-After'], `${method} ${path} 429 Retry-After`);
        if (status === '401') assert.ok(response.headers['WWW-Authenticate'], `${method} ${path} 401`);
      }
    }
    assert.ok(doc.paths['/api/v1/agent-setups/exchange'].post.responses['409'].headers['Retry-After']);
    assert.ok(
      doc.paths['/api/v1/deployments/{id}/credentials/reveal'].post.responses['409'].headers['Retry-After'],
      'a reveal while the machine starts says when to ask again',
    );
    for (const path of ['/api/v1/offers', '/api/v1/gpus', '/api/v1/gpus/{slug}']) {
      assert.ok(doc.paths[path].get.responses['200'].headers.ETag, path);
      assert.ok(doc.paths[path].get.responses['304'], `${path} 304`);
    }
  });

  it('declares ETag and 304 exactly on the reads that answer with an ETag', async () => {
    for (const path of ['/api/v1/offers', '/api/v1/gpus', '/api/v1/providers']) {
      const res = await ctx.api.get(path);
      assert.equal(res.status, 200, path);
      const declared = doc.paths[path].get.responses['200'].headers.ETag !== undefined;
      assert.equal(
        declared,
        res.headers.etag !== undefined,
        `${path}: ETag declared ${declared}, sent ${res.headers.etag}`,
      );
      assert.equal(doc.paths[path].get.responses['304'] !== undefined, declared, `${path} 304`);
    }
  });

  it('marks owner-only routes in their security and description, and only those', () => {
    for (const { method, path, op } of operations(doc)) {
      const route = `${method.toUpperCase()} ${path}`;
      const owner = OWNER_ONLY.includes(route);
      assert.equal(op.security?.some((s: Json) => 'ownerBearer' in s) ?? false, owner, `${route} security`);
      assert.equal(/^\*\*Owner keys only\*\*/.test(op.description ?? ''), owner, `${route} description`);
      if (owner) assert.deepEqual(Object.keys(op.security[0]), ['ownerBearer']);
    }
    assert.equal(doc.components.securitySchemes.ownerBearer.scheme, 'bearer');
    assert.deepEqual(doc.paths['/api/v1/agent-authorizations/approve'].post.security, [{ ownerBearer: ['read'] }]);
    assert.deepEqual(doc.paths['/api/v1/rentals'].post.security, [{ bearer: ['rent'] }]);
  });

  it('reads route facts only under names it knows, and serves none of them', () => {
    const known = new Set<string>(Object.values(ROUTE_FACTS));
    for (const { method, path, operation } of specRoutes()) {
      for (const name of Object.keys(operation).filter((k) => k.startsWith('x-')))
        assert.ok(known.has(name), `${method} ${path} states ${name}, which nothing reads`);
    }
    for (const { method, path, op } of operations(doc))
      assert.deepEqual(
        Object.keys(op).filter((k) => k.startsWith('x-')),
        [],
        `${method} ${path}`,
      );
  });

  it('lists the error codes as an enum equal to the error table, and the tags in the order of the journey', () => {
    assert.deepEqual(doc.components.schemas.ErrorCode.enum, Object.keys(ERROR_STATUS));
    assert.equal(doc.components.schemas.ErrorBody.properties.code.$ref, '#/components/schemas/ErrorCode');
    const tags = (doc.tags as { name: string }[]).map((t) => t.name);
    const journey = ['Inventory', 'Account', 'Billing', 'Rentals', 'Deployments', 'Agents'];
    assert.deepEqual(
      tags.filter((t) => journey.includes(t)),
      journey,
    );
    assert.match(doc.info.description, /## Quickstart/);
  });

  it('declares no placeholder responses: each says when it happens', () => {
    for (const { method, path, op } of operations(doc)) {
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        assert.doesNotMatch(
          response.description,
          /does not produce|at present|placeholder/i,
          `${method} ${path} ${status}`,
        );
      }
    }
    assert.match(doc.paths['/api/v1/me'].get.responses['402'].description, /frozen or negative account still reads/);
  });
});
