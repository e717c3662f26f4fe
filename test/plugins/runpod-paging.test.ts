import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import runpodPlugin from '../../plugins/runpod/index.js';
import { offerKey } from '../../plugins/runpod/offers.js';
import { RunpodProvider } from '../../plugins/runpod/provider.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import type { ProviderDeps } from '../../src/providers/provider.js';
import { testDataSource } from '../helpers/db.js';
import { NO_LIMITS } from './runpod-harness.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

const pod = (id: string, name: string) => ({ id, name, status: 'RUNNING', createdAt: '2026-01-01T00:00:00Z' });

/**
 * A RunPod list that pages the way RunPod announced (`pagination.nextCursor`, `?cursor=`): the
 * documented fake answers one page, so this small server stands in for the paged answer.
 */
async function pagedApi(pages: Record<string, unknown>) {
  const calls: { method: string; url: string }[] = [];
  const server: Server = createServer((req, res) => {
    calls.push({ method: req.method ?? '', url: req.url ?? '' });
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/v2/pods') {
      const page = pages[url.searchParams.get('cursor') ?? ''];
      if (page === 503)
        return res.writeHead(503, { 'content-type': 'application/problem+json' }).end('{"title":"down"}');
      if (page) return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(page));
    }
    res.writeHead(500, { 'content-type': 'application/problem+json' }).end('{"title":"unexpected call"}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () => new Promise((r) => server.close(r)),
  };
}

describe('RunPod: lists that page', () => {
  let api: Awaited<ReturnType<typeof pagedApi>> | undefined;
  afterEach(async () => {
    await api?.close();
    api = undefined;
  });

  async function provider(pages: Record<string, unknown>): Promise<RunpodProvider> {
    api = await pagedApi(pages);
    const deps: ProviderDeps = {
      logger: createLogger('silent'),
      clock: systemClock,
      dataSource: await testDataSource(),
      production: false,
      labelPrefix: 'gpr-',
      drift: IGNORE_DRIFT,
    };
    return new RunpodProvider(runpodPlugin.validateOptions({ API_KEY: 'k', API_URL: api.url }), deps, {
      limits: NO_LIMITS,
      pollTtlMs: 0,
      timeoutMs: 2000,
    });
  }

  const twoPages = {
    '': { pods: [pod('p1', 'gpr-a')], pagination: { nextCursor: 'c2' } },
    c2: { pods: [pod('p2', 'gpr-b'), pod('p3', 'someone-else')], pagination: { nextCursor: null } },
  };

  it('follows nextCursor: a pod on the second page is found, listed and adopted, never created again', async () => {
    const p = await provider(twoPages);
    assert.equal((await p.findByLabel('gpr-b'))?.instanceId, 'p2');
    assert.deepEqual(
      (await p.listInstances()).map((i) => i.instanceId),
      ['p1', 'p2'],
    );
    const res = await p.create(
      'gpr-b',
      { id: 'o', key: offerKey('NVIDIA H100 80GB HBM3', 1), name: 'H100', gpuCount: 1 },
      'ssh-ed25519 AAAA test',
    );
    assert.deepEqual(res, { kind: 'created', instanceId: 'p2' });
    assert.ok(!api!.calls.some((c) => c.method === 'POST'), 'no second pod was asked for');
    assert.ok(api!.calls.some((c) => c.url === '/v2/pods?cursor=c2'));
  });

  it('a second page that fails makes the listing fail, never "absent"', async () => {
    const p = await provider({ '': twoPages[''], c2: 503 });
    await assert.rejects(p.findByLabel('gpr-b'), (e: ProviderApiError) => e.errorClass === 'unavailable');
    await assert.rejects(p.listInstances(), ProviderApiError);
    const res = await p.create(
      'gpr-b',
      { id: 'o', key: offerKey('NVIDIA H100 80GB HBM3', 1), name: 'H100', gpuCount: 1 },
      'ssh-ed25519 AAAA test',
    );
    assert.equal(res.kind, 'ambiguous');
    assert.ok(!api!.calls.some((c) => c.method === 'POST'));
  });

  it('a cursor that does not advance is a malformed listing', async () => {
    const p = await provider({
      '': { pods: [], pagination: { nextCursor: 'same' } },
      same: { pods: [], pagination: { nextCursor: 'same' } },
    });
    await assert.rejects(p.listInstances(), (e: ProviderApiError) => e.errorClass === 'bad_response');
  });
});
