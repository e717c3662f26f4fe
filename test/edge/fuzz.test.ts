import assert from 'node:assert/strict';
import { Agent, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { Json } from '../../src/http/openapi.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';

/** Cases per operation: a few hundred, tuned so the whole file stays well under a minute. */
const RUNS_PER_OPERATION = 200;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

interface Sent {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

function resolve(schema: Json, components: Json): Json {
  let s = schema;
  for (let i = 0; i < 20 && s?.$ref; i++) s = components[String(s.$ref).split('/').pop()!];
  return s ?? {};
}

/** Values the schema allows, and values just outside it (bounds, types), mixed. */
function fromSchema(schema: Json, components: Json, depth = 0): fc.Arbitrary<unknown> {
  const s = resolve(schema, components);
  if (depth > 6) return fc.constant(null);
  const options = (s.anyOf ?? s.oneOf) as Json[] | undefined;
  if (options) return fc.oneof(...options.map((o) => fromSchema(o, components, depth + 1)));
  if (Array.isArray(s.enum)) return fc.oneof(fc.constantFrom(...s.enum), fc.string({ maxLength: 8 }));
  switch (s.type) {
    case 'string':
      return fc.oneof(
        fc.string({ maxLength: typeof s.maxLength === 'number' ? s.maxLength + 2 : 30 }),
        fc.uuid(),
        fc.constantFrom('gps_' + 'A'.repeat(43), 'gpa_' + 'b'.repeat(43), '', '%ff', 'x'.repeat(300)),
      );
    case 'integer':
    case 'number':
      return fc.oneof(
        fc.integer({
          min: typeof s.minimum === 'number' ? s.minimum : -1e6,
          max: typeof s.maximum === 'number' ? s.maximum : 1e6,
        }),
        fc.constantFrom(-1, 0, 0.5, 1e300, Number.MAX_SAFE_INTEGER + 2, '12'),
      );
    case 'boolean':
      return fc.oneof(fc.boolean(), fc.constant('true'));
    case 'array':
      return fc.array(fromSchema(s.items ?? {}, components, depth + 1), { maxLength: 4 });
    default: {
      const props = Object.entries((s.properties as Json) ?? {});
      if (props.length === 0) return fc.jsonValue({ maxDepth: 2 });
      const shape = Object.fromEntries(props.map(([k, v]) => [k, fromSchema(v, components, depth + 1)]));
      return fc.oneof(
        fc.record(shape, { requiredKeys: (s.required as string[]) ?? [] }),
        fc
          .record(shape, { requiredKeys: [] })
          .chain((r) =>
            fc
              .dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 })
              .map((extra) => ({ ...extra, ...r })),
          ),
      );
    }
  }
}

/** A path segment: plausible ids, and raw bytes no router should choke on. */
const segment = fc.oneof(
  fc.uuid(),
  fc.string({ maxLength: 20 }).map(encodeURIComponent),
  fc.constantFrom('%ff', '%', '%E2%82', '%2F', '..', '%00', 'a%20b', 'x'.repeat(600), 'gpr_x.y'),
);

/** Header values within what HTTP lets a client send (visible ASCII and spaces). */
const headerText = (max: number) => fc.string({ maxLength: max }).map((v) => v.trim());

function headersArb(tokens: string[]): fc.Arbitrary<Record<string, string | undefined>> {
  return fc.record(
    {
      authorization: fc.oneof(
        fc.constantFrom(...tokens.map((t) => `Bearer ${t}`), ...tokens.map((t) => `bearer ${t}`)),
        headerText(40).map((v) => `Bearer ${v}`),
        headerText(60),
        fc.constant('Bearer ' + 'a'.repeat(5000)),
      ),
      'idempotency-key': fc.oneof(fc.uuid(), headerText(140), fc.constant('')),
      'content-type': fc.constantFrom(
        'application/json',
        'application/json; charset=utf8',
        'application/json; charset=UTF-8',
        'application/json; charset=latin1',
        'application/json; charset="utf-16"',
        'application/json; charset',
        'application/merge-patch+json',
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        ';;;',
      ),
      'content-encoding': fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'bogus', 'gzip, gzip'),
      'x-forwarded-for': fc.oneof(fc.ipV4(), headerText(20), fc.constant('1.2.3.4, ' + '9'.repeat(600))),
      'x-request-id': headerText(200),
      'if-none-match': headerText(40),
      accept: fc.constantFrom('*/*', 'text/html', 'application/xml'),
    },
    { requiredKeys: [] },
  );
}

function bodyArb(schema: Json | undefined, components: Json): fc.Arbitrary<Buffer | undefined> {
  const json = schema ? fromSchema(schema, components) : fc.jsonValue({ maxDepth: 3 });
  return fc.oneof(
    { weight: 4, arbitrary: json.map((v) => Buffer.from(JSON.stringify(v) ?? 'null')) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v))) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }).map((v) => Buffer.from(v)) },
    { weight: 1, arbitrary: fc.integer({ min: 30, max: 3000 }).map((n) => Buffer.from('['.repeat(n) + ']'.repeat(n))) },
    { weight: 1, arbitrary: json.map((v) => gzipSync(JSON.stringify(v) ?? 'null')) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

function send(base: string, agent: Agent, r: Sent): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const headers: Record<string, string> = { ...r.headers };
    if (r.body) headers['content-length'] = String(r.body.length);
    const req = request(`${base}${r.path}`, { method: r.method, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolvePromise(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

describe('fuzzing every operation of /api/openapi.json', function () {
  this.timeout(120_000);
  let ctx: TestContext;
  let server: Server;
  let base: string;
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  let doc: Json;
  let tokens: string[];

  before(async () => {
    ctx = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '1000000' } });
    server = ctx.app.listen(0, '127.0.0.1');
    await new Promise<void>((r) => server.once('listening', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    doc = (await ctx.api.get('/api/openapi.json')).body;
    const owner = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
    tokens = [(await signup(ctx)).token, (await ctx.services.accounts.issueOwnerKey(owner.id)).token];
  });
  after(async () => {
    agent.destroy();
    server?.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await ctx.close();
  });

  it('never answers 5xx, whatever the path, headers and body', async () => {
    const operations = Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]).map((method) => ({ method, path, op: item[method] as Json })),
    );
    assert.ok(operations.length >= 20);
    const components = doc.components.schemas as Json;
    for (const { method, path, op } of operations) {
      const params = path.match(/\{\w+\}/g) ?? [];
      const schema = op.requestBody?.content?.['application/json']?.schema as Json | undefined;
      const arb = fc.record({
        segments: fc.tuple(...params.map(() => segment), fc.constant('')),
        query: fc.oneof(
          fc.constant(''),
          fc.string({ maxLength: 20 }).map((q) => `?limit=${encodeURIComponent(q)}&gpu=%zz`),
        ),
        headers: headersArb(tokens),
        body: bodyArb(schema, components),
      });
      await fc.assert(
        fc.asyncProperty(arb, async ({ segments, query, headers, body }) => {
          let i = 0;
          const sent: Sent = {
            method: method.toUpperCase(),
            path: path.replace(/\{\w+\}/g, () => segments[i++]) + query,
            headers: Object.fromEntries(
              Object.entries(headers).filter((e): e is [string, string] => e[1] !== undefined),
            ),
            body,
          };
          const status = await send(base, agent, sent);
          assert.ok(
            status > 0 && status < 500,
            `${status} for ${JSON.stringify({ ...sent, body: body?.toString('latin1').slice(0, 200) })}`,
          );
        }),
        { numRuns: RUNS_PER_OPERATION, endOnFailure: true },
      );
    }
  });
});
