import assert from 'node:assert/strict';
import { sandboxDirFor, sandboxOwnerFor } from '../../plugins/local/sandbox.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, type SshTarget } from '../../src/providers/ssh-probe.js';
import { makeLocalHarness, type LocalHarness } from './local-harness.js';

async function waitRunning(h: LocalHarness, instanceId: string): Promise<NonNullable<Awaited<ReturnType<LocalHarness['provider']['get']>>['ssh']>> {
  for (let i = 0; i < 100; i++) {
    const info = await h.provider.get(instanceId);
    if (info.state === 'running' && info.ssh) return info.ssh;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('instance did not start');
}

describe('local provider shells when the service runs as root', () => {
  let h: LocalHarness;
  const keys = generateDeploymentKeyPair('local-isolation');
  before(async () => {
    h = await makeLocalHarness();
  });
  after(() => h.cleanup());

  async function start(): Promise<{ instanceId: string; target: SshTarget }> {
    const res = await h.provider.create(h.label(), h.offer('instant'), keys.publicKey);
    assert.equal(res.kind, 'created');
    const instanceId = (res as { instanceId: string }).instanceId;
    return { instanceId, target: { ...(await waitRunning(h, instanceId)), privateKey: keys.privateKey } };
  }

  it('runs in this environment as root, which is the case under test', () => {
    assert.equal(process.getuid?.(), 0, 'these tests must run as root to mean anything');
  });

  it('runs commands as an unprivileged user of the instance that cannot read the service environment', async () => {
    const { instanceId, target } = await start();
    process.env.LOCAL_SHELL_SECRET = 'the-service-secret';
    try {
      const id = await sshExec(target, 'id -u; id -g; id -G');
      const [uid, gid, groups] = id.stdout.trim().split('\n');
      const owner = sandboxOwnerFor(instanceId)!;
      assert.equal(Number(uid), owner.uid);
      assert.notEqual(Number(uid), 0);
      assert.equal(Number(gid), owner.gid);
      assert.equal(groups, String(owner.gid), 'no supplementary groups of the service');
      const environ = await sshExec(target, `cat /proc/${process.pid}/environ`);
      assert.notEqual(environ.code, 0);
      assert.match(environ.stderr, /Permission denied/);
      assert.doesNotMatch(environ.stdout, /the-service-secret/);
      const env = await sshExec(target, 'env');
      assert.doesNotMatch(env.stdout, /the-service-secret|DATABASE_URL/);
      assert.match(env.stdout, /^PATH=.*\/bin:\/usr\/local\/sbin:/m);
    } finally {
      delete process.env.LOCAL_SHELL_SECRET;
    }
  });

  it('still owns its sandbox and its nvidia-smi, and cannot open another instance sandbox', async () => {
    const a = await start();
    const b = await start();
    const own = await sshExec(a.target, 'echo data > file && cat file && nvidia-smi -L');
    assert.equal(own.code, 0, own.stderr);
    assert.match(own.stdout, /^data\nGPU 0: NVIDIA L4/);
    const other = await sshExec(a.target, `ls ${sandboxDirFor(b.instanceId)}`);
    assert.notEqual(other.code, 0);
    assert.match(other.stderr, /Permission denied/);
  });

  it('keeps the service uid when it does not run as root', () => {
    assert.equal(sandboxOwnerFor('any', 1000), undefined);
    assert.deepEqual(sandboxOwnerFor('same'), sandboxOwnerFor('same'));
  });
});
