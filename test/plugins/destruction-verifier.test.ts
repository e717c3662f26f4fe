import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { DestructionVerifier } from '../../src/providers/destruction-verifier.js';
import type { InstanceInfo, Provider } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import type { SshTarget } from '../../src/providers/ssh-probe.js';
import { makeLocalHarness, type LocalHarness } from './local-harness.js';
import { waitForRunning } from './provider-contract.js';

/** A provider whose `get` says whatever the test wants, for the cases a real plugin should not produce. */
function fakeProvider(get: (id: string) => Promise<InstanceInfo>): Provider {
  const unused = () => Promise.reject(new Error('not used by the verifier'));
  return {
    id: 'fake',
    capabilities: { labels: true, sshKeyPerInstance: true, listInstances: true },
    listOffers: unused,
    create: unused,
    findByLabel: unused,
    get,
    destroy: unused,
    listInstances: unused,
  };
}

/** A TCP port that accepts and then never speaks SSH: a machine hanging on its way down. */
async function silentPort(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describe(DestructionVerifier.name, () => {
  let h: LocalHarness;
  const keys = generateDeploymentKeyPair('verifier-test');
  const sut = new DestructionVerifier({ sshTimeoutMs: 1500 });

  async function running(offerKey: string) {
    const res = await h.provider.create(h.label(), h.offer(offerKey), keys.publicKey);
    const instanceId = (res as { instanceId: string }).instanceId;
    const info = await waitForRunning(h.provider, instanceId, 3000);
    const target: SshTarget = { ...info.ssh, privateKey: keys.privateKey };
    return { instanceId, target };
  }

  beforeEach(async () => {
    h = await makeLocalHarness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('verifies an instance the provider destroyed for real', async () => {
    const { instanceId, target } = await running('h100-1x');
    await h.provider.destroy(instanceId);
    const check = await sut.verify(h.provider, instanceId, target);
    assert.equal(check.verified, true);
    assert.equal(check.providerState, 'gone');
    assert.equal(check.sshRefused, true);
    assert.match(check.detail, /refused/);
    assert.doesNotMatch(check.detail, /PRIVATE KEY/);
    // What a teardown receipt records: the provider's final answer and how the login failed, each timed.
    assert.equal(check.evidence?.provider.state, 'gone');
    assert.equal(check.evidence?.ssh.outcome, 'refused');
    assert.ok(check.evidence!.ssh.checkedAt! >= check.evidence!.provider.checkedAt);
  });

  it("times the evidence by the caller's clock and keeps the plugin's own state and HTTP status", async () => {
    const gone = fakeProvider(async (id) => ({
      instanceId: id,
      label: 'x',
      state: 'gone',
      providerState: 'not found',
      httpStatus: 404,
    }));
    const at = new Date('2026-05-01T00:00:00.000Z');
    const check = await sut.verify(
      gone,
      'i-1',
      { host: '127.0.0.1', port: 1, user: 'gpu', privateKey: keys.privateKey },
      { logger: { warn: () => undefined }, deploymentId: 'd', now: () => at },
    );
    assert.deepEqual(check.evidence, {
      provider: { state: 'gone', providerState: 'not found', httpStatus: 404, checkedAt: at },
      ssh: { outcome: 'refused', checkedAt: at },
    });
    const without = await sut.verifyWithoutAddress(gone, 'i-1', {
      logger: { warn: () => undefined },
      deploymentId: 'd',
      now: () => at,
    });
    assert.equal(without.verified, true);
    assert.deepEqual(without.evidence?.ssh, { outcome: 'no_address', checkedAt: null });
    const running = fakeProvider(async (id) => ({ instanceId: id, label: 'x', state: 'running' }));
    const notYet = await sut.verifyWithoutAddress(running, 'i-1');
    assert.deepEqual([notYet.verified, notYet.evidence], [false, undefined]);
    assert.match(notYet.detail, /reports running; it never reported an SSH address/);
  });

  it('does not verify a running instance, and does not bother probing it', async () => {
    const { instanceId, target } = await running('h100-1x');
    const check = await sut.verify(h.provider, instanceId, target);
    assert.deepEqual(
      { ...check, detail: undefined },
      { verified: false, providerState: 'running', sshRefused: false, detail: undefined },
    );
    assert.match(check.detail, /not probed/);
  });

  it('does not verify when the provider ignored the destroy', async () => {
    const { instanceId, target } = await running('destroy-ignore');
    await h.provider.destroy(instanceId);
    const check = await sut.verify(h.provider, instanceId, target);
    assert.equal(check.verified, false);
    assert.equal(check.providerState, 'running');
  });

  it('does not verify when the provider says gone but the key still gets in (local ghost)', async () => {
    const { instanceId, target } = await running('destroy-ghost');
    await h.provider.destroy(instanceId);
    const check = await sut.verify(h.provider, instanceId, target);
    assert.equal(check.verified, false);
    assert.equal(check.providerState, 'gone');
    assert.equal(check.sshRefused, false);
    assert.match(check.detail, /still succeeds/);
  });

  it('does not verify when a fake provider says gone but SSH still gets in', async () => {
    const { instanceId, target } = await running('h100-1x');
    const liar = fakeProvider(async (id) => ({ instanceId: id, label: 'x', state: 'gone' }));
    const check = await sut.verify(liar, instanceId, target);
    assert.equal(check.verified, false);
    assert.equal(check.sshRefused, false);
  });

  it('verifies when the provider says gone and the server rejects the key', async () => {
    const { instanceId, target } = await running('h100-1x');
    const gone = fakeProvider(async (id) => ({ instanceId: id, label: 'x', state: 'gone' }));
    const stranger = generateDeploymentKeyPair('stranger');
    const check = await sut.verify(gone, instanceId, { ...target, privateKey: stranger.privateKey });
    assert.equal(check.verified, true);
    assert.match(check.detail, /auth/);
    assert.equal(check.evidence?.ssh.outcome, 'key_rejected');
  });

  it('verifies when the provider says gone and the endpoint never completes a handshake', async () => {
    const silent = await silentPort();
    try {
      const gone = fakeProvider(async (id) => ({ instanceId: id, label: 'x', state: 'gone' }));
      const started = Date.now();
      const check = await new DestructionVerifier({ sshTimeoutMs: 300 }).verify(gone, 'i-1', {
        host: '127.0.0.1',
        port: silent.port,
        user: 'gpu',
        privateKey: keys.privateKey,
      });
      assert.equal(check.verified, true);
      assert.match(check.detail, /timeout/);
      assert.ok(Date.now() - started < 3000);
      assert.equal(check.evidence?.ssh.outcome, 'timed_out');
    } finally {
      await silent.close();
    }
  });

  it('does not verify when the provider cannot be asked', async () => {
    const broken = fakeProvider(async () => {
      throw new Error('503 from provider API');
    });
    const check = await sut.verify(broken, 'i-1', {
      host: '127.0.0.1',
      port: 1,
      user: 'gpu',
      privateKey: keys.privateKey,
    });
    assert.deepEqual(
      { verified: check.verified, providerState: check.providerState, sshRefused: check.sshRefused },
      { verified: false, providerState: 'unknown', sshRefused: false },
    );
    assert.match(check.detail, /503 from provider API/);
  });
});
