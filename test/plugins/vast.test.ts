import assert from 'node:assert/strict';
import { VastProvider } from '../../plugins/vast/provider.js';
import { usdToCentsCeil } from '../../src/providers/pricing.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, sshProbe, type SshTarget } from '../../src/providers/ssh-probe.js';
import { FAKE_VAST_OFFERS } from '../fakes/vast-api.js';
import { makeVastHarness, type VastHarness } from './vast-harness.js';
import { runProviderContract, waitForRunning } from './provider-contract.js';

runProviderContract('vast', async () => {
  const h = await makeVastHarness();
  return {
    provider: h.provider,
    labelPrefix: h.labelPrefix,
    offer: h.offer(FAKE_VAST_OFFERS[0].id),
    runningTimeoutMs: 5000,
    unknownInstanceId: '99999999',
    cleanup: h.cleanup,
  };
});

describe(VastProvider.name, () => {
  let h: VastHarness;
  const keys = generateDeploymentKeyPair('vast-test');
  const h100 = FAKE_VAST_OFFERS[0].id;

  async function createRunning(provider = h.provider) {
    const label = h.label();
    const res = await provider.create(label, h.offer(h100), keys.publicKey);
    assert.equal(res.kind, 'created', JSON.stringify(res));
    const instanceId = (res as { instanceId: string }).instanceId;
    const info = await waitForRunning(provider, instanceId);
    return { label, instanceId, info, target: { ...info.ssh, privateKey: keys.privateKey } as SshTarget };
  }
  const callsTo = (method: string, path: RegExp) =>
    h.fake.calls.filter((c) => c.method === method && path.test(c.path));

  beforeEach(async () => {
    h = await makeVastHarness();
  });
  afterEach(async () => h.cleanup());

  describe('offers', () => {
    it('searches rentable, verified on-demand asks cheapest first, priced for our disk', async () => {
      await h.provider.listOffers();
      const [search] = callsTo('POST', /^\/api\/v0\/bundles\/$/);
      assert.deepEqual(search.body, {
        rentable: { eq: true },
        verified: { eq: true },
        rented: { eq: false },
        disk_space: { gte: 32 },
        duration: { gte: 3600 },
        type: 'on-demand',
        allocated_storage: 32,
        order: [['dph_total', 'asc']],
        limit: 64,
      });
    });

    it('prices every offer at usdToCentsCeil(dph_total) and maps the documented fields', async () => {
      const offers = await h.provider.listOffers();
      const listed = FAKE_VAST_OFFERS.filter((o) => o.verified && o.rentable && !o.rented);
      assert.deepEqual(offers.map((o) => o.key).sort(), listed.map((o) => String(o.id)).sort());
      for (const o of offers) {
        const f = FAKE_VAST_OFFERS.find((x) => String(x.id) === o.key)!;
        assert.equal(o.pricePerHourMinor, usdToCentsCeil(f.dph_total), o.key);
      }
      const byKey = new Map(offers.map((o) => [o.key, o]));
      assert.deepEqual(byKey.get('7100001'), {
        key: '7100001',
        name: 'H100 SXM',
        category: 'datacenter',
        vramGb: 80,
        gpuCount: 1,
        cpuCores: 16,
        memoryGb: 125,
        storageGb: 32,
        pricePerHourMinor: 210,
        maximumDurationSeconds: 14 * 86400,
        region: 'Texas, US',
        capabilities: { customImage: true, startupScript: true, ports: 5, maxDiskGb: 32 },
      });
      assert.equal(byKey.get('7100002')?.gpuCount, 2);
      assert.equal(byKey.get('7100002')?.pricePerHourMinor, 420);
      const rtx = byKey.get('7100003')!;
      assert.deepEqual(
        [rtx.pricePerHourMinor, rtx.category, rtx.vramGb, rtx.cpuCores, rtx.memoryGb, rtx.region],
        [35, 'consumer', 24, 12, 62, 'Lisbon, PT'],
      );
      assert.deepEqual(
        [byKey.get('7100004')?.name, byKey.get('7100004')?.vramGb, byKey.get('7100004')?.pricePerHourMinor],
        ['A100 SXM4', 80, 120],
      );
      const odd = byKey.get('7100005')!;
      assert.deepEqual([odd.pricePerHourMinor, odd.maximumDurationSeconds, odd.region], [36, 30 * 86400, null]);
      assert.deepEqual(
        offers.map((o) => o.pricePerHourMinor),
        [...offers.map((o) => o.pricePerHourMinor)].sort((a, b) => a - b),
      );
    });

    it('skips malformed asks and asks too short to rent instead of failing the whole list', async () => {
      h.fake.offers = [
        { ...FAKE_VAST_OFFERS[0] },
        { ...FAKE_VAST_OFFERS[2], id: 8100001, dph_total: Number.NaN },
        { ...FAKE_VAST_OFFERS[2], id: 8100002, gpu_name: '' },
      ];
      h.fake.offers.push({ ...FAKE_VAST_OFFERS[3], id: 8100003, duration: 600 });
      const offers = await h.provider.listOffers();
      assert.deepEqual(
        offers.map((o) => o.key),
        ['7100001'],
      );
    });
  });

  describe('create', () => {
    it('rents the ask with the documented body, then attaches our key to the instance', async () => {
      const { label, instanceId } = await createRunning();
      const [put] = callsTo('PUT', /^\/api\/v0\/asks\/\d+\/$/);
      assert.equal(put.path, `/api/v0/asks/${h100}/`);
      assert.deepEqual(put.body, {
        client_id: 'me',
        image: 'vastai/base-image:cuda-12.4.1-auto',
        disk: 32,
        label,
        runtype: 'ssh_direct',
        cancel_unavail: true,
      });
      const attach = callsTo('POST', /\/ssh\/$/);
      assert.equal(attach.length, 1);
      assert.equal(attach[0].path, `/api/v0/instances/${instanceId}/ssh/`);
      assert.deepEqual(attach[0].body, { ssh_key: keys.publicKey });
      assert.equal(h.fake.instances().find((i) => i.id === instanceId)?.label, label);
    });

    it('lets in only the key attached through the ssh endpoint, as root', async () => {
      const { target } = await createRunning();
      assert.equal(target.user, 'root');
      assert.equal(target.host, '127.0.0.1');
      const out = await sshExec(target, 'echo "$USER"; nvidia-smi -L');
      assert.match(out.stdout, /^root\nGPU 0: H100 SXM \(UUID: GPU-/);
      const stranger = generateDeploymentKeyPair('stranger');
      const refused = await sshProbe({ ...target, privateKey: stranger.privateKey });
      assert.deepEqual([refused.ok, (refused as { reason: string }).reason], [false, 'auth']);
    });

    it('an attach that fails after the create keeps the instance and attaches on the next poll', async () => {
      h.fake.failNext('attach', '5xx');
      const label = h.label();
      const res = await h.provider.create(label, h.offer(h100), keys.publicKey);
      assert.equal(res.kind, 'created');
      const instanceId = (res as { instanceId: string }).instanceId;
      assert.equal(h.fake.instances()[0].keys, 0);
      const port = h.fake.instances()[0].sshPort;
      const before = await sshProbe({ host: '127.0.0.1', port, user: 'root', privateKey: keys.privateKey });
      assert.deepEqual([before.ok, (before as { reason: string }).reason], [false, 'auth']);
      const info = await waitForRunning(h.provider, instanceId);
      assert.equal(h.fake.instances()[0].keys, 1);
      assert.deepEqual(await sshProbe({ ...info.ssh, privateKey: keys.privateKey }), { ok: true });
      assert.equal(callsTo('POST', /\/ssh\/$/).length, 2);
    });

    it('a key Vast refuses for good makes the instance read as failed, so the host destroys it', async () => {
      h.fake.respondNext('attach', 400, {
        success: false,
        error: 'team_ssh_keys_not_supported',
        msg: 'team keys cannot manage ssh keys',
      });
      const res = await h.provider.create(h.label(), h.offer(h100), keys.publicKey);
      assert.equal(res.kind, 'created');
      const info = await h.provider.get((res as { instanceId: string }).instanceId);
      assert.equal(info.state, 'failed');
      assert.match(info.providerState!, /ssh key refused/);
      assert.equal(callsTo('POST', /\/ssh\/$/).length, 1);
    });

    it('another refusal of the key stops the retries but leaves the instance to the host SSH check', async () => {
      h.fake.respondNext('attach', 400, { success: false, error: 'invalid_args', msg: 'key already present' });
      const res = await h.provider.create(h.label(), h.offer(h100), keys.publicKey);
      const info = await waitForRunning(h.provider, (res as { instanceId: string }).instanceId);
      assert.equal(info.state, 'running');
      assert.equal(callsTo('POST', /\/ssh\/$/).length, 1);
    });

    it('a second create for a label already holding the key does not attach it again', async () => {
      const label = h.label();
      const a = await h.provider.create(label, h.offer(h100), keys.publicKey);
      const b = await h.provider.create(label, h.offer(h100), keys.publicKey);
      assert.deepEqual(b, a);
      assert.equal(callsTo('POST', /\/ssh\/$/).length, 1);
      assert.equal(callsTo('PUT', /\/asks\//).length, 1);
    });

    it('a create that hangs after making the instance is ambiguous; findByLabel adopts it and delivers the key', async () => {
      h.fake.hangCreatesAfterCreating(true);
      const label = h.label();
      const res = await h.provider.create(label, h.offer(h100), keys.publicKey);
      assert.equal(res.kind, 'ambiguous');
      assert.match((res as { reason: string }).reason, /no answer within/);
      assert.equal(h.fake.instances()[0].keys, 0);
      const found = await h.provider.findByLabel(label);
      assert.equal(found?.label, label);
      assert.equal(found?.instanceId, h.fake.instances()[0].id);
      const info = await waitForRunning(h.provider, found!.instanceId);
      assert.deepEqual(await sshProbe({ ...info.ssh, privateKey: keys.privateKey }), { ok: true });
      assert.equal(callsTo('PUT', /\/asks\//).length, 1);
    });

    it('a process that did not make the hung create still delivers the key when it adopts with the deployment key', async () => {
      h.fake.hangCreatesAfterCreating(true);
      const label = h.label();
      assert.equal((await h.provider.create(label, h.offer(h100), keys.publicKey)).kind, 'ambiguous');
      // A restarted worker: nothing in memory, only the label and the key the host kept.
      const restarted = h.newProvider();
      const found = await restarted.findByLabel(label, keys.publicKey);
      assert.equal(found?.instanceId, h.fake.instances()[0].id);
      const info = await waitForRunning(restarted, found!.instanceId);
      assert.deepEqual(await sshProbe({ ...info.ssh, privateKey: keys.privateKey }), { ok: true });
    });

    it('no capacity is unavailable and makes nothing; another ask still rents', async () => {
      h.fake.noCapacity('H100 SXM');
      const res = await h.provider.create(h.label(), h.offer(h100), keys.publicKey);
      assert.equal(res.kind, 'unavailable');
      assert.match((res as { reason: string }).reason, /410 no_such_ask/);
      assert.deepEqual(h.fake.instances(), []);
      assert.equal(
        (await h.provider.create(h.label(), h.offer(FAKE_VAST_OFFERS[3].id), keys.publicKey)).kind,
        'created',
      );
    });

    it('refuses labels Vast cannot keep and offer keys that are not ask ids, without calling Vast', async () => {
      assert.equal((await h.provider.create('x'.repeat(257), h.offer(h100), keys.publicKey)).kind, 'rejected');
      assert.equal((await h.provider.create(h.label(), h.offer('h100-1x'), keys.publicKey)).kind, 'rejected');
      assert.deepEqual(h.fake.calls, []);
    });

    it('racing creates for one label make one instance', async () => {
      const label = h.label();
      const results = await Promise.all([1, 2, 3].map(() => h.provider.create(label, h.offer(h100), keys.publicKey)));
      assert.deepEqual(new Set(results.map((r) => (r as { instanceId: string }).instanceId)).size, 1);
      assert.equal(h.fake.instances().length, 1);
    });
  });

  describe('rate limits', () => {
    it('a 429 without Retry-After backs the endpoint off, doubling on repeats, and resets after a success', async () => {
      h.fake.failNext('offers', '429');
      h.fake.failNext('offers', '429');
      const first = await h.provider.listOffers().catch((e: ProviderApiError) => e);
      const second = await h.provider.listOffers().catch((e: ProviderApiError) => e);
      assert.ok(first instanceof ProviderApiError && second instanceof ProviderApiError);
      assert.deepEqual(
        [first.errorClass, first.retryAfterMs, second.errorClass, second.retryAfterMs],
        ['rate_limited', 20, 'rate_limited', 40],
      );
      assert.ok((await h.provider.listOffers()).length > 0);
      h.fake.failNext('offers', '429');
      assert.equal(
        ((await h.provider.listOffers().catch((e: ProviderApiError) => e)) as ProviderApiError).retryAfterMs,
        20,
      );
    });

    it('rateLimitAll: a create is throttled with a wait and nothing is made', async () => {
      h.fake.rateLimitAll(true);
      const res = await h.provider.create(h.label(), h.offer(h100), keys.publicKey);
      assert.equal(res.kind, 'throttled');
      assert.ok((res as { retryAfterMs: number }).retryAfterMs >= 20);
      h.fake.rateLimitAll(false);
      assert.deepEqual(h.fake.instances(), []);
    });

    it('keeps each endpoint at its minimum interval: a fake enforcing them never answers 429', async function () {
      this.timeout(20_000);
      // The fake enforces well under the plugin's spacing: arrival gaps vary with load, not the limiter.
      const spaced = h.newProvider({
        tuning: {
          intervalsMs: { create: 200, attach: 120, get: 120, list: 100, destroy: 150, offers: 120 },
          listTtlMs: 0,
        },
      });
      h.fake.enforceIntervals({ create: 100, attach: 40, get: 40, list: 30, destroy: 60, offers: 40 });
      const made = await Promise.all([1, 2, 3].map(() => createRunning(spaced)));
      await Promise.all([
        spaced.listOffers(),
        spaced.listOffers(),
        ...made.map((m) => spaced.get(m.instanceId)),
        spaced.listInstances(),
      ]);
      await Promise.all(made.map((m) => spaced.destroy(m.instanceId)));
      assert.equal(h.fake.calls.filter((c) => c.status === 429).length, 0);
      assert.ok(h.fake.calls.length > 15);
    });
  });
});
