import assert from 'node:assert/strict';
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import supertest from 'supertest';
import { createApp } from '../../src/app.js';
import { createLogger } from '../../src/logger.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as sent, before any content decoding. */
  bytes: Buffer;
}

const offer = (key: string, pricePerHourMinor: number, name = 'NVIDIA H100 SXM'): LocalInventoryOffer => ({
  key,
  name,
  category: 'datacenter',
  vramGb: 80,
  gpuCount: 1,
  pricePerHourMinor,
  maximumDurationSeconds: 86400,
});

describe('inventory answered from the serialised snapshot', () => {
  let ctx: TestContext;
  let server: Server;
  let port: number;

  /** One request with exactly these headers (supertest would add and undo its own Accept-Encoding). */
  function get(path: string, headers: Record<string, string> = {}): Promise<Raw> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, path, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, bytes: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  function decoded(res: Raw): { data: unknown; meta: { requestId: string; apiVersion: string } } {
    const encoding = res.headers['content-encoding'];
    const plain =
      encoding === 'gzip' ? gunzipSync(res.bytes) : encoding === 'br' ? brotliDecompressSync(res.bytes) : res.bytes;
    assert.equal(Number(res.headers['content-length']), res.bytes.length);
    return JSON.parse(plain.toString('utf8'));
  }

  before(async () => {
    ctx = await createTestContext();
    // Enough offers that the bodies are compressed (small ones are sent as they are).
    await ctx.setInventory(
      Array.from({ length: 40 }, (_, i) =>
        offer(`w-${i}`, 200 + i, i % 2 ? 'NVIDIA H100 SXM' : 'NVIDIA GeForce RTX 4090'),
      ),
    );
    server = ctx.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    await new Promise((r) => server.close(r));
    await ctx.close();
  });

  it('sends the envelope the controller sends, byte for byte but for the request id', async () => {
    const fast = await get('/api/v1/offers?gpu=h100', { 'X-Request-Id': 'trace-fast-0001' });
    // A parameter the fast path does not know leaves the request to the generated route.
    const routed = await get('/api/v1/offers?gpu=h100&via=controller', { 'X-Request-Id': 'trace-slow-0001' });
    assert.equal(fast.status, 200);
    assert.equal(routed.status, 200);
    assert.equal(fast.bytes.toString().replace('trace-fast-0001', 'trace-slow-0001'), routed.bytes.toString());
    assert.equal(fast.headers.etag, routed.headers.etag);
    const body = decoded(fast);
    assert.deepEqual(body.meta, { requestId: 'trace-fast-0001', apiVersion: 'v1' });
    assert.equal(fast.headers['x-request-id'], 'trace-fast-0001');
    assert.equal((body.data as unknown[]).length, 20);
    assert.match(String(fast.headers['content-type']), /^application\/json; charset=utf-8$/);
  });

  it('compresses for clients that accept gzip or brotli, each decoding to the same JSON with its own request id', async () => {
    const plain = await get('/api/v1/offers');
    const gzip = await get('/api/v1/offers', { 'Accept-Encoding': 'gzip' });
    const br = await get('/api/v1/offers', { 'Accept-Encoding': 'gzip, deflate, br' });
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(gzip.headers['content-encoding'], 'gzip');
    assert.equal(br.headers['content-encoding'], 'br');
    assert.ok(gzip.bytes.length < plain.bytes.length / 3 && br.bytes.length < plain.bytes.length / 3);
    const [p, g, b] = [decoded(plain), decoded(gzip), decoded(br)];
    assert.deepEqual(g.data, p.data);
    assert.deepEqual(b.data, p.data);
    for (const [res, body] of [
      [plain, p],
      [gzip, g],
      [br, b],
    ] as const) {
      assert.equal(body.meta.requestId, res.headers['x-request-id']);
      assert.equal(res.headers.vary, 'Accept-Encoding');
    }
    assert.equal(
      new Set([p.meta.requestId, g.meta.requestId, b.meta.requestId]).size,
      3,
      'each response has its own id',
    );
    assert.equal(new Set([plain.headers.etag, gzip.headers.etag, br.headers.etag]).size, 1, 'one ETag per snapshot');
  });

  it('honours the q-values of Accept-Encoding', async () => {
    const cases: Array<[string, string | undefined]> = [
      ['br;q=0, gzip;q=0', undefined],
      ['identity', undefined],
      ['br;q=0.1, gzip', 'gzip'],
      ['gzip;q=0.2, br;q=0.9', 'br'],
      ['gzip, br;q=0.5', 'gzip'],
      ['gzip, deflate, br', 'br'],
      ['*;q=0, gzip', 'gzip'],
      ['*', 'br'],
      ['deflate', undefined],
    ];
    for (const [header, expected] of cases) {
      const res = await get('/api/v1/gpus', { 'Accept-Encoding': header });
      assert.equal(res.headers['content-encoding'], expected, header);
      assert.equal(decoded(res).meta.requestId, res.headers['x-request-id'], header);
    }
  });

  it('gives two requests two request ids and one ETag, and answers its If-None-Match with a 304 carrying the usual headers', async () => {
    const [first] = decoded(await get('/api/v1/offers')).data as Array<{ id: string }>;
    for (const path of [
      '/api/v1/offers',
      '/api/v1/gpus',
      '/api/v1/gpus/h100-sxm',
      '/api/v1/offers?gpu=4090',
      `/api/v1/offers/${first.id}`,
    ]) {
      const a = await get(path, { 'Accept-Encoding': 'gzip' });
      const b = await get(path, { 'Accept-Encoding': 'br' });
      assert.equal(a.status, 200, path);
      assert.notEqual(decoded(a).meta.requestId, decoded(b).meta.requestId, path);
      assert.equal(a.headers.etag, b.headers.etag, path);
      assert.match(String(a.headers.etag), /^W\/"[A-Za-z0-9_-]+"$/);
      const again = await get(path, { 'If-None-Match': String(a.headers.etag), Origin: 'https://agent.example' });
      assert.equal(again.status, 304, path);
      assert.equal(again.bytes.length, 0);
      assert.equal(again.headers.etag, a.headers.etag);
      assert.match(String(again.headers['x-request-id']), /^req_/);
      assert.equal(again.headers['access-control-allow-origin'], '*');
      assert.equal(again.headers['access-control-expose-headers'], 'ETag, X-Request-Id');
      assert.equal(again.headers['x-content-type-options'], 'nosniff');
      assert.match(String(again.headers['content-security-policy']), /frame-ancestors 'none'/);
      assert.equal(again.headers['cache-control'], 'public, max-age=0, must-revalidate');
    }
  });

  it('filters by ?gpu= family and changes the ETag when a refresh changes the offers', async () => {
    const family = decoded(await get('/api/v1/offers?gpu=H100', { 'Accept-Encoding': 'gzip' }));
    const names = new Set((family.data as Array<{ name: string }>).map((o) => o.name));
    assert.deepEqual([...names], ['H100 SXM']);
    const before = await get('/api/v1/offers');
    const gpusBefore = await get('/api/v1/gpus');
    await ctx.setInventory([offer('w-new', 150)]);
    const after = await get('/api/v1/offers', { 'If-None-Match': String(before.headers.etag) });
    assert.equal(after.status, 200);
    assert.notEqual(after.headers.etag, before.headers.etag);
    assert.equal((decoded(after).data as unknown[]).length, 1);
    assert.notEqual((await get('/api/v1/gpus')).headers.etag, gpusBefore.headers.etag);
  });

  it('leaves unknown models, other methods and malformed paths to the generated routes', async () => {
    const missing = await get('/api/v1/gpus/tpu-v5', { 'Accept-Encoding': 'gzip' });
    assert.equal(missing.status, 404);
    assert.equal(JSON.parse(missing.bytes.toString()).error.requestId, missing.headers['x-request-id']);
    const malformed = await get('/api/v1/gpus/%c3%28');
    assert.equal(malformed.status, 400);
    const gone = await get('/api/v1/offers/3f6c2a9e-8d41-4b7a-9c2e-5d1f0a7b6e42');
    assert.equal(gone.status, 404);
    assert.equal(JSON.parse(gone.bytes.toString()).error.code, 'NOT_FOUND');
    const head = await ctx.api.head('/api/v1/offers');
    assert.equal(head.status, 200);
    assert.ok(head.headers.etag);
  });

  it('writes the request log line of a fast answer when the log records requests', async () => {
    const lines: Array<{ requestId?: string; res?: { statusCode: number }; req?: { url: string } }> = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        done();
      },
    });
    const api = supertest(createApp({ ...ctx.services, logger: createLogger('info', sink) }));
    const res = await api.get('/api/v1/gpus').set('X-Request-Id', 'trace-logged-01');
    assert.equal(res.status, 200);
    assert.equal(res.body.meta.requestId, 'trace-logged-01');
    await new Promise((r) => setImmediate(r));
    const line = lines.find((l) => l.requestId === 'trace-logged-01');
    assert.ok(line, JSON.stringify(lines));
    assert.equal(line.res?.statusCode, 200);
    assert.equal(line.req?.url, '/api/v1/gpus');
  });
});
