import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { FakeRunpodApi, NO_INSTANCES_DETAIL } from '../fakes/runpod-api.js';
import { waitFor } from '../helpers/wait.js';

const fixtureText = (file: string) =>
  readFileSync(new URL(`../fixtures/providers/runpod/${file}`, import.meta.url), 'utf8');
const H100 = 'NVIDIA H100 80GB HBM3';
const RTX4090 = 'NVIDIA GeForce RTX 4090';
const PRODUCT_UA = 'gpu-rental/1.0.0';

/** A request exactly as given: `node:http` sends no User-Agent unless told to. */
function raw(url: string, headers: Record<string, string>): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The fake's recorded mode serves the live answers kept in test/fixtures/providers/runpod/, quirk by quirk. */
describe('FakeRunpodApi recorded mode', () => {
  let fake: FakeRunpodApi;
  const keys = generateDeploymentKeyPair('runpod-recorded');

  afterEach(async () => {
    await fake?.close();
  });

  async function call(method: string, path: string, body?: unknown, userAgent = PRODUCT_UA) {
    const res = await fetch(`${fake.url}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${fake.apiKey}`,
        'User-Agent': userAgent,
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return {
      status: res.status,
      type: res.headers.get('content-type') ?? '',
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- wire bodies of many shapes, read field by field
      json: (res.status === 204 ? null : await res.json()) as any,
    };
  }

  const podBody = (extra: Record<string, unknown> = {}, gpu: Record<string, unknown> = {}) => ({
    name: `rec-${Math.random().toString(36).slice(2, 8)}`,
    image: 'runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04',
    gpu: { id: H100, count: 1, ...gpu },
    ports: ['22/tcp'],
    env: { PUBLIC_KEY: keys.publicKey },
    ...extra,
  });

  it("refuses a runtime's default User-Agent at the edge with Cloudflare's 1010 body, before authentication", async () => {
    fake = await FakeRunpodApi.start({ behaviour: 'recorded' });
    const body = fixtureText('edge-403-cloudflare-1010.txt');
    const auth = { Authorization: `Bearer ${fake.apiKey}` };
    for (const ua of [undefined, 'node', 'undici', 'python-requests/2.32.3', 'curl/8.5.0']) {
      const r = await raw(`${fake.url}/v2/catalog/gpus`, ua === undefined ? auth : { ...auth, 'User-Agent': ua });
      assert.deepEqual([r.status, r.body], [403, body], String(ua));
      assert.match(r.type, /^text\/plain/);
    }
    // Node's fetch sends `node` when the caller sets no User-Agent.
    const viaFetch = await fetch(`${fake.url}/v2/pods`, { headers: auth });
    assert.deepEqual([viaFetch.status, await viaFetch.text()], [403, body]);
    // The edge does not look at the key: a wrong one still meets the 1010 first.
    assert.equal((await raw(`${fake.url}/v2/pods`, { Authorization: 'Bearer nope' })).status, 403);
    assert.equal(
      (await raw(`${fake.url}/v2/pods`, { Authorization: 'Bearer nope', 'User-Agent': PRODUCT_UA })).status,
      401,
    );
    assert.equal((await call('GET', '/v2/catalog/gpus')).status, 200);
    // Documented mode lets any User-Agent through.
    await fake.close();
    fake = await FakeRunpodApi.start();
    assert.equal(
      (await fetch(`${fake.url}/v2/pods`, { headers: { Authorization: `Bearer ${fake.apiKey}` } })).status,
      200,
    );
  });

  it('pages GET /v2/pods with pagination.nextCursor, so the third pod is on page 2', async () => {
    fake = await FakeRunpodApi.start({ behaviour: 'recorded', bootMs: 20 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await call('POST', '/v2/pods', podBody())).json.id);
    const first = await call('GET', '/v2/pods');
    assert.deepEqual(
      first.json.pods.map((p: { id: string }) => p.id),
      ids.slice(0, 2),
    );
    assert.equal(typeof first.json.pagination.nextCursor, 'string');
    // A delete between pages moves nothing past the cursor.
    assert.equal((await call('DELETE', `/v2/pods/${ids[0]}`)).status, 204);
    const second = await call('GET', `/v2/pods?cursor=${encodeURIComponent(first.json.pagination.nextCursor)}`);
    assert.deepEqual(
      second.json.pods.map((p: { id: string }) => p.id),
      [ids[2]],
    );
    assert.equal(second.json.pagination.nextCursor, null);
    const one = await call('GET', '/v2/pods?limit=1');
    assert.deepEqual([one.json.pods.length, typeof one.json.pagination.nextCursor], [1, 'string']);
    assert.equal((await call('GET', '/v2/pods?cursor=garbage')).status, 400);
    // Documented mode: one page, no pagination object.
    fake.setQuirk('cursorPaging', false);
    const all = await call('GET', '/v2/pods');
    assert.deepEqual([all.json.pods.length, all.json.pagination], [2, undefined]);
  });

  it('answers a bad image tag with a 400 of its own, apart from the capacity 400', async () => {
    fake = await FakeRunpodApi.start({ behaviour: 'recorded', bootMs: 20 });
    fake.missingImage('runpod/pytorch:9.9.9-no-such-tag');
    const missing = await call('POST', '/v2/pods', podBody({ image: 'runpod/pytorch:9.9.9-no-such-tag' }));
    assert.equal(missing.status, 400);
    assert.match(missing.type, /application\/problem\+json/);
    assert.match(missing.json.detail, /runpod\/pytorch:9\.9\.9-no-such-tag/);
    assert.doesNotMatch(missing.json.detail, /no longer any instances available/);
    const malformed = await call('POST', '/v2/pods', podBody({ image: 'RunPod/PyTorch:latest' }));
    assert.deepEqual([malformed.status, malformed.json.title], [400, missing.json.title]);
    fake.noCapacity(H100);
    const full = await call('POST', '/v2/pods', podBody());
    assert.deepEqual([full.status, full.json.detail], [400, NO_INSTANCES_DETAIL]);
    assert.notEqual(full.json.title, missing.json.title);
  });

  it('never publishes ssh.direct for a GeForce pod whose image needs a newer CUDA, unless allowedCudaVersions places it', async () => {
    fake = await FakeRunpodApi.start({ behaviour: 'recorded', bootMs: 40, directSshDelayMs: 20 });
    const image = 'runpod/pytorch:2.8.0-py3.11-cuda12.8.1-cudnn-devel-ubuntu22.04';
    const stuck = (await call('POST', '/v2/pods', podBody({ image }, { id: RTX4090 }))).json.id;
    const pinned = (await call('POST', '/v2/pods', podBody({ image }, { id: RTX4090, allowedCudaVersions: ['12.8'] })))
      .json.id;
    const floor = (await call('POST', '/v2/pods', podBody({ image }, { id: RTX4090, minCudaVersion: '12.8' }))).json.id;
    const datacenter = (await call('POST', '/v2/pods', podBody({ image }))).json.id;
    const pod = async (id: string) => (await call('GET', `/v2/pods/${id}`)).json;
    // The stuck pod was created first, with the same boot: once the later ones have their endpoint, it would have had its own.
    await waitFor(
      async () => {
        for (const id of [pinned, floor, datacenter]) if (!(await pod(id)).ssh?.direct) return false;
        return true;
      },
      { timeoutMs: 10_000, what: 'the placed pods to publish ssh.direct' },
    );
    const s = await pod(stuck);
    assert.deepEqual([s.status, s.cudaVersion, s.ssh?.direct ?? null], ['RUNNING', '12.2', null]);
    for (const id of [pinned, floor]) {
      const p = await pod(id);
      assert.equal(p.cudaVersion, '12.8');
      assert.equal(p.ssh.direct.port > 0, true);
    }
    assert.ok((await pod(datacenter)).ssh.direct, 'data-center cards run newer CUDA images on older drivers');
    // Documented: exact matching, a version no host has is the capacity error, and the two fields exclude each other.
    const none = await call('POST', '/v2/pods', podBody({}, { allowedCudaVersions: ['11.8'] }));
    assert.deepEqual([none.status, none.json.detail], [400, NO_INSTANCES_DETAIL]);
    assert.equal(
      (await call('POST', '/v2/pods', podBody({}, { allowedCudaVersions: ['12.8'], minCudaVersion: '12.4' }))).status,
      400,
    );
  });

  it('accepts CUDA constraints in documented mode too, and checks their form', async () => {
    fake = await FakeRunpodApi.start({ bootMs: 20, directSshDelayMs: 10 });
    const ok = await call(
      'POST',
      '/v2/pods',
      podBody(
        { image: 'runpod/pytorch:2.8.0-py3.11-cuda12.8.1' },
        { id: RTX4090, allowedCudaVersions: ['12.8', '12.4'] },
      ),
    );
    assert.equal(ok.status, 201);
    // Placed at create, as the recorded 201 shows: on the oldest host the constraint allows.
    assert.deepEqual([ok.json.status, ok.json.cudaVersion], ['PROVISIONING', '12.4']);
    const bad = await call('POST', '/v2/pods', podBody({}, { allowedCudaVersions: ['12'] }));
    assert.equal(bad.status, 422);
    assert.deepEqual(bad.json.errors, ['$.gpu.allowedCudaVersions: expected array of "major.minor" strings']);
    // Without the quirk an unconstrained GeForce pod starts whatever its image.
    const plain = (
      await call('POST', '/v2/pods', podBody({ image: 'runpod/pytorch:2.8.0-py3.11-cuda12.8.1' }, { id: RTX4090 }))
    ).json.id;
    assert.ok(
      await waitFor(async () => (await call('GET', `/v2/pods/${plain}`)).json.ssh?.direct, {
        timeoutMs: 10_000,
        what: 'the unconstrained pod to publish ssh.direct',
      }),
    );
    const catalog = (await call('GET', '/v2/catalog/gpus?include=AVAILABILITY&product=POD')).json.gpus as {
      id: string;
      cudaVersions: { version: string; available: boolean }[];
    }[];
    assert.deepEqual(
      catalog.find((g) => g.id === RTX4090)?.cudaVersions.map((c) => c.version),
      ['12.2', '12.4', '12.8'],
    );
  });

  it("leaves `ssh` out of a pod until its direct endpoint exists, as the earlier document's examples do", async () => {
    fake = await FakeRunpodApi.start({ behaviour: 'recorded', bootMs: 40, directSshDelayMs: 20 });
    const example = JSON.parse(fixtureText('create-pod-201-v2-document-example-2026-08.json')) as Record<
      string,
      unknown
    >;
    const created = await call('POST', '/v2/pods', podBody());
    assert.equal(created.status, 201);
    for (const k of Object.keys(example)) assert.ok(k in created.json, `${k} in the create answer`);
    assert.equal('ssh' in created.json, false);
    assert.deepEqual([created.json.status, created.json.runtime], [example.status, example.runtime]);
    const running = await waitFor(
      async () => {
        const p = (await call('GET', `/v2/pods/${created.json.id}`)).json;
        return p.ssh ? p : false;
      },
      { timeoutMs: 10_000, what: 'the pod to gain ssh' },
    );
    assert.equal(running.status, 'RUNNING');
    assert.ok(running.ssh.direct.port > 0);
  });
});
