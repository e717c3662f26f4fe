import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeSSH } from 'node-ssh';
import { LocalInstanceStore } from '../../plugins/local/local-instance-store.js';
import { LocalProvider } from '../../plugins/local/local-provider.js';
import localPlugin from '../../plugins/local/index.js';
import { detectShellIsolation, sandboxDirFor, sandboxShellCommand, SYSTEM_PATH } from '../../plugins/local/sandbox.js';
import { createLogger } from '../../src/logger.js';
import type { InstanceInfo } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, type SshTarget } from '../../src/providers/ssh-probe.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { makeLocalHarness, type LocalHarness } from './local-harness.js';
import { sandboxUidOptions } from '../helpers/sandbox-uids.js';
import { waitFor } from '../helpers/wait.js';

const DB_PORT = Number(new URL(testDatabaseUrl).port || 3306);

async function waitRunning(provider: LocalProvider, instanceId: string): Promise<NonNullable<InstanceInfo['ssh']>> {
  return waitFor(
    async () => {
      const info = await provider.get(instanceId);
      return info.state === 'running' && info.ssh;
    },
    { throws: true, what: `instance ${instanceId} to start` },
  );
}

/** A renter-side TCP or Unix-socket connect with node; prints `connected` or the error code. */
function nodeConnect(target: string): string {
  const script = `require('net').connect(${target}).on('connect',()=>{console.log('connected');process.exit(0)}).on('error',(e)=>{console.log(e.code);process.exit(1)})`;
  return `${process.execPath} -e "${script}"`;
}

/** The real uids of every process on the host but zombies, from /proc. */
function processUids(): number[] {
  const uids: number[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const m = /^Uid:\s+(\d+)/m.exec(status);
      if (m && !/^State:\s+Z/m.test(status)) uids.push(Number(m[1]));
    } catch {
      // The process ended while we looked.
    }
  }
  return uids;
}

// The uid scheme before allocation, to find two ids that used to share a uid.
const hashedUid = (id: string) => 200_000 + (createHash('sha256').update(id).digest().readUInt32BE(0) % 100_000);

function idsThatSharedAUid(): [string, string] {
  const seen = new Map<number, string>();
  for (;;) {
    const id = randomUUID();
    const other = seen.get(hashedUid(id));
    if (other) return [other, id];
    seen.set(hashedUid(id), id);
  }
}

describe('local provider shells when the service runs as root', () => {
  let h: LocalHarness;
  const keys = generateDeploymentKeyPair('local-isolation');
  before(async () => {
    h = await makeLocalHarness();
  });
  after(() => h.cleanup());

  async function start(provider: LocalProvider = h.provider): Promise<{ instanceId: string; target: SshTarget }> {
    const res = await provider.create(h.label(), h.offer('instant'), keys.publicKey);
    assert.equal(res.kind, 'created');
    const instanceId = (res as { instanceId: string }).instanceId;
    return { instanceId, target: { ...(await waitRunning(provider, instanceId)), privateKey: keys.privateKey } };
  }

  /** An instance row with a chosen id, as the provider's create would write it. */
  async function startWithId(id: string): Promise<{ instanceId: string; target: SshTarget }> {
    const now = new Date();
    await new LocalInstanceStore(h.ds).insertOnce({
      id,
      label: h.label(),
      offerKey: 'instant',
      gpuName: 'NVIDIA L4',
      gpuCount: 1,
      vramGb: 24,
      publicKey: keys.publicKey,
      hostKey: generateDeploymentKeyPair('local-host-key').privateKey,
      state: 'pending',
      outcome: 'running',
      sshPort: null,
      sandboxDir: sandboxDirFor(id),
      sandboxUid: null,
      createdAt: now,
      runningAt: now,
      destroyedAt: null,
    });
    return { instanceId: id, target: { ...(await waitRunning(h.provider, id)), privateKey: keys.privateKey } };
  }

  async function uidOf(target: SshTarget): Promise<number> {
    const r = await sshExec(target, 'id -u');
    assert.equal(r.code, 0, r.stderr);
    return Number(r.stdout.trim());
  }

  async function recordedUid(instanceId: string): Promise<number | null> {
    const [row] = await h.ds.query('SELECT sandbox_uid FROM local_provider_instances WHERE id = ?', [instanceId]);
    return row.sandbox_uid;
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
      const owner = await recordedUid(instanceId);
      assert.equal(Number(uid), owner);
      assert.ok(Number(uid) >= 200_000);
      assert.equal(Number(gid), owner);
      assert.equal(groups, String(owner), 'no supplementary groups of the service');
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
    const own = await sshExec(a.target, 'echo data > file && cat file && nvidia-smi -L && pwd');
    assert.equal(own.code, 0, own.stderr);
    assert.equal(
      own.stdout,
      `data\nGPU 0: NVIDIA L4 (UUID: ${own.stdout.split('UUID: ')[1]?.split(')')[0]})\n${sandboxDirFor(a.instanceId)}\n`,
    );
    const other = await sshExec(a.target, `ls ${sandboxDirFor(b.instanceId)}`);
    assert.notEqual(other.code, 0);
  });

  describe('network', () => {
    it('cannot open a TCP connection to the database port of this host', async () => {
      const { target } = await start();
      const bash = await sshExec(target, `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${DB_PORT}' && echo connected`);
      assert.doesNotMatch(bash.stdout, /connected/);
      assert.notEqual(bash.code, 0);
      const node = await sshExec(target, nodeConnect(`${DB_PORT},'127.0.0.1'`));
      assert.notEqual(node.stdout.trim(), 'connected');
      assert.match(node.stdout, /ECONNREFUSED|ENETUNREACH/);
    });

    it("cannot reach another instance's SSH port", async () => {
      const a = await start();
      const b = await start();
      const r = await sshExec(
        a.target,
        `${nodeConnect(`${b.target.port},'127.0.0.1'`)}; bash -c 'exec 3<>/dev/tcp/127.0.0.1/${b.target.port}' && echo bash-connected`,
      );
      assert.doesNotMatch(r.stdout, /^connected|bash-connected/m);
    });

    it("cannot reach the database through its Unix socket, and /run and /tmp are the shell's own", async () => {
      const [{ socket }] = await h.ds.query('SELECT @@socket AS socket');
      const { target } = await start();
      const r = await sshExec(target, `${nodeConnect(`{path:'${socket}'}`)}; ls -A /run /tmp`);
      assert.match(r.stdout, /^ENOENT$/m);
      assert.doesNotMatch(r.stdout, /mysqld|postgresql|local-provider-test/);
    });

    it('has a loopback of its own for servers it runs itself', async () => {
      const { target } = await start();
      const script = `const n=require('net');const s=n.createServer((c)=>c.end('pong')).listen(0,'127.0.0.1',()=>{n.connect(s.address().port,'127.0.0.1').on('data',(d)=>{console.log(String(d));process.exit(0)})})`;
      const r = await sshExec(target, `${process.execPath} -e "${script}"`);
      assert.equal(r.stdout.trim(), 'pong', r.stderr);
    });
  });

  describe('uids', () => {
    it('takes uids only from its configured block (LOCAL_PROVIDER_SANDBOX_UID_FIRST and _COUNT), and says when the block is full', async () => {
      // A uid at the top of this process's own uids (other providers of the process allocate from
      // the bottom), so no other test process or run beside this one uses it.
      const own = sandboxUidOptions();
      const first = Number(own.SANDBOX_UID_FIRST) + Number(own.SANDBOX_UID_COUNT) - 1 - Math.floor(Math.random() * 500);
      const provider = (await localPlugin.create(
        localPlugin.validateOptions({
          INVENTORY: h.inventoryPath,
          SANDBOX_UID_FIRST: String(first),
          SANDBOX_UID_COUNT: '1',
        }),
        h.deps,
      )) as LocalProvider;
      try {
        const a = await start(provider);
        assert.equal(await recordedUid(a.instanceId), first);
        assert.equal(await uidOf(a.target), first);
        const res = await provider.create(h.label(), h.offer('instant'), keys.publicKey);
        assert.equal(res.kind, 'created');
        const b = (res as { instanceId: string }).instanceId;
        // Its machine cannot start: the one uid of the block is a's.
        await assert.rejects(
          () => waitRunning(provider, b),
          new RegExp(`all sandbox uids ${first}-${first} are taken`),
        );
        assert.equal(await recordedUid(b), null);
      } finally {
        await provider.close();
      }
    });

    it('gives two instances whose ids once shared a uid different uids, and neither reads the files of the other', async () => {
      const [idA, idB] = idsThatSharedAUid();
      const a = await startWithId(idA);
      const b = await startWithId(idB);
      assert.notEqual(await uidOf(a.target), await uidOf(b.target));
      // A process of b keeps its home open: with one uid, a could walk in through /proc.
      const write = await sshExec(b.target, 'echo private > note && sleep 30 </dev/null >/dev/null 2>&1 & echo $!');
      const pid = write.stdout.trim();
      assert.match(pid, /^\d+$/, write.stderr);
      const read = await sshExec(a.target, `cat ${sandboxDirFor(idB)}/note; cat /proc/${pid}/cwd/note`);
      assert.doesNotMatch(read.stdout, /private/);
      assert.match(read.stderr, /Permission denied/);
    });

    it('gives every instance started at once, in two processes, a uid of its own', async () => {
      const second = await h.newProvider();
      const ids = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const res = await h.provider.create(h.label(), h.offer('instant'), keys.publicKey);
          return (res as { instanceId: string }).instanceId;
        }),
      );
      // Both processes race to start each machine.
      await Promise.all(ids.flatMap((id) => [waitRunning(h.provider, id), waitRunning(second, id)]));
      const uids = await Promise.all(ids.map(recordedUid));
      assert.ok(uids.every((u) => typeof u === 'number'));
      assert.equal(new Set(uids).size, ids.length);
      const [row] = await h.ds.query(
        `SELECT COUNT(*) AS n FROM local_provider_instances WHERE state <> 'destroyed' AND sandbox_uid IS NOT NULL GROUP BY sandbox_uid ORDER BY n DESC LIMIT 1`,
      );
      assert.equal(Number(row.n), 1);
    });

    it('keeps an instance uid when another process brings its machine back', async () => {
      const first = await h.newProvider();
      const a = await start(first);
      const uid = await uidOf(a.target);
      await sshExec(a.target, 'echo kept > mine');
      await first.close();
      const second = await h.newProvider();
      const back = { ...(await waitRunning(second, a.instanceId)), privateKey: keys.privateKey };
      assert.equal(await uidOf(back), uid);
      const r = await sshExec(back, 'cat mine && echo more >> mine && nvidia-smi -L');
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^kept\nGPU 0: NVIDIA L4/);
    });

    it('frees the uid on destroy only after killing every process of it, even one that left its process group', async () => {
      const a = await start();
      const uid = await uidOf(a.target);
      const bg = await sshExec(a.target, 'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started');
      assert.equal(bg.stdout, 'started\n');
      assert.ok(processUids().includes(uid), 'the escaped process runs');
      await h.provider.destroy(a.instanceId);
      assert.ok(!processUids().includes(uid), 'nothing runs under the uid any more');
      assert.equal(await recordedUid(a.instanceId), null);
      const c = await start();
      assert.equal(await uidOf(c.target), uid, 'the lowest free uid is taken again');
    });

    it('a connection opened before another process destroyed the instance starts no more commands', async () => {
      const a = await start();
      const ssh = new NodeSSH();
      await ssh.connect({
        host: a.target.host,
        port: a.target.port,
        username: a.target.user,
        privateKey: keys.privateKey,
      });
      ssh.connection?.on('error', () => undefined);
      try {
        assert.equal((await ssh.execCommand('id -u')).code, 0);
        const other = await h.newProvider();
        await other.destroy(a.instanceId);
        const after = await ssh
          .execCommand('echo ran')
          .catch((err: Error) => ({ stdout: '', code: null, stderr: err.message }));
        assert.notEqual(after.stdout, 'ran');
        assert.notEqual(after.code, 0);
      } finally {
        ssh.dispose();
      }
    });

    it('a repair never writes through a link the renter put in its home', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'local-victim-'));
      const victim = join(dir, 'victim');
      await writeFile(victim, 'original\n', { mode: 0o644 });
      try {
        const first = await h.newProvider();
        const a = await start(first);
        await sshExec(
          a.target,
          `rm -f bin/nvidia-smi; ln -s ${victim} bin/nvidia-smi; mv bin bin.old; mkdir bin; ln -s ${victim} bin/nvidia-smi`,
        );
        await first.close();
        const second = await h.newProvider();
        const back = { ...(await waitRunning(second, a.instanceId)), privateKey: keys.privateKey };
        assert.equal(await readFile(victim, 'utf8'), 'original\n');
        assert.equal((await stat(victim)).uid, 0);
        const r = await sshExec(back, 'nvidia-smi -L');
        assert.match(r.stdout, /^GPU 0: NVIDIA L4/, r.stderr);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });
});

describe('local shell isolation when the service is not root', () => {
  const nobody = { uid: 65534, gid: 65534 };

  it('runs the shell in namespaces of an unprivileged user: its own uid, no host TCP, no host sockets', async () => {
    const isolation = detectShellIsolation(nobody);
    assert.equal(isolation.mode, 'user', JSON.stringify(isolation));
    const dir = await mkdtemp(join(tmpdir(), 'local-userns-'));
    await chown(dir, nobody.uid, nobody.gid);
    try {
      const cmd = sandboxShellCommand(isolation, dir, undefined, [
        '-c',
        `id -u; grep CapEff /proc/self/status; bash -c 'exec 3<>/dev/tcp/127.0.0.1/${DB_PORT}' 2>/dev/null && echo connected; ls -A /run; pwd`,
      ]);
      const r = spawnSync(cmd.file, cmd.args, { ...nobody, cwd: dir, env: { PATH: SYSTEM_PATH }, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const [uid, caps, ...rest] = r.stdout.trim().split('\n');
      assert.equal(uid, '65534');
      assert.match(caps, /CapEff:\s+0+$/);
      assert.doesNotMatch(rest.join('\n'), /connected|mysqld/);
      assert.equal(rest.at(-1), dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('finds no isolation without the util-linux tools', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'local-no-tools-'));
    try {
      const isolation = detectShellIsolation({ ...nobody, toolDirs: [empty] });
      assert.equal(isolation.mode, 'none');
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it('says once, at start, that shells share the host network when there is no isolation', async () => {
    const h = await makeLocalHarness();
    try {
      const lines: string[] = [];
      const logger = createLogger('info', { write: (l: string) => void lines.push(l) });
      const options = localPlugin.validateOptions({ INVENTORY: h.inventoryPath, ...sandboxUidOptions() });
      const provider = new LocalProvider(
        options,
        { ...h.deps, logger },
        { mode: 'none', reason: 'util-linux `unshare` was not found' },
      );
      await provider.listOffers();
      await provider.close();
      const warnings = lines.map((l) => JSON.parse(l)).filter((l) => l.level === 'warn');
      assert.equal(warnings.length, 1);
      assert.match(warnings[0].msg, /share this host's network.*development only/);
      assert.equal(warnings[0].reason, 'util-linux `unshare` was not found');
    } finally {
      await h.cleanup();
    }
  });
});
