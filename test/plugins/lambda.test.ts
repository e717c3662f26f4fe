import assert from 'node:assert/strict';
import { LambdaProvider, LABEL_TAG_KEY } from '../../plugins/lambda/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, sshProbe, type SshTarget } from '../../src/providers/ssh-probe.js';
import { FAST_TUNING, H100_OFFER_KEY, makeLambdaHarness, type LambdaHarness } from './lambda-harness.js';
import { runProviderContract, waitForRunning } from './provider-contract.js';
import { waitFor } from '../helpers/wait.js';

runProviderContract('lambda', async () => {
  const h = await makeLambdaHarness();
  return {
    provider: h.provider,
    labelPrefix: h.labelPrefix,
    offer: h.offer(),
    runningTimeoutMs: 5000,
    unknownInstanceId: '0920582c7ff041399e34823a0be62549',
    cleanup: h.cleanup,
  };
});

/** Past this, the list the provider read last is read again. */
const LIST_TTL_MS = FAST_TUNING.listTtlMs!;

describe(LambdaProvider.name, () => {
  let h: LambdaHarness;
  const keys = generateDeploymentKeyPair('lambda-test');

  async function launch(offerKey = H100_OFFER_KEY) {
    const label = h.label();
    const res = await h.provider.create(label, h.offer(offerKey), keys.publicKey);
    assert.equal(res.kind, 'created', JSON.stringify(res));
    return { label, instanceId: (res as { instanceId: string }).instanceId };
  }

  async function launchRunning(offerKey = H100_OFFER_KEY) {
    const l = await launch(offerKey);
    const info = await waitForRunning(h.provider, l.instanceId);
    const target: SshTarget = { ...info.ssh, privateKey: keys.privateKey };
    return { ...l, info, target };
  }

  const callsSince = (n: number) => h.fake.calls.slice(n).map((c) => `${c.method} ${c.path}`);

  beforeEach(async () => {
    h = await makeLambdaHarness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  describe('offers', () => {
    it('lists one offer per instance type and region with capacity, at Lambda cost', async () => {
      const offers = await h.provider.listOffers();
      const keysListed = offers.map((o) => o.key).sort();
      assert.deepEqual(keysListed, [
        'gpu_1x_a100_sxm4@us-east-1',
        'gpu_1x_a100_sxm4@us-west-1',
        'gpu_1x_a10@us-west-1',
        'gpu_1x_h100_sxm5@us-east-1',
        'gpu_8x_h100_sxm5@us-east-1',
        'gpu_8x_h100_sxm5@us-south-1',
      ]);
      const h100 = offers.find((o) => o.key === H100_OFFER_KEY);
      assert.deepEqual(h100, {
        key: H100_OFFER_KEY,
        name: 'gpu_1x_h100_sxm5',
        category: 'datacenter',
        vramGb: 80,
        gpuCount: 1,
        cpuCores: 26,
        memoryGb: 225,
        storageGb: 2867,
        pricePerHourMinor: 329,
        maximumDurationSeconds: 7 * 86400,
        region: 'us-east-1',
        capabilities: { customImage: false, startupScript: true, ports: 0, maxDiskGb: null },
      });
      const eight = offers.find((o) => o.key === 'gpu_8x_h100_sxm5@us-south-1');
      assert.equal(eight?.pricePerHourMinor, 2632);
      assert.equal(eight?.gpuCount, 8);
      assert.equal(offers.find((o) => o.key === 'gpu_1x_a100_sxm4@us-west-1')?.vramGb, 40);
    });

    it('drops a type the moment it has no capacity, and filters by LAMBDA_PROVIDER_REGIONS', async () => {
      h.fake.noCapacity('gpu_1x_h100_sxm5');
      assert.ok(!(await h.provider.listOffers()).some((o) => o.name === 'gpu_1x_h100_sxm5'));
      const west = await h.newProvider({ raw: { REGIONS: 'us-west-1', MAX_DURATION_SECONDS: '3600' } });
      const offers = await west.listOffers();
      assert.deepEqual(offers.map((o) => o.key).sort(), ['gpu_1x_a100_sxm4@us-west-1', 'gpu_1x_a10@us-west-1']);
      assert.ok(offers.every((o) => o.maximumDurationSeconds === 3600));
    });
  });

  describe('create', () => {
    it('registers the deployment key under the label, then launches with the label as name and tag', async () => {
      const before = h.fake.calls.length;
      const { label, instanceId } = await launch();
      assert.deepEqual(callsSince(before), [
        'GET /api/v1/instances',
        'POST /api/v1/ssh-keys',
        'POST /api/v1/instance-operations/launch',
      ]);
      const registered = h.fake.sshKeys().filter((k) => k.name === label);
      assert.equal(registered.length, 1);
      assert.equal(registered[0].public_key, keys.publicKey);
      const [inst] = h.fake.instances().filter((i) => i.id === instanceId);
      assert.equal(inst.name, label);
      assert.deepEqual(inst.tags, [{ key: LABEL_TAG_KEY, value: label }]);
      assert.equal(inst.status, 'booting');
    });

    it('reports SSH on the instance ip and LAMBDA_PROVIDER_SSH_PORT as ubuntu, letting in only the deployment key', async () => {
      const a = await launchRunning();
      const b = await launchRunning('gpu_1x_a10@us-west-1');
      const fakeA = h.fake.instances().find((i) => i.id === a.instanceId)!;
      assert.deepEqual(a.info.ssh, { host: fakeA.ip, port: h.fake.sshPort, user: 'ubuntu' });
      assert.notEqual(a.target.host, b.target.host);
      assert.equal(a.target.port, b.target.port);
      assert.match((await sshExec(a.target, 'nvidia-smi -L')).stdout, /^GPU 0: NVIDIA H100 /);
      assert.match((await sshExec(b.target, 'nvidia-smi -L')).stdout, /^GPU 0: NVIDIA A10 /);
      const stranger = generateDeploymentKeyPair('stranger');
      assert.equal(
        ((await sshProbe({ ...a.target, privateKey: stranger.privateKey })) as { reason: string }).reason,
        'auth',
      );
      assert.equal(((await sshProbe({ ...a.target, user: 'root' })) as { reason: string }).reason, 'auth');
    });

    it('reports no SSH endpoint while Lambda has not assigned an ip', async () => {
      h.fake.setBootMs(60_000);
      const { instanceId } = await launch();
      const info = await h.provider.get(instanceId);
      assert.equal(info.state, 'pending');
      assert.equal(info.providerState, 'booting');
      assert.equal(info.ssh, undefined);
    });

    it('an ambiguous launch is found by its label and never launched twice', async () => {
      h.fake.hangCreatesAfterCreating(true);
      const label = h.label();
      const res = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.equal(res.kind, 'ambiguous');
      h.fake.hangCreatesAfterCreating(false);
      const found = await h.provider.findByLabel(label);
      assert.ok(found);
      const again = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.deepEqual(again, { kind: 'created', instanceId: found.instanceId });
      assert.equal(h.fake.instances().length, 1);
      assert.equal(h.fake.calls.filter((c) => c.path.endsWith('/launch')).length, 1);
    });

    it('racing creates for one label in one process launch once', async () => {
      const label = h.label();
      const [a, b] = await Promise.all([
        h.provider.create(label, h.offer(), keys.publicKey),
        h.provider.create(label, h.offer(), keys.publicKey),
      ]);
      assert.deepEqual(a, b);
      assert.equal(h.fake.instances().length, 1);
    });

    it('a retry after a throttled launch reuses the key registered for the label', async () => {
      h.fake.failNext('create', '429');
      const label = h.label();
      const first = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.equal(first.kind, 'throttled');
      assert.equal(h.fake.sshKeys().filter((k) => k.name === label).length, 1);
      const second = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.equal(second.kind, 'created');
      assert.equal(h.fake.sshKeys().filter((k) => k.name === label).length, 1);
    });

    it('refuses a label already registered with a different public key', async () => {
      const label = h.label();
      await h.provider.create(label, h.offer(), keys.publicKey);
      const other = generateDeploymentKeyPair('other');
      const p = await h.newProvider();
      await h.provider.destroy((await h.provider.findByLabel(label))!.instanceId);
      await waitFor(async () => ((await h.provider.findByLabel(label)) === null ? true : undefined), {
        timeoutMs: 5000,
        what: 'terminated',
      });
      const res = await p.create(label, h.offer(), other.publicKey);
      assert.equal(res.kind, 'rejected');
      assert.match((res as { reason: string }).reason, /different public key/);
    });

    it('a launch Lambda refuses for capacity deletes the key it registered', async () => {
      h.fake.noCapacity('gpu_1x_h100_sxm5');
      const label = h.label();
      const res = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.equal(res.kind, 'unavailable');
      assert.match((res as { reason: string }).reason, /instance-operations\/launch\/insufficient-capacity/);
      assert.ok(h.fake.calls.some((c) => c.method === 'DELETE' && c.path.startsWith('/api/v1/ssh-keys/')));
      assert.deepEqual(h.fake.sshKeys(), []);
    });
  });

  describe('labels', () => {
    it('matches the tag before the name, so a rename cannot move a label', async () => {
      const a = await launch();
      const b = await launch('gpu_1x_a10@us-west-1');
      h.fake.rename(a.instanceId, b.label);
      h.fake.rename(b.instanceId, 'my renamed box');
      assert.equal((await h.provider.findByLabel(a.label))?.instanceId, a.instanceId);
      assert.equal((await h.provider.findByLabel(b.label))?.instanceId, b.instanceId);
      const listed = await h.provider.listInstances();
      assert.deepEqual(
        listed.map((i) => [i.instanceId, i.label]).sort(),
        [
          [a.instanceId, a.label],
          [b.instanceId, b.label],
        ].sort(),
      );
    });

    it('another process finds, reads and cleans up what this one launched', async () => {
      const { label, instanceId } = await launchRunning();
      const restarted = await h.newProvider();
      assert.equal((await restarted.findByLabel(label))?.instanceId, instanceId);
      assert.equal((await restarted.get(instanceId)).state, 'running');
      await restarted.destroy(instanceId);
      await waitFor(async () => ((await restarted.get(instanceId)).state === 'gone' ? true : undefined), {
        timeoutMs: 5000,
        what: 'gone',
      });
      await restarted.afterDestroyed(label);
      assert.deepEqual(h.fake.sshKeys(), []);
    });

    it('lists only instances under the label prefix', async () => {
      const mine = await launch();
      const foreign = await h.provider.create(
        `other-${h.labelPrefix}x`,
        h.offer('gpu_1x_a10@us-west-1'),
        keys.publicKey,
      );
      assert.equal(foreign.kind, 'created');
      assert.deepEqual(
        (await h.provider.listInstances()).map((i) => i.instanceId),
        [mine.instanceId],
      );
    });
  });

  describe('destroy and afterDestroyed', () => {
    it('deletes the deployment key once destruction is verified, idempotently', async () => {
      const { label, instanceId, target } = await launchRunning();
      await h.provider.destroy(instanceId);
      await waitFor(async () => ((await h.provider.get(instanceId)).state === 'gone' ? true : undefined), {
        timeoutMs: 5000,
        what: 'gone',
      });
      await waitFor(async () => ((await sshProbe(target, { timeoutMs: 1000 })).ok ? undefined : true), {
        timeoutMs: 5000,
        what: 'SSH closed',
      });
      assert.equal(h.fake.sshKeys().filter((k) => k.name === label).length, 1);
      await h.provider.afterDestroyed(label);
      assert.deepEqual(h.fake.sshKeys(), []);
      const before = h.fake.calls.length;
      await h.provider.afterDestroyed(label);
      assert.deepEqual(callsSince(before), ['GET /api/v1/ssh-keys']);
    });

    it('terminates one id per call; an id Lambda does not know counts as gone', async () => {
      const { instanceId } = await launch();
      const before = h.fake.calls.length;
      await h.provider.destroy('ffffffffffffffffffffffffffffffff');
      await h.provider.destroy(instanceId);
      assert.deepEqual(callsSince(before), [
        'POST /api/v1/instance-operations/terminate',
        'POST /api/v1/instance-operations/terminate',
      ]);
      assert.equal(h.fake.instances().find((i) => i.id === instanceId)?.status, 'terminating');
    });

    it('a terminate refused for an instance already terminating counts as done; for a live one it is an error', async () => {
      const a = await launch();
      const b = await launch('gpu_1x_a10@us-west-1');
      await h.provider.destroy(a.instanceId);
      const refused = { error: { code: 'global/invalid-parameters', message: 'Instance cannot be terminated.' } };
      h.fake.failNextWith('destroy', 400, refused);
      await h.provider.destroy(a.instanceId);
      h.fake.failNextWith('destroy', 400, refused);
      await assert.rejects(
        h.provider.destroy(b.instanceId),
        (err: Error & { errorClass?: string }) => err.errorClass === 'request',
      );
    });

    it('an instance the API forgot reads as gone while its SSH still lets the key in', async () => {
      const { instanceId, target, label } = await launchRunning();
      h.fake.forget(instanceId);
      h.advance(LIST_TTL_MS);
      assert.equal((await h.provider.get(instanceId)).state, 'gone');
      assert.equal(await h.provider.findByLabel(label), null);
      assert.deepEqual(await sshProbe(target), { ok: true });
    });
  });

  describe('polling', () => {
    it('serves many concurrent gets from one list call', async () => {
      const launched = [await launch(), await launch(), await launch()];
      h.advance(LIST_TTL_MS);
      const before = h.fake.calls.length;
      const infos = await Promise.all(Array.from({ length: 12 }, (_, i) => h.provider.get(launched[i % 3].instanceId)));
      assert.deepEqual(callsSince(before), ['GET /api/v1/instances']);
      assert.deepEqual(
        infos.map((i) => i.instanceId),
        Array.from({ length: 12 }, (_, i) => launched[i % 3].instanceId),
      );
    });

    it('asks for the instance itself before calling an unlisted one gone', async () => {
      const { instanceId } = await launch();
      await h.provider.destroy(instanceId);
      await waitFor(async () => (h.fake.instances()[0].status === 'terminated' ? true : undefined), {
        timeoutMs: 5000,
        what: 'terminated',
      });
      h.advance(LIST_TTL_MS);
      const before = h.fake.calls.length;
      const info = await h.provider.get(instanceId);
      assert.equal(info.state, 'gone');
      assert.equal(info.providerState, 'terminated');
      assert.deepEqual(callsSince(before), ['GET /api/v1/instances', `GET /api/v1/instances/${instanceId}`]);
    });
  });
});
