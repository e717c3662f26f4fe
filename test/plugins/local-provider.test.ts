import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { NodeSSH } from 'node-ssh';
import localPlugin from '../../plugins/local/index.js';
import { LocalProvider } from '../../plugins/local/local-provider.js';
import { sandboxDirFor } from '../../plugins/local/sandbox.js';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, sshProbe, type SshTarget } from '../../src/providers/ssh-probe.js';
import { testDataSource } from '../helpers/db.js';
import { makeLocalHarness, TEST_OFFERS, type LocalHarness } from './local-harness.js';
import { runProviderContract, waitForRunning } from './provider-contract.js';
import { waitFor } from '../helpers/wait.js';
import { sandboxUidOptions } from '../helpers/sandbox-uids.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

runProviderContract('local', async () => {
  const h = await makeLocalHarness();
  return {
    provider: h.provider,
    labelPrefix: h.labelPrefix,
    offer: h.offer('h100-1x'),
    runningTimeoutMs: 3000,
    cleanup: h.cleanup,
  };
});

/** node-ssh stops listening for errors once connected; a server cutting the socket later must not crash the run. */
async function connectSsh(
  target: SshTarget,
  extra: { hostVerifier?: (key: Buffer) => boolean } = {},
): Promise<NodeSSH> {
  const ssh = new NodeSSH();
  await ssh.connect({
    host: target.host,
    port: target.port,
    username: target.user,
    privateKey: target.privateKey,
    readyTimeout: 3000,
    ...extra,
  });
  ssh.connection?.on('error', () => undefined);
  return ssh;
}

describe(LocalProvider.name, () => {
  let h: LocalHarness;
  const keys = generateDeploymentKeyPair('local-test');

  async function createRunning(offerKey = 'h100-1x', provider = h.provider) {
    const label = h.label();
    const res = await provider.create(label, h.offer(offerKey), keys.publicKey);
    assert.equal(res.kind, 'created');
    const instanceId = (res as { instanceId: string }).instanceId;
    const info = await waitForRunning(provider, instanceId, 3000);
    const target: SshTarget = { ...info.ssh, privateKey: keys.privateKey };
    return { label, instanceId, info, target };
  }

  beforeEach(async () => {
    h = await makeLocalHarness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  describe('create modes', () => {
    it('ok: records a pending instance that later runs', async () => {
      const label = h.label();
      const res = await h.provider.create(label, h.offer('h100-1x'), keys.publicKey);
      assert.equal(res.kind, 'created');
      const id = (res as { instanceId: string }).instanceId;
      const info = await h.provider.get(id);
      assert.equal(info.state, 'pending');
      assert.equal(info.providerState, 'provisioning');
      assert.equal(info.ssh, undefined);
      const rows = await h.ds.query(
        'SELECT label, offer_key, gpu_name, gpu_count, vram_gb, state FROM local_provider_instances WHERE id = ?',
        [id],
      );
      assert.deepEqual(rows, [
        { label, offer_key: 'h100-1x', gpu_name: 'NVIDIA H100 SXM', gpu_count: 1, vram_gb: 80, state: 'pending' },
      ]);
      await waitForRunning(h.provider, id);
    });

    it('unavailable: refuses and records nothing', async () => {
      const label = h.label();
      const res = await h.provider.create(label, h.offer('unavailable'), keys.publicKey);
      assert.equal(res.kind, 'unavailable');
      assert.equal(await h.provider.findByLabel(label), null);
    });

    it('an offer that is sold out or unknown is unavailable', async () => {
      assert.equal((await h.provider.create(h.label(), h.offer('sold-out'), keys.publicKey)).kind, 'unavailable');
      assert.equal((await h.provider.create(h.label(), h.offer('no-such-offer'), keys.publicKey)).kind, 'unavailable');
      assert.ok(!(await h.provider.listOffers()).some((o) => o.key === 'sold-out'));
    });

    it('ambiguous-created: errors, yet the instance exists under its label and a retry returns it', async () => {
      const label = h.label();
      const res = await h.provider.create(label, h.offer('ambiguous-created'), keys.publicKey);
      assert.equal(res.kind, 'ambiguous');
      const found = await h.provider.findByLabel(label);
      assert.ok(found);
      assert.equal(found.label, label);
      const retry = await h.provider.create(label, h.offer('ambiguous-created'), keys.publicKey);
      assert.deepEqual(retry, { kind: 'created', instanceId: found.instanceId });
      await waitForRunning(h.provider, found.instanceId);
    });

    it('ambiguous-none: errors and nothing exists', async () => {
      const label = h.label();
      const res = await h.provider.create(label, h.offer('ambiguous-none'), keys.publicKey);
      assert.equal(res.kind, 'ambiguous');
      assert.equal(await h.provider.findByLabel(label), null);
      assert.equal((await h.provider.listInstances()).length, 0);
    });

    it('fail: the instance is created, then fails without ever serving SSH', async () => {
      const label = h.label();
      const res = await h.provider.create(label, h.offer('fail'), keys.publicKey);
      assert.equal(res.kind, 'created');
      const id = (res as { instanceId: string }).instanceId;
      assert.equal((await h.provider.get(id)).state, 'pending');
      const failed = await waitFor(
        async () => {
          const info = await h.provider.get(id);
          return info.state === 'failed' ? info : undefined;
        },
        { timeoutMs: 5000, what: 'failure' },
      );
      assert.equal(failed.providerState, 'error');
      assert.equal(failed.ssh, undefined);
      assert.equal((await h.provider.findByLabel(label))?.state, 'failed');
      await h.provider.destroy(id);
      assert.equal((await h.provider.get(id)).state, 'gone');
    });

    it('one label never yields two instances, even when creates race', async () => {
      const label = h.label();
      const results = await Promise.all(
        [1, 2, 3, 4].map(() => h.provider.create(label, h.offer('h100-1x'), keys.publicKey)),
      );
      const ids = new Set(results.map((r) => (r as { instanceId: string }).instanceId));
      assert.equal(ids.size, 1);
      const [{ n }] = await h.ds.query('SELECT COUNT(*) AS n FROM local_provider_instances WHERE label = ?', [label]);
      assert.equal(Number(n), 1);
    });

    it('rejects a malformed public key instead of creating a machine nobody can enter', async () => {
      await assert.rejects(h.provider.create(h.label(), h.offer('h100-1x'), 'ssh-ed25519 not-a-key'), /public key/);
      await assert.rejects(h.provider.create(h.label(), h.offer('h100-1x'), keys.privateKey), /public key/);
    });
  });

  describe('provisioning time', () => {
    it('turns running exactly provisionSeconds after create, by the injected clock', async () => {
      const clock = new ManualClock(new Date('2030-01-01T00:00:00.000Z'));
      const p = await h.newProvider({ clock });
      const res = await p.create(h.label(), h.offer('h100-1x'), keys.publicKey);
      const id = (res as { instanceId: string }).instanceId;
      clock.advance(199);
      assert.equal((await p.get(id)).state, 'pending');
      clock.advance(1);
      const info = await p.get(id);
      assert.equal(info.state, 'running');
      assert.ok(info.ssh);
      assert.equal((await sshProbe({ ...info.ssh, privateKey: keys.privateKey })).ok, true);
    });

    it('boots the SSH server when provisioning ends, without being polled', async () => {
      const res = await h.provider.create(h.label(), h.offer('h100-1x'), keys.publicKey);
      const id = (res as { instanceId: string }).instanceId;
      const [{ port }] = await waitFor(
        async () => {
          const rows: { port: number | null }[] = await h.ds.query(
            'SELECT ssh_port AS port FROM local_provider_instances WHERE id = ?',
            [id],
          );
          return rows[0]?.port ? rows : undefined;
        },
        { timeoutMs: 5000, what: 'a port to be recorded' },
      );
      assert.equal(
        (await sshProbe({ host: '127.0.0.1', port: Number(port), user: 'gpu', privateKey: keys.privateKey })).ok,
        true,
      );
    });

    it('provisionSeconds 0 runs at once', async () => {
      const res = await h.provider.create(h.label(), h.offer('instant'), keys.publicKey);
      const info = await h.provider.get((res as { instanceId: string }).instanceId);
      assert.equal(info.state, 'running');
      assert.ok(info.ssh);
    });
  });

  describe('SSH endpoint', () => {
    it('lets in only the instance key as user gpu', async () => {
      const { target } = await createRunning();
      assert.equal(target.host, '127.0.0.1');
      assert.equal(target.user, 'gpu');
      assert.deepEqual(await sshProbe(target), { ok: true });
      const stranger = generateDeploymentKeyPair('stranger');
      const other = await sshProbe({ ...target, privateKey: stranger.privateKey });
      assert.equal(other.ok, false);
      assert.equal((other as { reason: string }).reason, 'auth');
      const root = await sshProbe({ ...target, user: 'root' });
      assert.equal((root as { reason: string }).reason, 'auth');
    });

    it('refuses password logins', async () => {
      const { target } = await createRunning();
      const ssh = new NodeSSH();
      await assert.rejects(
        ssh.connect({ host: target.host, port: target.port, username: 'gpu', password: 'gpu', readyTimeout: 3000 }),
        /authentication methods failed/,
      );
      ssh.dispose();
    });

    it('answers nvidia-smi with the simulated GPUs', async () => {
      const { target } = await createRunning('a100-2x');
      const list = await sshExec(target, 'nvidia-smi -L');
      assert.equal(list.code, 0);
      const lines = list.stdout.trim().split('\n');
      assert.equal(lines.length, 2);
      assert.match(
        lines[0],
        /^GPU 0: NVIDIA A100 80GB \(UUID: GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\)$/,
      );
      assert.match(lines[1], /^GPU 1: NVIDIA A100 80GB /);

      const csv = await sshExec(target, 'nvidia-smi --query-gpu=name,memory.total --format=csv');
      assert.equal(csv.stdout, 'name, memory.total [MiB]\nNVIDIA A100 80GB, 81559 MiB\nNVIDIA A100 80GB, 81559 MiB\n');
      const bare = await sshExec(target, 'nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits');
      assert.equal(bare.stdout, '0, 81559\n1, 81559\n');

      const table = await sshExec(target, 'nvidia-smi');
      assert.equal(table.code, 0);
      assert.match(table.stdout, /NVIDIA-SMI 550\.\d+\.\d+ +Driver Version: 550\.\d+\.\d+ +CUDA Version: 12\.4/);
      assert.equal(table.stdout.match(/NVIDIA A100 80GB/g)?.length, 2);
      assert.match(table.stdout, /0MiB \/ +81559MiB/);

      const bad = await sshExec(target, 'nvidia-smi --query-gpu=bogus --format=csv');
      assert.notEqual(bad.code, 0);
      assert.match(bad.stdout, /Field "bogus" is not a valid field to query/);
    });

    it('runs commands with /bin/sh in the sandbox with a scrubbed environment', async () => {
      const { target, instanceId } = await createRunning();
      process.env.LOCAL_PROVIDER_TEST_SECRET = 'must-not-leak';
      try {
        const out = await sshExec(target, 'pwd; echo "$HOME"; echo "$USER"; command -v nvidia-smi; env');
        const [pwd, home, user, nvsmi] = out.stdout.split('\n');
        const dir = sandboxDirFor(instanceId);
        assert.equal(pwd, dir);
        assert.equal(home, dir);
        assert.equal(user, 'gpu');
        assert.equal(nvsmi, `${dir}/bin/nvidia-smi`);
        assert.doesNotMatch(out.stdout, /must-not-leak|DATABASE_URL/);
      } finally {
        delete process.env.LOCAL_PROVIDER_TEST_SECRET;
      }
    });

    it('propagates exit codes, stderr, stdin and signals', async () => {
      const { target } = await createRunning();
      const three = await sshExec(target, 'echo out; echo err >&2; exit 3');
      assert.deepEqual([three.code, three.stdout, three.stderr], [3, 'out\n', 'err\n']);
      assert.equal((await sshExec(target, 'false')).code, 1);
      assert.equal((await sshExec(target, 'no-such-command-here')).code, 127);
      const killed = await sshExec(target, 'kill -9 $$');
      assert.equal(killed.code, null);
      assert.equal(killed.signal, 'SIGKILL');

      const ssh = await connectSsh(target);
      try {
        const piped = await ssh.execCommand('tr a-z A-Z', { stdin: 'hello\n' });
        assert.equal(piped.stdout, 'HELLO');
      } finally {
        ssh.dispose();
      }
    });

    it('serves a minimal shell without a pty', async () => {
      const { target } = await createRunning();
      const ssh = await connectSsh(target);
      try {
        const channel = await ssh.requestShell(false);
        let out = '';
        channel.on('data', (d: Buffer) => (out += d.toString()));
        const code = await new Promise<number>((resolve) => {
          channel.on('exit', (c: number) => resolve(c));
          channel.end('echo from-shell; nvidia-smi -L; exit 5\n');
        });
        assert.equal(code, 5);
        assert.match(out, /from-shell\nGPU 0: NVIDIA H100 SXM/);
      } finally {
        ssh.dispose();
      }
    });
  });

  describe('destroy', () => {
    it('closes live connections, kills running commands and wipes the sandbox', async () => {
      const { instanceId, target } = await createRunning();
      await sshExec(target, 'echo data > file.txt');
      const dir = sandboxDirFor(instanceId);
      assert.ok(existsSync(`${dir}/file.txt`));
      const ssh = await connectSsh(target);
      const long = ssh.execCommand('touch long-started; sleep 30; echo finished').catch((err: Error) => err);
      await waitFor(() => existsSync(`${dir}/long-started`), { what: 'the long command to run' });
      const started = Date.now();
      await h.provider.destroy(instanceId);
      const outcome = await long;
      assert.ok(Date.now() - started < 5000);
      assert.ok(outcome instanceof Error || !outcome.stdout.includes('finished'));
      ssh.dispose();
      assert.equal(existsSync(dir), false);
      assert.equal((await sshProbe(target, { timeoutMs: 1000 })).ok, false);
      const [row] = await h.ds.query('SELECT state, destroyed_at FROM local_provider_instances WHERE id = ?', [
        instanceId,
      ]);
      assert.equal(row.state, 'destroyed');
      assert.ok(row.destroyed_at instanceof Date);
    });

    it('a destroyed label stays taken: create returns the destroyed instance rather than a new one', async () => {
      const { instanceId, label } = await createRunning();
      await h.provider.destroy(instanceId);
      const again = await h.provider.create(label, h.offer('h100-1x'), keys.publicKey);
      assert.deepEqual(again, { kind: 'created', instanceId });
      assert.equal((await h.provider.get(instanceId)).state, 'gone');
    });

    it('destroying a pending instance stops it from ever booting', async () => {
      const pending = async () =>
        ((await h.provider.create(h.label(), h.offer('h100-1x'), keys.publicKey)) as { instanceId: string }).instanceId;
      const sshPortOf = async (instanceId: string) =>
        (await h.ds.query('SELECT ssh_port FROM local_provider_instances WHERE id = ?', [instanceId]))[0].ssh_port;
      const id = await pending();
      await h.provider.destroy(id);
      // Made after it with the same provisioning time and booted by its own timer (nothing reads it):
      // its boot comes after the one the destroyed instance would have had.
      const later = await pending();
      await waitFor(async () => (await sshPortOf(later)) !== null, { what: 'the later instance to boot' });
      assert.equal((await h.provider.get(id)).state, 'gone');
      assert.equal(await sshPortOf(id), null);
    });

    it('destroy: ignore reports success while the instance keeps running, until the inventory says ok', async () => {
      const { instanceId, target, label } = await createRunning('destroy-ignore');
      await h.provider.destroy(instanceId);
      assert.equal((await h.provider.get(instanceId)).state, 'running');
      assert.equal((await h.provider.findByLabel(label))?.instanceId, instanceId);
      assert.equal((await sshProbe(target)).ok, true);

      await h.writeInventory(TEST_OFFERS.map((o) => ({ ...o, destroy: 'ok' })));
      await h.provider.destroy(instanceId);
      assert.equal((await h.provider.get(instanceId)).state, 'gone');
      assert.equal((await sshProbe(target, { timeoutMs: 1000 })).ok, false);
    });

    it('destroy: ghost reports the instance gone while its SSH server still lets the key in', async () => {
      const { instanceId, target, label } = await createRunning('destroy-ghost');
      await h.provider.destroy(instanceId);
      assert.equal((await h.provider.get(instanceId)).state, 'gone');
      assert.equal(await h.provider.findByLabel(label), null);
      assert.ok(!(await h.provider.listInstances()).some((i) => i.instanceId === instanceId));
      assert.equal((await sshExec(target, 'echo still-here')).stdout, 'still-here\n');

      await h.writeInventory(TEST_OFFERS.map((o) => ({ ...o, destroy: 'ok' })));
      await h.provider.destroy(instanceId);
      assert.equal((await sshProbe(target, { timeoutMs: 1000 })).ok, false);
      assert.equal(existsSync(sandboxDirFor(instanceId)), false);
    });

    it('a destroy by another process stops this process from letting anyone in', async () => {
      const { instanceId, target } = await createRunning();
      const other = await h.newProvider();
      await other.destroy(instanceId);
      assert.equal((await sshProbe(target, { timeoutMs: 1000 })).ok, false);
      await waitFor(
        async () => {
          const p = await sshProbe(target, { timeoutMs: 1000 });
          return !p.ok && p.reason === 'refused' ? p : undefined;
        },
        { timeoutMs: 5000, what: 'the stale server to close' },
      );
    });
  });

  describe('restarts', () => {
    it('a new process answers findByLabel/get and serves SSH again on the same port, with the same disk', async () => {
      const { instanceId, label, target } = await createRunning();
      await sshExec(target, 'echo persisted > note.txt');
      await h.provider.close();
      assert.equal((await sshProbe(target, { timeoutMs: 1000 })).ok, false);

      const restarted = await h.newProvider();
      const found = await restarted.findByLabel(label);
      assert.equal(found?.instanceId, instanceId);
      assert.equal(found?.state, 'running');
      const info = await restarted.get(instanceId);
      assert.deepEqual(info.ssh, { host: target.host, port: target.port, user: 'gpu' });
      assert.equal((await sshExec(target, 'cat note.txt')).stdout, 'persisted\n');
      assert.ok((await restarted.listInstances()).some((i) => i.instanceId === instanceId));
    });

    it('an instance still provisioning when its creator stopped boots under the next process', async () => {
      const res = await h.provider.create(h.label(), h.offer('h100-1x'), keys.publicKey);
      const id = (res as { instanceId: string }).instanceId;
      await h.provider.close();
      const restarted = await h.newProvider();
      const info = await waitForRunning(restarted, id);
      assert.equal((await sshExec({ ...info.ssh, privateKey: keys.privateKey }, 'echo up')).stdout, 'up\n');
    });

    it('two live processes do not both serve one instance', async () => {
      const { instanceId, target } = await createRunning();
      const second = await h.newProvider();
      const seen = await second.get(instanceId);
      assert.equal(seen.ssh?.port, target.port);
      const [row] = await h.ds.query('SELECT ssh_port FROM local_provider_instances WHERE id = ?', [instanceId]);
      assert.equal(Number(row.ssh_port), target.port);
    });

    it('reports the same host key after a restart', async () => {
      const { target } = await createRunning();
      const hostKey = async () => {
        let seen = '';
        const ssh = await connectSsh(target, {
          hostVerifier: (key: Buffer) => {
            seen = key.toString('base64');
            return true;
          },
        });
        ssh.dispose();
        return seen;
      };
      const before = await hostKey();
      await h.provider.close();
      const restarted = await h.newProvider();
      await restarted.get((await restarted.listInstances())[0].instanceId);
      assert.equal(await hostKey(), before);
    });
  });

  describe('listing', () => {
    it('lists live instances under the label prefix only', async () => {
      const mine = await createRunning();
      const failed = await h.provider.create(h.label(), h.offer('fail'), keys.publicKey);
      const gone = await createRunning('instant');
      await h.provider.destroy(gone.instanceId);
      const foreign = await h.provider.create(`other-${h.labelPrefix}x`, h.offer('instant'), keys.publicKey);
      try {
        const ids = (await h.provider.listInstances()).map((i) => i.instanceId).sort();
        assert.deepEqual(ids, [mine.instanceId, (failed as { instanceId: string }).instanceId].sort());
      } finally {
        await h.provider.destroy((foreign as { instanceId: string }).instanceId);
      }
    });

    it('treats LIKE wildcards in the prefix literally', async () => {
      const p = await h.newProvider({ labelPrefix: `${h.labelPrefix}_%` });
      await p.create(`${h.labelPrefix}ab-1`, h.offer('h100-1x'), keys.publicKey);
      assert.deepEqual(await p.listInstances(), []);
    });
  });

  describe('plugin loading', () => {
    it('refuses to load in production unless explicitly allowed', async () => {
      const deps = {
        logger: createLogger('silent'),
        clock: new ManualClock(),
        dataSource: await testDataSource(),
        production: true,
        labelPrefix: 'x-',
        drift: IGNORE_DRIFT,
      };
      await assert.rejects(
        async () => localPlugin.create(localPlugin.validateOptions({ ...sandboxUidOptions() }), deps),
        /NODE_ENV=production.*LOCAL_PROVIDER_ALLOW_PRODUCTION=true/,
      );
      const allowed = await localPlugin.create(
        localPlugin.validateOptions({ ALLOW_PRODUCTION: 'true', ...sandboxUidOptions() }),
        deps,
      );
      assert.ok(allowed instanceof LocalProvider);
      await allowed.close?.();
    });

    it('refuses to start on an inventory file it cannot read or parse, naming LOCAL_PROVIDER_INVENTORY', async () => {
      const deps = {
        logger: createLogger('silent'),
        clock: new ManualClock(),
        dataSource: await testDataSource(),
        production: false,
        labelPrefix: 'x-',
        drift: IGNORE_DRIFT,
      };
      await assert.rejects(
        async () =>
          localPlugin.create(
            localPlugin.validateOptions({ INVENTORY: '/nonexistent/inventory.json', ...sandboxUidOptions() }),
            deps,
          ),
        /^Error: LOCAL_PROVIDER_INVENTORY: .*\/nonexistent\/inventory\.json.*cannot be read \(ENOENT\)/,
      );
      const broken = `${h.inventoryPath}.broken.json`;
      await writeFile(broken, '{"offers": [');
      await assert.rejects(
        async () =>
          localPlugin.create(localPlugin.validateOptions({ INVENTORY: broken, ...sandboxUidOptions() }), deps),
        /^Error: LOCAL_PROVIDER_INVENTORY: .*not valid JSON/,
      );
      const good = await localPlugin.create(
        localPlugin.validateOptions({ INVENTORY: h.inventoryPath, ...sandboxUidOptions() }),
        deps,
      );
      await good.close?.();
    });

    it('uses the built-in inventory when none is configured', async () => {
      const p = new LocalProvider(localPlugin.validateOptions({ ...sandboxUidOptions() }), h.deps);
      try {
        const offers = await p.listOffers();
        assert.ok(offers.some((o) => o.key === 'h100-sxm-1x'));
      } finally {
        await p.close();
      }
      assert.ok((await readFile(h.inventoryPath, 'utf8')).includes('h100-1x'));
    });
  });
});
