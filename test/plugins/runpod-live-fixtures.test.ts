import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isPod } from '../../plugins/runpod/client.js';
import { answerText, createResultFor, errorRule } from '../../plugins/runpod/errors.js';
import runpodPlugin from '../../plugins/runpod/index.js';
import { offerKey } from '../../plugins/runpod/offers.js';
import { RunpodProvider } from '../../plugins/runpod/provider.js';
import { podReading } from '../../plugins/runpod/states.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import type { ProviderDeps } from '../../src/providers/provider.js';
import { testDataSource } from '../helpers/db.js';
import { NO_LIMITS } from './runpod-harness.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

const DIR = new URL('../fixtures/providers/runpod/', import.meta.url);
const text = (file: string) => readFileSync(new URL(file, DIR), 'utf8');
const json = <T>(file: string) => JSON.parse(text(file)) as T;

/** An answer the fixture server gives: status, content type and body exactly as kept. */
interface Answer {
  status: number;
  type: string;
  body: string;
}

/** Serves fixture files as RunPod's endpoints, so the plugin's own client parses them off the wire. */
async function fixtureApi(routes: Record<string, Answer>): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const a = routes[`${req.method} ${path}`] ?? {
      status: 404,
      type: 'application/problem+json',
      body: '{"title":"Not Found","status":404,"detail":"pod not found"}',
    };
    res.writeHead(a.status, { 'Content-Type': a.type }).end(a.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

async function providerAt(url: string): Promise<RunpodProvider> {
  const deps: ProviderDeps = {
    logger: createLogger('silent'),
    clock: systemClock,
    dataSource: await testDataSource(),
    production: false,
    labelPrefix: 'py',
    drift: IGNORE_DRIFT,
  };
  return new RunpodProvider(runpodPlugin.validateOptions({ API_KEY: 'rpa_fixture', API_URL: url }), deps, {
    limits: NO_LIMITS,
    pollTtlMs: 0,
    timeoutMs: 2000,
  });
}

/** A capacity text as RunPod's REST API carries it: the `detail` of a 400 problem document. */
const capacityProblem = (detail: string) => ({
  status: 400,
  json: { title: 'Bad Request', status: 400, detail },
  text: '',
});

/**
 * Every RunPod fixture file, each with what the plugin must make of it. Provenance (see SOURCES.md):
 * the edge body and the capacity texts were pasted from live answers by other users; the two pod
 * documents are the vendor's own examples from an earlier v2 document, not captures.
 */
const CHECKS: Record<string, { provenance: string; check: () => Promise<void> | void }> = {
  'edge-403-cloudflare-1010.txt': {
    provenance: 'live body pasted in issue threads',
    async check() {
      const body = text('edge-403-cloudflare-1010.txt');
      const rule = errorRule(403, answerText(null, body));
      assert.deepEqual(
        [rule.create, rule.read],
        ['rejected', 'request'],
        'an edge block is neither capacity nor a bad key',
      );
      const { result } = createResultFor({ status: 403, json: null, text: body });
      assert.equal(result.kind, 'rejected');
      assert.equal(result.kind === 'rejected' && result.errorClass, 'request');
      assert.match(result.reason, /User-Agent/);
      assert.doesNotMatch(result.reason, /RUNPOD_PROVIDER_API_KEY/);
      // Off the wire: every call gets the page, and none blames the key.
      const api = await fixtureApi({
        'GET /v2/catalog/gpus': { status: 403, type: 'text/plain; charset=UTF-8', body },
        'GET /v2/pods': { status: 403, type: 'text/plain; charset=UTF-8', body },
      });
      try {
        const p = await providerAt(api.url);
        await assert.rejects(
          p.listOffers(),
          (e: unknown) =>
            e instanceof ProviderApiError &&
            e.errorClass === 'request' &&
            e.status === 403 &&
            /error code: 1010/.test(e.message),
        );
        await assert.rejects(
          p.listInstances(),
          (e: unknown) => e instanceof ProviderApiError && e.errorClass === 'request',
        );
      } finally {
        await api.close();
      }
    },
  },
  'create-capacity-message-graphql.txt': {
    provenance: 'live text pasted from a traceback',
    check() {
      const { result } = createResultFor(capacityProblem(text('create-capacity-message-graphql.txt').trim()));
      assert.equal(result.kind, 'unavailable', 'no capacity leads to the next candidate');
    },
  },
  'create-capacity-message-dstack-log.txt': {
    provenance: 'live text pasted from a log, second wording',
    check() {
      const { result } = createResultFor(capacityProblem(text('create-capacity-message-dstack-log.txt').trim()));
      assert.equal(result.kind, 'unavailable');
    },
  },
  'list-pods-v2-document-example-2026-08.json': {
    provenance: "vendor's example from an earlier v2 document",
    async check() {
      const doc = json<{ pods: Record<string, unknown>[] }>('list-pods-v2-document-example-2026-08.json');
      assert.ok(doc.pods.every(isPod));
      assert.deepEqual(podReading(String(doc.pods[0].status)), { kind: 'known', state: 'running' });
      const api = await fixtureApi({
        'GET /v2/pods': {
          status: 200,
          type: 'application/json',
          body: text('list-pods-v2-document-example-2026-08.json'),
        },
      });
      try {
        const p = await providerAt(api.url);
        // No `pagination` object: the one page is the whole list. No `ssh`: running, but no endpoint yet.
        const listed = await p.listInstances();
        assert.deepEqual(
          listed.map((i) => [i.instanceId, i.label, i.state, i.providerState, i.ssh]),
          [['7h9k2m4n6p', 'pytorch-training', 'running', 'RUNNING', undefined]],
        );
        assert.equal((await p.findByLabel('pytorch-training'))?.instanceId, '7h9k2m4n6p');
        assert.equal((await p.get('7h9k2m4n6p')).ssh, undefined);
        // Its `8888/http` is served by RunPod's proxy under the pod id; `22/tcp` is not an HTTP endpoint.
        assert.deepEqual(listed[0].endpoints, [{ port: 8888, url: 'https://7h9k2m4n6p-8888.proxy.runpod.net' }]);
        assert.equal(listed[0].startupPhase, undefined);
      } finally {
        await api.close();
      }
    },
  },
  'create-pod-201-v2-document-example-2026-08.json': {
    provenance: "vendor's example from an earlier v2 document",
    async check() {
      const pod = json<Record<string, unknown>>('create-pod-201-v2-document-example-2026-08.json');
      assert.ok(isPod(pod));
      assert.deepEqual([pod.runtime, 'ssh' in pod], [{}, false]);
      const body = text('create-pod-201-v2-document-example-2026-08.json');
      const api = await fixtureApi({
        'GET /v2/pods': { status: 200, type: 'application/json', body: '{"pods":[]}' },
        'POST /v2/pods': { status: 201, type: 'application/json', body },
        'GET /v2/pods/7h9k2m4n6p': { status: 200, type: 'application/json', body },
      });
      try {
        const p = await providerAt(api.url);
        const res = await p.create(
          'pylabel',
          { id: 'o', key: offerKey('NVIDIA GeForce RTX 4090', 1), name: 'RTX 4090', gpuCount: 1 },
          'ssh-ed25519 AAAA fixture',
        );
        assert.deepEqual(res, { kind: 'created', instanceId: '7h9k2m4n6p' });
        // PROVISIONING with runtime {} and no `ssh`: pending, not a parse error.
        const info = await p.get('7h9k2m4n6p');
        assert.deepEqual([info.state, info.providerState, info.ssh], ['pending', 'PROVISIONING', undefined]);
        // Already placed (a data center is named) and not started: its image is being fetched.
        assert.deepEqual([info.startupPhase, info.endpoints], ['pulling_image', undefined]);
      } finally {
        await api.close();
      }
    },
  },
};

describe('RunPod plugin over every recorded fixture', () => {
  it('has a check for every fixture file', () => {
    const files = readdirSync(DIR)
      .filter((f) => f !== 'SOURCES.md')
      .sort();
    assert.deepEqual(files, Object.keys(CHECKS).sort());
  });

  for (const [file, { provenance, check }] of Object.entries(CHECKS)) {
    it(`${file} (${provenance})`, check);
  }
});
