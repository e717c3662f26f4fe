import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CreatePodBody } from '../../plugins/runpod/client.js';
import { PRODUCT_USER_AGENT } from '../../src/providers/kit/user-agent.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import type { Provider } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec } from '../../src/providers/ssh-probe.js';
import type { FakePodStatus } from '../fakes/runpod-api.js';
import { cloudflare1010Body } from '../fakes/runpod-recorded.js';
import { waitFor } from '../helpers/wait.js';
import { H100, makeRunpodHarness, type RunpodHarness } from './runpod-harness.js';
import { waitForRunning } from './provider-contract.js';

const RTX4090 = 'NVIDIA GeForce RTX 4090';
const keys = generateDeploymentKeyPair('runpod-live');

/** The create bodies the fake received, newest last. */
const creates = (h: RunpodHarness) =>
  h.fake.calls.filter((c) => c.method === 'POST' && c.path === '/v2/pods').map((c) => c.body as CreatePodBody);

/** The plugin against the fake answering as the live RunPod API was recorded (every quirk on). */
describe('RunPod plugin against recorded live behaviour', function () {
  this.timeout(20_000);
  let h: RunpodHarness;
  afterEach(async () => {
    await h?.cleanup();
  });

  describe('the edge in front of the API', () => {
    it('passes the User-Agent gate on every call: catalog, create, list, get, destroy', async () => {
      h = await makeRunpodHarness({ fake: { behaviour: 'recorded' } });
      // The gate is up: a runtime's default User-Agent meets Cloudflare's 1010.
      const blocked = await fetch(`${h.fake.url}/v2/pods`, { headers: { Authorization: `Bearer ${h.fake.apiKey}` } });
      assert.deepEqual([blocked.status, await blocked.text()], [403, cloudflare1010Body()]);
      h.fake.calls.length = 0;

      const offers = await h.provider.listOffers();
      assert.ok(
        offers.some((o) => o.name === H100),
        'the catalog was read',
      );
      const label = h.label();
      const res = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.equal(res.kind, 'created', JSON.stringify(res));
      const id = (res as { instanceId: string }).instanceId;
      const info = await waitForRunning(h.provider, id);
      assert.equal((await sshExec({ ...info.ssh, privateKey: keys.privateKey }, 'echo in')).stdout, 'in\n');
      assert.equal((await h.provider.findByLabel(label))?.instanceId, id);
      assert.deepEqual(
        (await h.provider.listInstances()).map((i) => i.instanceId),
        [id],
      );
      await h.provider.destroy(id);
      assert.equal((await h.provider.get(id)).state, 'gone');

      const seen = new Set(h.fake.calls.map((c) => `${c.method} ${c.path.replace(id, '{id}')}`));
      for (const call of [
        'GET /v2/catalog/gpus',
        'POST /v2/pods',
        'GET /v2/pods',
        'GET /v2/pods/{id}',
        'DELETE /v2/pods/{id}',
      ])
        assert.ok(seen.has(call), `${call} was made`);
      assert.deepEqual([...new Set(h.fake.calls.map((c) => c.userAgent))], [PRODUCT_USER_AGENT]);
      assert.match(PRODUCT_USER_AGENT, /^gpu-rental\/\d+\.\d+\.\d+/);
    });

    /** An edge that refuses everything, as RunPod's would if it ever refused our User-Agent too. */
    async function edge(page: { type: string; body: string }): Promise<{ url: string; close(): Promise<void> }> {
      const server: Server = createServer((req, res) => {
        req.resume();
        res.writeHead(403, { 'Content-Type': page.type, Server: 'cloudflare' }).end(page.body);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => new Promise((r) => server.close(() => r())),
      };
    }

    const pages = [
      { name: "Cloudflare's 1010 text (recorded)", type: 'text/plain; charset=UTF-8', body: cloudflare1010Body() },
      {
        name: 'an HTML block page',
        type: 'text/html; charset=UTF-8',
        body:
          '<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title></head><body>' +
          'x'.repeat(5000) +
          '</body></html>',
      },
    ];
    for (const page of pages) {
      it(`reads a 403 edge page as a refused request, not a bad key: ${page.name}`, async () => {
        h = await makeRunpodHarness();
        const gate = await edge(page);
        try {
          const p = await h.newProvider({}, { API_URL: gate.url });
          const notTheKey = (e: unknown) =>
            e instanceof ProviderApiError &&
            e.errorClass === 'request' &&
            /edge/.test(e.message) &&
            /User-Agent/.test(e.message) &&
            !/RUNPOD_PROVIDER_API_KEY/.test(e.message);
          await assert.rejects(p.listOffers(), notTheKey);
          await assert.rejects(p.listInstances(), notTheKey);
          await assert.rejects(p.get('somepod'), notTheKey);
          await assert.rejects(p.destroy('somepod'), notTheKey);
          h.logs.length = 0;
          const res = await p.create(h.label(), h.offer(), keys.publicKey);
          assert.equal(res.kind, 'rejected', JSON.stringify(res));
          assert.equal(res.kind === 'rejected' && res.errorClass, 'request');
          assert.match((res as { reason: string }).reason, /User-Agent/);
          assert.doesNotMatch((res as { reason: string }).reason, /RUNPOD_PROVIDER_API_KEY|<html/i);
          const errors = h.logs.filter((l) => l.level === 'error');
          assert.equal(errors.length, 1, JSON.stringify(h.logs));
          assert.match(String(errors[0].reason), /User-Agent/);
        } finally {
          await gate.close();
        }
      });
    }
  });

  describe('lists that page', () => {
    it('finds, lists and adopts a pod on the second page; an unanswered create is never repeated', async () => {
      h = await makeRunpodHarness({ fake: { behaviour: 'recorded' }, hooks: { createTimeoutMs: 400 } });
      assert.equal(h.fake.quirks.cursorPaging, true, 'two pods a page');
      const first = [h.label(), h.label()];
      for (const l of first) assert.equal((await h.provider.create(l, h.offer(), keys.publicKey)).kind, 'created');

      // The create is carried out but its answer never comes: the pod is the third, on page 2.
      const label = h.label();
      h.fake.hangCreatesAfterCreating(true);
      const lost = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.equal(lost.kind, 'ambiguous', JSON.stringify(lost));
      h.fake.hangCreatesAfterCreating(false);
      const page1 = (await (
        await fetch(`${h.fake.url}/v2/pods`, {
          headers: { Authorization: `Bearer ${h.fake.apiKey}`, 'User-Agent': PRODUCT_USER_AGENT },
        })
      ).json()) as {
        pods: { name: string }[];
        pagination: { nextCursor: string | null };
      };
      assert.ok(!page1.pods.some((p) => p.name === label) && page1.pagination.nextCursor, 'the pod is past page 1');

      const found = await h.provider.findByLabel(label);
      assert.ok(found, 'found on page 2');
      assert.equal((await h.provider.listInstances()).length, 3);
      const posts = creates(h).length;
      const again = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.deepEqual(again, { kind: 'created', instanceId: found.instanceId });
      assert.equal(creates(h).length, posts, 'no second create was sent');
      assert.equal(h.fake.instances().filter((p) => p.name === label).length, 1);
      assert.ok(h.fake.calls.some((c) => c.method === 'GET' && c.path === '/v2/pods' && c.query.includes('cursor=')));
    });
  });

  describe('CUDA on the host', () => {
    it("a GeForce pod gets ssh.direct because the create carries the image's CUDA floor", async () => {
      h = await makeRunpodHarness({ fake: { behaviour: 'recorded' } });
      const res = await h.provider.create(h.label(), h.offer(RTX4090), keys.publicKey);
      assert.equal(res.kind, 'created', JSON.stringify(res));
      assert.deepEqual(creates(h).at(-1)!.gpu, { id: RTX4090, count: 1, minCudaVersion: '12.4' });
      const info = await waitForRunning(h.provider, (res as { instanceId: string }).instanceId);
      const smi = await sshExec({ ...info.ssh, privateKey: keys.privateKey }, 'nvidia-smi');
      assert.match(smi.stdout, /4090/);
    });

    it('without a constraint the same GeForce pod runs but never gets an SSH endpoint (the failure the floor prevents)', async () => {
      h = await makeRunpodHarness({ fake: { behaviour: 'recorded' }, raw: { CUDA_VERSIONS: 'any' } });
      const res = await h.provider.create(h.label(), h.offer(RTX4090), keys.publicKey);
      const id = (res as { instanceId: string }).instanceId;
      assert.deepEqual(creates(h).at(-1)!.gpu, { id: RTX4090, count: 1 });
      await waitFor(async () => (await h.provider.get(id)).state === 'running', { timeoutMs: 5000, what: 'RUNNING' });
      // A pod the fake places on a new enough host, created after it with the same boot: once it has its
      // endpoint, the unconstrained one would have had its own.
      const placed = await fetch(`${h.fake.url}/v2/pods`, {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${h.fake.apiKey}`,
          'Content-Type': 'application/json',
          'User-Agent': PRODUCT_USER_AGENT,
        },
        body: JSON.stringify({
          ...creates(h).at(-1)!,
          name: `${h.label()}-placed`,
          gpu: { id: RTX4090, count: 1, minCudaVersion: '12.8' },
        }),
      });
      assert.equal(placed.status, 201);
      const placedId = ((await placed.json()) as { id: string }).id;
      await waitFor(async () => (await h.provider.get(placedId)).ssh, {
        timeoutMs: 5000,
        what: 'the placed pod to get ssh.direct',
      });
      assert.equal((await h.provider.get(id)).ssh, undefined);
    });

    it('an explicit set is sent as allowedCudaVersions', async () => {
      h = await makeRunpodHarness({ fake: { behaviour: 'recorded' }, raw: { CUDA_VERSIONS: '12.8' } });
      const res = await h.provider.create(h.label(), h.offer(RTX4090), keys.publicKey);
      assert.equal(res.kind, 'created');
      assert.deepEqual(creates(h).at(-1)!.gpu, { id: RTX4090, count: 1, allowedCudaVersions: ['12.8'] });
      await waitForRunning(h.provider, (res as { instanceId: string }).instanceId);
    });
  });

  describe('400s', () => {
    it('a refused image is rejected naming RUNPOD_PROVIDER_IMAGE; the capacity 400 stays unavailable', async () => {
      const image = 'runpod/pytorch:9.9.9-no-such-tag';
      h = await makeRunpodHarness({ fake: { behaviour: 'recorded' }, raw: { IMAGE: image } });
      h.fake.missingImage(image);
      const res = await h.provider.create(h.label(), h.offer(), keys.publicKey);
      assert.equal(res.kind, 'rejected', JSON.stringify(res));
      assert.equal(res.kind === 'rejected' && res.errorClass, 'request');
      assert.match((res as { reason: string }).reason, /^RUNPOD_PROVIDER_IMAGE: .*no-such-tag/);
      assert.equal(h.fake.instances().length, 0);
      assert.equal(
        h.logs.filter((l) => l.level === 'error' && /RUNPOD_PROVIDER_IMAGE/.test(String(l.reason))).length,
        1,
      );

      const malformed = await h.newProvider({}, { IMAGE: 'RunPod/PyTorch:latest' });
      const bad = await malformed.create(h.label(), h.offer(), keys.publicKey);
      assert.equal(bad.kind, 'rejected');
      assert.match((bad as { reason: string }).reason, /^RUNPOD_PROVIDER_IMAGE: /);

      const good = await h.newProvider({}, { IMAGE: 'runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04' });
      h.fake.noCapacity(H100);
      const full = await good.create(h.label(), h.offer(), keys.publicKey);
      assert.equal(full.kind, 'unavailable', JSON.stringify(full));
      assert.match((full as { reason: string }).reason, /no capacity/);
    });
  });

  describe('states', () => {
    it('a pod without an `ssh` object and with runtime {} reads as pending, then runs with its endpoint', async () => {
      h = await makeRunpodHarness({ fake: { behaviour: 'recorded', bootMs: 400, directSshDelayMs: 200 } });
      const res = await h.provider.create(h.label(), h.offer(), keys.publicKey);
      const id = (res as { instanceId: string }).instanceId;
      const raw = (await (
        await fetch(`${h.fake.url}/v2/pods/${id}`, {
          headers: { Authorization: `Bearer ${h.fake.apiKey}`, 'User-Agent': PRODUCT_USER_AGENT },
        })
      ).json()) as Record<string, unknown>;
      assert.deepEqual(['ssh' in raw, raw.runtime, raw.status], [false, {}, 'PROVISIONING']);
      const info = await h.provider.get(id);
      assert.deepEqual([info.state, info.ssh], ['pending', undefined]);
      const running = await waitForRunning(h.provider, id);
      assert.ok(running.ssh.port > 0);
    });

    it('a status the table does not know is pending, logged once with its raw value, and failed after its own bound', async () => {
      h = await makeRunpodHarness({ fake: { behaviour: 'recorded' }, hooks: { unknownStateBoundMs: 500 } });
      const p: Provider = h.provider;
      const res = await p.create(h.label(), h.offer(), keys.publicKey);
      const id = (res as { instanceId: string }).instanceId;
      h.fake.setStatus(id, 'HIBERNATING' as FakePodStatus);
      assert.deepEqual([(await p.get(id)).state, (await p.get(id)).providerState], ['pending', 'HIBERNATING']);
      const told = () => h.logs.filter((l) => l.rawState === 'HIBERNATING' && l.instanceId === id);
      assert.equal(told().length, 1);
      const failed = await waitFor(async () => (await p.get(id)).state === 'failed', {
        timeoutMs: 5000,
        what: 'the unknown status to time out',
      });
      assert.ok(failed);
      assert.equal(told().length, 1, 'logged once');
      // A known status again clears the clock.
      h.fake.setStatus(id, undefined);
      assert.equal((await waitForRunning(p, id)).state, 'running');
      // Its first stretch outlived the bound, so only a cleared clock reads pending now (once the
      // shared pod list has been read again).
      h.fake.setStatus(id, 'HIBERNATING' as FakePodStatus);
      const again = await waitFor(
        async () => {
          const state = (await p.get(id)).state;
          return state === 'running' ? false : state;
        },
        { timeoutMs: 5000, what: 'the unknown status to be read again' },
      );
      assert.equal(again, 'pending');
    });
  });
});
