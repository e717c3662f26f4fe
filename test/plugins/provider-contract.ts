import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { InstanceInfo, OfferRef, Provider } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, sshProbe } from '../../src/providers/ssh-probe.js';
import { waitFor } from '../helpers/wait.js';

/** What a plugin's test file hands the shared contract suite, built fresh for every test. */
export interface ContractHarness {
  provider: Provider;
  /** The label prefix the provider was created with (`ProviderDeps.labelPrefix`). */
  labelPrefix: string;
  /** An offer the provider creates normally and brings to running within `runningTimeoutMs`. */
  offer: OfferRef;
  /** How long an instance may take to reach running. Default 5000 ms. */
  runningTimeoutMs?: number;
  /** An instance id the provider has never issued. Default a random UUID. */
  unknownInstanceId?: string;
  /** Destroys what the test left behind and closes the provider. */
  cleanup(): Promise<void>;
}

/** Polls `get` until the instance runs with an SSH endpoint. */
export async function waitForRunning(
  provider: Provider,
  instanceId: string,
  timeoutMs = 5000,
): Promise<InstanceInfo & { ssh: NonNullable<InstanceInfo['ssh']> }> {
  return waitFor(
    async () => {
      const info = await provider.get(instanceId);
      if (info.state === 'failed' || info.state === 'gone') throw new Error(`instance is ${info.state}`);
      return info.state === 'running' && info.ssh
        ? (info as InstanceInfo & { ssh: NonNullable<InstanceInfo['ssh']> })
        : undefined;
    },
    { timeoutMs: timeoutMs, what: `instance ${instanceId} to run` },
  );
}

const INSTANCE_STATES = ['pending', 'running', 'stopped', 'failed', 'terminating', 'gone'];

/**
 * The behaviour every provider plugin owes the host (see docs/plugins.md).
 * Call from a plugin's test file with a factory that builds a fresh provider against fakes.
 */
export function runProviderContract(name: string, makeProvider: () => Promise<ContractHarness>): void {
  describe(`provider contract: ${name}`, function () {
    let h: ContractHarness;
    const label = () => `${h.labelPrefix}${randomUUID().slice(0, 18)}`;

    beforeEach(async () => {
      h = await makeProvider();
    });
    afterEach(async () => {
      await h.cleanup();
    });

    it('declares its id and capabilities', () => {
      assert.equal(typeof h.provider.id, 'string');
      assert.ok(h.provider.id.length > 0);
      for (const k of ['labels', 'sshKeyPerInstance', 'listInstances'] as const)
        assert.equal(typeof h.provider.capabilities[k], 'boolean');
    });

    it('lists well-formed offers with unique keys', async () => {
      const offers = await h.provider.listOffers();
      assert.ok(offers.length > 0);
      assert.equal(new Set(offers.map((o) => o.key)).size, offers.length);
      const positive = (v: unknown) => Number.isSafeInteger(v) && (v as number) > 0;
      for (const o of offers) {
        assert.ok(typeof o.key === 'string' && o.key.length > 0, `key of ${JSON.stringify(o)}`);
        assert.ok(typeof o.name === 'string' && o.name.length > 0, `name of ${o.key}`);
        assert.ok(typeof o.category === 'string' && o.category.length > 0, `category of ${o.key}`);
        assert.ok(o.vramGb === null || positive(o.vramGb), `vramGb of ${o.key}`);
        assert.ok(positive(o.gpuCount), `gpuCount of ${o.key}`);
        assert.ok(positive(o.pricePerHourMinor), `pricePerHourMinor of ${o.key}`);
        assert.ok(positive(o.maximumDurationSeconds), `maximumDurationSeconds of ${o.key}`);
      }
      assert.ok(
        offers.some((o) => o.key === h.offer.key),
        'the harness offer is listed',
      );
    });

    it('creates, finds by label, runs with SSH for the given key, and destroys idempotently', async function () {
      this.timeout((h.runningTimeoutMs ?? 5000) + 15_000);
      const keys = generateDeploymentKeyPair('contract-test');
      const l = label();
      const res = await h.provider.create(l, h.offer, keys.publicKey);
      assert.equal(res.kind, 'created');
      const instanceId = (res as { instanceId: string }).instanceId;

      const found = await h.provider.findByLabel(l);
      assert.ok(found, 'findByLabel finds the new instance');
      assert.equal(found.instanceId, instanceId);
      assert.equal(found.label, l);
      assert.ok(['pending', 'running'].includes(found.state), `fresh instance state ${found.state}`);

      const first = await h.provider.get(instanceId);
      assert.equal(first.instanceId, instanceId);
      assert.ok(INSTANCE_STATES.includes(first.state));

      const running = await waitForRunning(h.provider, instanceId, h.runningTimeoutMs);
      const target = { ...running.ssh, privateKey: keys.privateKey };
      const out = await sshExec(target, 'echo contract-ok');
      assert.equal(out.code, 0);
      assert.equal(out.stdout.trim(), 'contract-ok');
      assert.ok((await h.provider.listInstances()).some((i) => i.instanceId === instanceId && i.label === l));

      await h.provider.destroy(instanceId);
      await h.provider.destroy(instanceId);
      const gone = await waitFor(
        async () => {
          const info = await h.provider.get(instanceId);
          return info.state === 'gone' ? info : undefined;
        },
        { timeoutMs: 5000, what: 'instance to be gone' },
      );
      assert.equal(gone.instanceId, instanceId);
      assert.equal(await h.provider.findByLabel(l), null);
      assert.ok(!(await h.provider.listInstances()).some((i) => i.instanceId === instanceId));
      const probe = await waitFor(
        async () => {
          const p = await sshProbe(target, { timeoutMs: 2000 });
          return p.ok ? undefined : p;
        },
        { timeoutMs: 5000, what: 'SSH to stop letting us in' },
      );
      assert.equal(probe.ok, false);
      await h.provider.destroy(instanceId);
    });

    it('never makes a second instance for a label', async () => {
      const keys = generateDeploymentKeyPair('contract-test');
      const l = label();
      const a = await h.provider.create(l, h.offer, keys.publicKey);
      const b = await h.provider.create(l, h.offer, keys.publicKey);
      assert.equal(a.kind, 'created');
      assert.equal(b.kind, 'created');
      assert.equal((b as { instanceId: string }).instanceId, (a as { instanceId: string }).instanceId);
      const listed = (await h.provider.listInstances()).filter((i) => i.label === l);
      assert.equal(listed.length, 1);
    });

    it('reports an unknown instance as gone and destroys it without error', async () => {
      const id = h.unknownInstanceId ?? randomUUID();
      assert.equal((await h.provider.get(id)).state, 'gone');
      await h.provider.destroy(id);
      assert.equal(await h.provider.findByLabel(`${h.labelPrefix}never-created`), null);
    });
  });
}
