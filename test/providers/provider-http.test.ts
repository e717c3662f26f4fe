import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';
import { readError } from '../../plugins/vast/errors.js';
import { PRODUCT_USER_AGENT } from '../../src/providers/kit/user-agent.js';
import { ProviderApiError, ProviderHttpClient, errorClassOf } from '../../src/providers/provider-http.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

async function serve(handler: Handler): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => handler(req, res, body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** A clock the limiter can wait on without real sleeping. */
function virtualTime() {
  let t = 1_000_000;
  const slept: number[] = [];
  return {
    now: () => t,
    sleep: async (ms: number) => {
      slept.push(ms);
      t += ms;
    },
    slept,
  };
}

describe('ProviderHttpClient', () => {
  let server: Server | undefined;
  afterEach(() => server?.close());

  it('sends the bearer key and JSON, and returns any status with its parsed body', async () => {
    let seen: { auth?: string; type?: string; body: string; url?: string } = { body: '' };
    const s = await serve((req, res, body) => {
      seen = { auth: req.headers.authorization, type: req.headers['content-type'], body, url: req.url };
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no_such_ask"}');
    });
    server = s.server;
    const sut = new ProviderHttpClient({
      providerId: 't',
      baseUrl: `${s.url}/`,
      apiKey: 'k-123',
      logger: createLogger('silent'),
      limits: {},
    });
    const res = await sut.request('create', 'PUT', '/api/v0/asks/7/', {
      body: { label: 'x' },
      query: { owner: 'me', skip: undefined },
    });
    assert.equal(res.status, 404);
    assert.deepEqual(res.json, { error: 'no_such_ask' });
    assert.equal(seen.auth, 'Bearer k-123');
    assert.equal(seen.type, 'application/json');
    assert.equal(seen.body, '{"label":"x"}');
    assert.equal(seen.url, '/api/v0/asks/7/?owner=me');
  });

  it('announces the product User-Agent gpu-rental/<version> on every call, whatever the method', async () => {
    const agents: (string | undefined)[] = [];
    const s = await serve((req, res) => {
      agents.push(req.headers['user-agent']);
      res.writeHead(204).end();
    });
    server = s.server;
    const sut = new ProviderHttpClient({
      providerId: 't',
      baseUrl: s.url,
      apiKey: 'k',
      logger: createLogger('silent'),
      limits: {},
    });
    for (const method of ['GET', 'POST', 'PUT', 'DELETE'])
      await sut.request('b', method, '/x', method === 'GET' ? {} : { body: {} });
    const version = (
      JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    ).version;
    assert.equal(PRODUCT_USER_AGENT, `gpu-rental/${version}`);
    assert.deepEqual(agents, Array(4).fill(`gpu-rental/${version}`));
  });

  it('takes the API key out of an answer that echoes the request, before any plugin can quote it in a log', async () => {
    const key = 'vk_live_0123456789abcdef';
    const s = await serve((req, res) => {
      // A proxy's debugging page, echoing what it received in three spellings.
      const auth = String(req.headers.authorization);
      const body = {
        error: 'invalid_args',
        msg: `echo: ${auth} / ${encodeURIComponent(key)} / ${Buffer.from(key).toString('base64')}`,
      };
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    server = s.server;
    const lines: string[] = [];
    const logger = createLogger('warn', new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
    const sut = new ProviderHttpClient({ providerId: 'vast', baseUrl: s.url, apiKey: key, logger, limits: {} });
    const res = await sut.request('create', 'PUT', '/api/v0/asks/1/');
    assert.ok(!res.text.includes(key) && !JSON.stringify(res.json).includes(key));
    assert.ok(!res.text.includes(Buffer.from(key).toString('base64')));
    assert.match(res.text, /Bearer \[redacted\]/);
    // What the Vast plugin writes to its warn log for such an answer.
    const err = readError('vast PUT /api/v0/asks/1/', res);
    logger.warn({ err: err.message }, 'create failed');
    assert.ok(!lines.join('').includes(key), lines.join(''));
    assert.ok(!err.message.includes(key));
  });

  it('spaces calls to one bucket by its minimum interval, and leaves other buckets alone', async () => {
    const s = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    server = s.server;
    const vt = virtualTime();
    const sut = new ProviderHttpClient({
      providerId: 't',
      baseUrl: s.url,
      apiKey: 'k',
      logger: createLogger('silent'),
      limits: { get: { minIntervalMs: 2000 } },
      now: vt.now,
      sleep: vt.sleep,
    });
    await Promise.all([
      sut.request('get', 'GET', '/a'),
      sut.request('get', 'GET', '/a'),
      sut.request('get', 'GET', '/a'),
    ]);
    assert.deepEqual(vt.slept, [2000, 2000]);
    await sut.request('other', 'GET', '/b');
    assert.deepEqual(vt.slept, [2000, 2000]);
  });

  it('backs a bucket off after a 429: Retry-After when given, doubling when not', async () => {
    let retryAfter: string | null = '7';
    const s = await serve((_req, res) => {
      const headers: Record<string, string> = { 'content-type': 'text/plain' };
      if (retryAfter) headers['retry-after'] = retryAfter;
      res.writeHead(429, headers).end('Too Many Requests');
    });
    server = s.server;
    const vt = virtualTime();
    const sut = new ProviderHttpClient({
      providerId: 't',
      baseUrl: s.url,
      apiKey: 'k',
      logger: createLogger('silent'),
      limits: {},
      backoffMs: 1000,
      now: vt.now,
      sleep: vt.sleep,
    });
    const first = await sut.request('list', 'GET', '/x');
    assert.equal(first.status, 429);
    assert.equal(first.json, null);
    assert.equal(first.retryAfterMs, 7000);
    assert.equal(sut.waitMs('list'), 7000);
    retryAfter = null;
    const second = await sut.request('list', 'GET', '/x');
    assert.deepEqual(vt.slept, [7000]);
    assert.equal(second.retryAfterMs, 2000, 'second 429 in a row without Retry-After doubles the base');
    const third = await sut.request('list', 'GET', '/x');
    assert.equal(third.retryAfterMs, 4000);
  });

  it('throws timeout when no answer comes in time, and unavailable when nothing listens', async () => {
    const s = await serve(() => {
      // never answers
    });
    server = s.server;
    const sut = new ProviderHttpClient({
      providerId: 't',
      baseUrl: s.url,
      apiKey: 'secret-key',
      logger: createLogger('silent'),
      limits: {},
      timeoutMs: 150,
    });
    await assert.rejects(sut.request('create', 'POST', '/hang'), (err: unknown) => {
      assert.ok(err instanceof ProviderApiError);
      assert.equal(err.errorClass, 'timeout');
      assert.doesNotMatch(err.message, /secret-key/);
      return true;
    });
    s.server.closeAllConnections();
    const closed = new ProviderHttpClient({
      providerId: 't',
      baseUrl: 'http://127.0.0.1:1',
      apiKey: 'k',
      logger: createLogger('silent'),
      limits: {},
    });
    await assert.rejects(closed.request('x', 'GET', '/'), (err: unknown) => errorClassOf(err) === 'unavailable');
    assert.equal(errorClassOf(new Error('boom')), 'internal');
  });
});
