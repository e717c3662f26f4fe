import assert from 'node:assert/strict';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import type { ProviderErrorClass } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import {
  NO_INSTANCES_DETAIL,
  type RunpodEndpoint,
  type RunpodFailure,
  type ScriptedProblem,
} from '../fakes/runpod-api.js';
import { H100, makeRunpodHarness, type RunpodHarness } from './runpod-harness.js';

const keys = generateDeploymentKeyPair('runpod-errors');

/** Every documented create answer, as the fake sends it, and what the plugin must make of it. */
const CREATE_CASES: {
  name: string;
  answer: ScriptedProblem | RunpodFailure;
  kind: string;
  reason: RegExp;
  log?: string;
  retryAfterMs?: number;
  errorClass?: ProviderErrorClass;
}[] = [
  {
    name: '400 no instances available',
    answer: { status: 400, detail: NO_INSTANCES_DETAIL },
    kind: 'unavailable',
    log: 'info',
    reason: /no capacity/,
  },
  {
    name: '400 rule violation for this GPU',
    answer: { status: 400, detail: 'gpu.count 16 exceeds the maximum of 8' },
    kind: 'unavailable',
    log: 'warn',
    reason: /exceeds the maximum/,
  },
  // Refusals every candidate would meet: rejected, naming what to fix, never hidden behind "no capacity".
  {
    name: '400 Invalid Image',
    answer: {
      status: 400,
      title: 'Invalid Image',
      detail: 'image "runpod/pytorch:nope" could not be pulled: manifest unknown',
    },
    kind: 'rejected',
    log: 'error',
    reason: /^RUNPOD_PROVIDER_IMAGE: .*manifest unknown/,
    errorClass: 'request',
  },
  {
    name: '400 CUDA constraint refused',
    answer: { status: 400, detail: 'gpu.allowedCudaVersions and gpu.minCudaVersion are mutually exclusive' },
    kind: 'rejected',
    log: 'error',
    reason: /^RUNPOD_PROVIDER_CUDA_VERSIONS: /,
    errorClass: 'request',
  },
  {
    name: '400 a machine setting refused',
    answer: { status: 400, detail: 'ports: "70000/http" is not of the form port/protocol (http or tcp)' },
    kind: 'rejected',
    log: 'warn',
    reason: /machine settings .*70000/,
    errorClass: 'request',
  },
  {
    name: '400 malformed body',
    answer: { status: 400, detail: 'exactly one of gpu or cpu must be set' },
    kind: 'rejected',
    log: 'error',
    reason: /shape of our request/,
    errorClass: 'request',
  },
  {
    name: '401 bad key',
    answer: { status: 401, detail: 'invalid api key' },
    kind: 'rejected',
    log: 'error',
    reason: /^RUNPOD_PROVIDER_API_KEY: API key/,
    errorClass: 'auth',
  },
  {
    name: '402 insufficient balance',
    answer: { status: 402, detail: 'insufficient balance to deploy this pod' },
    kind: 'rejected',
    log: 'error',
    reason: /balance/,
    errorClass: 'auth',
  },
  {
    name: '403 no access to the pool',
    answer: { status: 403, detail: 'access denied' },
    kind: 'unavailable',
    log: 'warn',
    reason: /no access to the pool/,
  },
  {
    name: '404 unknown GPU type',
    answer: { status: 404, detail: 'resource not found' },
    kind: 'unavailable',
    log: 'warn',
    reason: /not found/,
  },
  {
    name: '405 method not allowed',
    answer: { status: 405, detail: 'The requested method is not allowed for this path.' },
    kind: 'rejected',
    log: 'error',
    reason: /unexpected client error/,
  },
  {
    name: '422 invalid body',
    answer: {
      status: 422,
      detail: 'Request validation failed.',
      errors: ["$: additional properties 'bogus' not allowed"],
    },
    kind: 'rejected',
    log: 'error',
    reason: /additional properties 'bogus'/,
  },
  {
    name: '429 with Retry-After',
    answer: { status: 429, detail: 'rate limit exceeded for the minute window', headers: { 'Retry-After': '12' } },
    kind: 'throttled',
    log: 'info',
    reason: /rate limited/,
    retryAfterMs: 12_000,
  },
  {
    name: '429 without Retry-After',
    answer: { status: 429, detail: 'rate limit exceeded' },
    kind: 'throttled',
    log: 'info',
    reason: /rate limited/,
    retryAfterMs: 2000,
  },
  {
    name: '500',
    answer: { status: 500, detail: 'internal error' },
    kind: 'ambiguous',
    log: 'warn',
    reason: /server error/,
  },
  {
    name: '502',
    answer: { status: 502, detail: 'bad gateway' },
    kind: 'ambiguous',
    log: 'warn',
    reason: /server error/,
  },
  { name: '503 (failNext 5xx)', answer: '5xx', kind: 'ambiguous', log: 'warn', reason: /server error/ },
  { name: 'timeout (failNext hang)', answer: 'hang', kind: 'ambiguous', reason: /no answer within/ },
  { name: 'dropped connection', answer: 'drop', kind: 'ambiguous', reason: /POST \/v2\/pods/ },
];

/** What every other call throws for the same answers. */
const READ_CASES: { answer: ScriptedProblem | RunpodFailure; errorClass: ProviderErrorClass }[] = [
  { answer: { status: 400, detail: 'product is required with include=AVAILABILITY' }, errorClass: 'request' },
  { answer: { status: 401, detail: 'missing bearer token' }, errorClass: 'auth' },
  { answer: { status: 403, detail: 'access denied' }, errorClass: 'auth' },
  { answer: { status: 422, detail: 'Request validation failed.' }, errorClass: 'request' },
  { answer: '429', errorClass: 'rate_limited' },
  { answer: { status: 500, detail: 'internal error' }, errorClass: 'unavailable' },
  { answer: '5xx', errorClass: 'unavailable' },
  { answer: 'drop', errorClass: 'unavailable' },
  { answer: 'hang', errorClass: 'timeout' },
];

function queue(h: RunpodHarness, endpoint: RunpodEndpoint, answer: ScriptedProblem | RunpodFailure) {
  if (typeof answer === 'string') h.fake.failNext(endpoint, answer);
  else h.fake.answerNext(endpoint, answer);
}

const label = (a: ScriptedProblem | RunpodFailure) => (typeof a === 'string' ? a : `${a.status} ${a.detail}`);

describe('RunPod error table', () => {
  let h: RunpodHarness;
  beforeEach(async () => {
    h = await makeRunpodHarness({ hooks: { timeoutMs: 400 } });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  for (const c of CREATE_CASES) {
    it(`create: ${c.name} -> ${c.kind}`, async () => {
      queue(h, 'create', c.answer);
      const res = await h.provider.create(h.label(), h.offer(), keys.publicKey);
      assert.equal(res.kind, c.kind, JSON.stringify(res));
      assert.match((res as { reason: string }).reason, c.reason);
      if (c.retryAfterMs !== undefined) assert.equal((res as { retryAfterMs: number }).retryAfterMs, c.retryAfterMs);
      if (res.kind === 'rejected') assert.equal(res.errorClass, c.errorClass ?? 'request');
      if (c.kind !== 'ambiguous') assert.equal(h.fake.instances().length, 0, 'nothing was created');
      assert.ok(!(res as { reason: string }).reason.includes(h.fake.apiKey));
      if (c.log)
        assert.ok(
          h.logs.some((l) => l.level === c.log && l.result === c.kind),
          `logged at ${c.log}: ${JSON.stringify(h.logs)}`,
        );
    });
  }

  it('create: the capacity 400 and a wrong key come the natural way too', async () => {
    h.fake.noCapacity(H100);
    assert.equal((await h.provider.create(h.label(), h.offer(), keys.publicKey)).kind, 'unavailable');
    const other = await h.newProvider({}, { API_KEY: 'rpa_wrong' });
    const res = await other.create(h.label(), h.offer('NVIDIA GeForce RTX 4090'), keys.publicKey);
    // The pre-create lookup already meets the 401: nothing is asked for, and the operator is told.
    assert.equal(res.kind, 'rejected');
    assert.match((res as { reason: string }).reason, /401 RUNPOD_PROVIDER_API_KEY: API key missing, wrong or revoked/);
    // The class is the kit's verdict for a refused lookup, the same for every plugin.
    assert.equal(res.kind === 'rejected' && res.errorClass, 'auth');
    assert.equal(
      h.logs.filter((l) => l.level === 'error' && /RUNPOD_PROVIDER_API_KEY/.test(String(l.reason))).length,
      1,
      'one error line names the variable',
    );
    assert.equal(h.fake.calls.filter((c) => c.method === 'POST').length, 1, 'only the first provider asked to create');
    await assert.rejects(other.listInstances(), (e: ProviderApiError) => e.errorClass === 'auth' && e.status === 401);
  });

  for (const endpoint of ['list', 'get', 'destroy', 'offers'] as const) {
    for (const c of READ_CASES) {
      it(`${endpoint}: ${label(c.answer)} -> throws ${c.errorClass}`, async () => {
        const call = async () => {
          if (endpoint === 'list') return h.provider.listInstances();
          if (endpoint === 'offers') return h.provider.listOffers();
          // get reads the list first; an id it does not hold is read by id.
          if (endpoint === 'get') return h.provider.get('nosuchpod');
          return h.provider.destroy('nosuchpod');
        };
        queue(h, endpoint, c.answer);
        await assert.rejects(
          call(),
          (e: unknown) =>
            e instanceof ProviderApiError && e.errorClass === c.errorClass && !e.message.includes(h.fake.apiKey),
        );
      });
    }
  }

  it('get: 404 is gone, destroy: 404 is success', async () => {
    assert.equal((await h.provider.get('nosuchpod')).state, 'gone');
    await h.provider.destroy('nosuchpod');
  });
});

describe('fake RunPod wire format', () => {
  let h: RunpodHarness;
  before(async () => {
    h = await makeRunpodHarness();
  });
  after(async () => {
    await h.cleanup();
  });
  const post = (body: unknown, auth = `Bearer ${h.fake.apiKey}`) =>
    fetch(`${h.fake.url}/v2/pods`, {
      method: 'POST',
      headers: { Authorization: auth, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- problem documents of many shapes, read field by field
  const json = async (res: Response) => (await res.json()) as Record<string, any>;
  const base = () => ({
    name: 'wire',
    image: 'runpod/pytorch',
    gpu: { id: H100, count: 1 },
    ports: ['22/tcp'],
    env: { PUBLIC_KEY: keys.publicKey },
  });

  it('answers problem documents with RateLimit headers', async () => {
    const res = await post({ ...base(), bogus: 1 });
    assert.equal(res.status, 422);
    assert.equal(res.headers.get('content-type'), 'application/problem+json');
    assert.match(res.headers.get('ratelimit') ?? '', /^"minute";r=\d+;t=\d+$/);
    assert.match(res.headers.get('ratelimit-policy') ?? '', /^"minute";q=\d+;w=60$/);
    assert.deepEqual(await json(res), {
      title: 'Unprocessable Entity',
      status: 422,
      detail: 'Request validation failed.',
      errors: ["$: additional properties 'bogus' not allowed"],
    });
    const nested = await post({ ...base(), gpu: { id: H100, count: 1, type: 'x' } });
    assert.deepEqual((await json(nested)).errors, ["$.gpu: additional properties 'type' not allowed"]);
  });

  it('401 without a good bearer key, and no rate-limit headers then', async () => {
    const res = await post(base(), 'Bearer nope');
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('ratelimit'), null);
    assert.deepEqual(await json(res), { title: 'Unauthorized', status: 401, detail: 'invalid api key' });
    assert.equal((await fetch(`${h.fake.url}/v2/pods`)).status, 401);
  });

  it('a create without gpu.count fails with the false capacity message', async () => {
    const res = await post({ ...base(), gpu: { id: H100 } });
    assert.equal(res.status, 400);
    assert.equal((await json(res)).detail, NO_INSTANCES_DETAIL);
    assert.equal(h.fake.instances().length, 0);
  });

  it('a create answers 201 with a PROVISIONING pod that has no ssh.direct yet', async () => {
    const res = await post(base());
    assert.equal(res.status, 201);
    const pod = await json(res);
    assert.deepEqual(
      [pod.status, pod.ssh.direct, pod.gpu, pod.cloud, pod.name],
      ['PROVISIONING', null, { id: H100, count: 1 }, 'SECURE', 'wire'],
    );
    assert.equal(typeof pod.id, 'string');
  });

  it('405 with Allow on a known path; catalog parameters as documented', async () => {
    const res = await fetch(`${h.fake.url}/v2/pods`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${h.fake.apiKey}` },
    });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'GET, POST');
    const get = (q: string) =>
      fetch(`${h.fake.url}/v2/catalog/gpus${q}`, { headers: { Authorization: `Bearer ${h.fake.apiKey}` } });
    assert.equal((await get('?include=AVAILABILITY')).status, 400);
    assert.equal((await get('?count=2')).status, 400);
    const plain = await json(await get(''));
    assert.equal(plain.gpus[0].availability, undefined);
    const eight = await json(await get('?include=AVAILABILITY&product=POD&count=8'));
    assert.deepEqual(
      eight.gpus.map((g: { id: string; availability: string }) => [g.id, g.availability]),
      [
        [H100, 'HIGH'],
        ['NVIDIA GeForce RTX 4090', 'NONE'],
        ['NVIDIA A100 80GB PCIe', 'NONE'],
        ['NVIDIA B200', 'NONE'],
      ],
    );
  });
});
