import assert from 'node:assert/strict';
import runpodPlugin from '../../plugins/runpod/index.js';
import { RUNPOD_DEFAULTS } from '../../plugins/runpod/options.js';
import { offerKey } from '../../plugins/runpod/offers.js';
import { RunpodProvider } from '../../plugins/runpod/provider.js';
import { POD_STATES } from '../../plugins/runpod/states.js';
import { usdToCentsCeil } from '../../src/providers/pricing.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, sshProbe } from '../../src/providers/ssh-probe.js';
import { FAKE_RUNPOD_GPUS, type FakePodStatus } from '../fakes/runpod-api.js';
import { H100, makeRunpodHarness, type RunpodHarness } from './runpod-harness.js';
import { runProviderContract, waitForRunning } from './provider-contract.js';
import { waitFor } from '../helpers/wait.js';

runProviderContract('runpod', async () => {
  const h = await makeRunpodHarness();
  return {
    provider: h.provider,
    labelPrefix: h.labelPrefix,
    offer: h.offer(H100, 1),
    runningTimeoutMs: 5000,
    unknownInstanceId: 'zz9unknownpod',
    cleanup: h.cleanup,
  };
});

describe(RunpodProvider.name, () => {
  let h: RunpodHarness;
  const keys = generateDeploymentKeyPair('runpod-test');

  async function createPod(label = h.label(), gpu = H100, count = 1): Promise<{ label: string; id: string }> {
    const res = await h.provider.create(label, h.offer(gpu, count), keys.publicKey);
    assert.equal(res.kind, 'created', JSON.stringify(res));
    return { label, id: (res as { instanceId: string }).instanceId };
  }

  beforeEach(async () => {
    h = await makeRunpodHarness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  describe('offers', () => {
    it('offers each GPU per count 1/2/4/8 within maxCount and stock, priced price x count rounded up, skipping NONE', async () => {
      const offers = await h.provider.listOffers();
      const got = offers.map((o) => [o.key, o.name, o.gpuCount, o.vramGb, o.pricePerHourMinor]).sort();
      const want: unknown[][] = [];
      // A100 has stock for 4 on one machine, so 8 reads NONE; B200 reads NONE at every count.
      const counts: Record<string, number[]> = {
        [H100]: [1, 2, 4, 8],
        'NVIDIA GeForce RTX 4090': [1, 2, 4],
        'NVIDIA A100 80GB PCIe': [1, 2, 4],
      };
      for (const g of FAKE_RUNPOD_GPUS) {
        for (const n of counts[g.id] ?? [])
          want.push([offerKey(g.id, n), g.name, n, g.memory, usdToCentsCeil(g.price.secure * n)]);
      }
      assert.deepEqual(got, want.sort());
      const h1 = offers.find((o) => o.key === offerKey(H100, 8))!;
      assert.equal(h1.pricePerHourMinor, 1912);
      assert.equal(offers.find((o) => o.key === offerKey('NVIDIA GeForce RTX 4090', 1))?.pricePerHourMinor, 69);
      assert.equal(offers.find((o) => o.key === offerKey('NVIDIA A100 80GB PCIe', 4))?.pricePerHourMinor, 656);
      assert.deepEqual(
        [h1.category, h1.maximumDurationSeconds, h1.storageGb, h1.cpuCores, h1.memoryGb],
        ['datacenter', RUNPOD_DEFAULTS.maxDurationSeconds, 50, null, null],
      );
      assert.equal(offers.find((o) => o.gpuCount === 1 && o.name.includes('4090'))?.category, 'consumer');

      const reads = h.fake.calls.filter((c) => c.path === '/v2/catalog/gpus').map((c) => new URLSearchParams(c.query));
      assert.deepEqual(
        reads.map((q) => [q.get('include'), q.get('product'), q.get('cloud'), q.get('count')]),
        ['1', '2', '4', '8'].map((n) => ['AVAILABILITY', 'POD', 'SECURE', n]),
      );
    });

    it('reads the community cloud when configured, with its prices, ceilings and duration', async () => {
      const p = await h.newProvider({}, { CLOUD: 'community', MAX_DURATION_SECONDS: '86400' });
      const offers = await p.listOffers();
      assert.ok(!offers.some((o) => o.name === H100), 'H100 is not in the community cloud');
      assert.deepEqual(
        offers.filter((o) => o.name.includes('4090')).map((o) => [o.gpuCount, o.pricePerHourMinor]),
        [1, 2, 4, 8].map((n) => [n, usdToCentsCeil(0.34 * n)]),
      );
      assert.ok(offers.every((o) => o.maximumDurationSeconds === 86400));
    });

    it('drops a GPU the catalog reports without stock, and fails loudly when the catalog fails', async () => {
      h.fake.setGpus(FAKE_RUNPOD_GPUS.map((g) => (g.id === H100 ? { ...g, availability: 'NONE' } : g)));
      assert.ok(!(await h.provider.listOffers()).some((o) => o.name === H100));
      assert.ok((await h.provider.listOffers()).some((o) => o.name.includes('4090')));
      h.fake.failNext('offers', '5xx');
      await assert.rejects(
        h.provider.listOffers(),
        (e: ProviderApiError) => e.errorClass === 'unavailable' && e.status === 503,
      );
    });
  });

  describe('create', () => {
    it('sends the documented body: name = label, gpu with count, 22/tcp and the key in env.PUBLIC_KEY', async () => {
      const { label, id } = await createPod(undefined, 'NVIDIA A100 80GB PCIe', 2);
      const post = h.fake.calls.find((c) => c.method === 'POST' && c.path === '/v2/pods');
      assert.deepEqual(post?.body, {
        name: label,
        image: RUNPOD_DEFAULTS.image,
        // The default image is built for CUDA 12.4: hosts with an older driver are excluded.
        gpu: { id: 'NVIDIA A100 80GB PCIe', count: 2, minCudaVersion: '12.4' },
        cloud: 'SECURE',
        disk: 50,
        ports: ['22/tcp'],
        env: { PUBLIC_KEY: keys.publicKey.trim() },
      });
      assert.deepEqual(
        h.fake.instances().map((i) => [i.id, i.name]),
        [[id, label]],
      );
    });

    it('racing creates for one label make one pod', async () => {
      const label = h.label();
      const [a, b] = await Promise.all([
        h.provider.create(label, h.offer(), keys.publicKey),
        h.provider.create(label, h.offer(), keys.publicKey),
      ]);
      assert.equal(a.kind, 'created');
      assert.deepEqual(b, a);
      assert.equal(h.fake.instances().length, 1);
      assert.equal(h.fake.calls.filter((c) => c.method === 'POST').length, 1);
    });

    it('a create that made the pod but never answered is ambiguous, and findByLabel then finds it', async () => {
      const p = await h.newProvider({ createTimeoutMs: 300 });
      h.fake.hangCreatesAfterCreating(true);
      const label = h.label();
      const res = await p.create(label, h.offer(), keys.publicKey);
      assert.equal(res.kind, 'ambiguous');
      assert.match((res as { reason: string }).reason, /no answer within 300 ms/);
      const found = await waitFor(async () => (await p.findByLabel(label)) ?? undefined, {
        timeoutMs: 5000,
        what: 'the pod of the unanswered create',
      });
      assert.equal(found.instanceId, h.fake.instances()[0].id);
      h.fake.hangCreatesAfterCreating(false);
      // Asked again with the same label, the plugin returns that pod instead of making another.
      assert.deepEqual(await p.create(label, h.offer(), keys.publicKey), {
        kind: 'created',
        instanceId: found.instanceId,
      });
      assert.equal(h.fake.instances().length, 1);
    });
  });

  describe('states', () => {
    const cases: [FakePodStatus, string][] = [
      ['EXITED', 'stopped'],
      ['ERROR', 'failed'],
      ['TERMINATED', 'gone'],
      ['PROVISIONING', 'pending'],
      ['STARTING', 'pending'],
    ];
    for (const [status, ours] of cases) {
      it(`maps ${status} to ${ours} without an SSH endpoint`, async () => {
        const { id } = await createPod();
        h.fake.setStatus(id, status);
        const info = await h.provider.get(id);
        assert.deepEqual([info.state, info.providerState, info.ssh], [ours, status, undefined]);
        assert.equal(POD_STATES[status], ours);
      });
    }

    it('walks PROVISIONING -> STARTING -> RUNNING, and reports SSH only once ssh.direct exists', async () => {
      h.fake.setBootMs(400, 60_000);
      const { id, label } = await createPod();
      const seen = new Set<string>();
      const running = await waitFor(
        async () => {
          const info = await h.provider.get(id);
          seen.add(info.providerState!);
          return info.providerState === 'RUNNING' ? info : undefined;
        },
        { timeoutMs: 5000, what: 'RUNNING' },
      );
      assert.ok(seen.has('PROVISIONING') || seen.has('STARTING'));
      // RUNNING before the port mapping: running, but no endpoint, so not ready.
      assert.deepEqual([running.state, running.ssh, running.label], ['running', undefined, label]);
      assert.equal((await h.provider.findByLabel(label))?.ssh, undefined);

      h.fake.setStatus(id, undefined);
      h.fake.setBootMs(0, 0);
      const fresh = await createPod();
      const ready = await waitForRunning(h.provider, fresh.id);
      const port = h.fake.instances().find((i) => i.id === fresh.id)!.sshPort;
      assert.deepEqual(ready.ssh, { host: '127.0.0.1', port, user: 'root' });
      assert.equal(
        (await sshExec({ ...ready.ssh, privateKey: keys.privateKey }, 'nvidia-smi -L')).stdout.match(/H100/g)?.length,
        1,
      );
    });

    it('only the deployment key gets into the pod', async () => {
      h.fake.setBootMs(0, 0);
      const { id } = await createPod(undefined, H100, 2);
      const info = await waitForRunning(h.provider, id);
      const stranger = generateDeploymentKeyPair('stranger');
      assert.deepEqual(await sshProbe({ ...info.ssh, privateKey: keys.privateKey }), { ok: true });
      assert.equal((await sshProbe({ ...info.ssh, privateKey: stranger.privateKey })).ok, false);
    });

    it('a pod the API forgot is gone while its SSH still answers (the host verifies both)', async () => {
      h.fake.setBootMs(0, 0);
      const { id, label } = await createPod();
      const info = await waitForRunning(h.provider, id);
      h.fake.forget(id);
      // Polls share one list for a moment, so "gone" shows within that moment, not at once.
      await waitFor(async () => ((await h.provider.get(id)).state === 'gone' ? true : undefined), {
        timeoutMs: 5000,
        what: 'the forgotten pod to read gone',
      });
      assert.equal(await h.provider.findByLabel(label), null);
      assert.equal(
        (await sshExec({ ...info.ssh, privateKey: keys.privateKey }, 'echo still-here')).stdout,
        'still-here\n',
      );
      await h.provider.destroy(id);
    });
  });

  describe('polling and lists', () => {
    it('many concurrent gets make one list call', async () => {
      const pods: { label: string; id: string }[] = [];
      for (let i = 0; i < 5; i++) pods.push(await createPod());
      const p = await h.newProvider({ pollTtlMs: 60_000 });
      const before = h.fake.calls.length;
      const infos = await Promise.all(Array.from({ length: 40 }, (_, i) => p.get(pods[i % 5].id)));
      assert.deepEqual(
        infos.map((i) => i.instanceId),
        Array.from({ length: 40 }, (_, i) => pods[i % 5].id),
      );
      await Promise.all(pods.map((x) => p.get(x.id)));
      const made = h.fake.calls.slice(before);
      assert.deepEqual(made, [made[0]]);
      assert.deepEqual([made[0].method, made[0].path], ['GET', '/v2/pods']);
    });

    it('a pod missing from the shared list is read by id: 404 is gone', async () => {
      const before = h.fake.calls.length;
      assert.equal((await h.provider.get('nosuchpod1234')).state, 'gone');
      assert.deepEqual(
        h.fake.calls.slice(before).map((c) => `${c.method} ${c.path}`),
        ['GET /v2/pods', 'GET /v2/pods/nosuchpod1234'],
      );
    });

    it('lists only pods under our label prefix', async () => {
      const mine = await createPod();
      const foreign = await createPod(`other-${h.labelPrefix}x`);
      const ids = (await h.provider.listInstances()).map((i) => i.instanceId);
      assert.deepEqual(ids, [mine.id]);
      assert.ok(h.fake.instances().some((i) => i.id === foreign.id));
    });

    for (const kind of ['5xx', 'drop', '429'] as const) {
      it(`a list that fails (${kind}) is an error, never "no instances"`, async () => {
        await createPod();
        h.fake.failNext('list', kind);
        await assert.rejects(h.provider.listInstances(), ProviderApiError);
        h.fake.failNext('list', kind);
        await assert.rejects(h.provider.findByLabel(h.label()), ProviderApiError);
        assert.equal((await h.provider.listInstances()).length, 1);
      });
    }

    it('a hung read times out as an error', async () => {
      const p = await h.newProvider({ timeoutMs: 300 });
      h.fake.failNext('list', 'hang');
      await assert.rejects(p.listInstances(), (e: ProviderApiError) => e.errorClass === 'timeout');
    });
  });

  describe('rate limits', () => {
    it('a 429 with Retry-After holds the next call to that endpoint for that long', async () => {
      let t = 1_000_000;
      const sleeps: number[] = [];
      const p = await h.newProvider({ now: () => t, sleep: async (ms) => void (sleeps.push(ms), (t += ms)) });
      const { id } = await createPod();
      h.fake.rateLimitAll(true, 7);
      await assert.rejects(
        p.get(id),
        (e: ProviderApiError) => e.errorClass === 'rate_limited' && e.retryAfterMs === 7000,
      );
      h.fake.rateLimitAll(false);
      const lists = () => h.fake.calls.filter((c) => c.path === '/v2/pods' && c.method === 'GET').length;
      const before = lists();
      assert.equal((await p.get(id)).instanceId, id);
      assert.deepEqual(sleeps, [7000]);
      assert.equal(lists(), before + 1);
    });

    it('a throttled create says how long to wait, and creates nothing', async () => {
      h.fake.failNext('create', '429');
      const res = await h.provider.create(h.label(), h.offer(), keys.publicKey);
      assert.deepEqual([res.kind, (res as { retryAfterMs: number }).retryAfterMs], ['throttled', 1000]);
      assert.equal(h.fake.instances().length, 0);
    });

    it('the documented per-minute quota runs out into 429s the plugin reports', async () => {
      const small = await makeRunpodHarness({ fake: { quotaPerMinute: 2 } });
      try {
        await small.provider.listInstances();
        await small.provider.listInstances();
        await assert.rejects(
          small.provider.listInstances(),
          (e: ProviderApiError) => e.errorClass === 'rate_limited' && (e.retryAfterMs ?? 0) > 0,
        );
      } finally {
        await small.cleanup();
      }
    });
  });

  describe('destroy', () => {
    it('is idempotent (404 is gone) and a failing delete throws', async () => {
      const { id } = await createPod();
      h.fake.failNext('destroy', '5xx');
      await assert.rejects(h.provider.destroy(id), (e: ProviderApiError) => e.errorClass === 'unavailable');
      await h.provider.destroy(id);
      await h.provider.destroy(id);
      assert.equal((await h.provider.get(id)).state, 'gone');
      assert.deepEqual(
        h.fake.calls.filter((c) => c.method === 'DELETE').map((c) => c.path),
        [`/v2/pods/${id}`, `/v2/pods/${id}`, `/v2/pods/${id}`],
      );
    });
  });

  describe('options', () => {
    it('the plugin builds a RunPod provider with the declared capabilities', async () => {
      const p = await runpodPlugin.create(
        runpodPlugin.validateOptions({ API_KEY: h.fake.apiKey, API_URL: h.fake.url }),
        h.deps,
      );
      assert.ok(p instanceof RunpodProvider);
      assert.deepEqual(
        [p.id, p.capabilities],
        ['runpod', { labels: true, sshKeyPerInstance: true, listInstances: true }],
      );
      assert.ok((await p.listOffers()).length > 0);
    });

    it('never logs the API key', async () => {
      await createPod();
      h.fake.answerNext('create', { status: 401, detail: 'invalid api key' });
      await h.provider.create(h.label(), h.offer(), keys.publicKey);
      h.fake.rateLimitAll(true);
      await h.provider.listInstances().catch(() => undefined);
      assert.ok(h.logs.length >= 2);
      assert.ok(!JSON.stringify(h.logs).includes(h.fake.apiKey));
    });
  });

  it('waits for the pod to be gone after destroy; its SSH then refuses', async () => {
    h.fake.setBootMs(0, 0);
    const { id } = await createPod();
    const info = await waitForRunning(h.provider, id);
    await h.provider.destroy(id);
    assert.equal((await h.provider.get(id)).state, 'gone');
    assert.equal((await sshProbe({ ...info.ssh, privateKey: keys.privateKey }, { timeoutMs: 1000 })).ok, false);
  });
});
