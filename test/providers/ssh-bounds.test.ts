import assert from 'node:assert/strict';
import { CHECK_COMMAND, checkMachine } from '../../src/modules/rentals/lifecycle/machine-check.js';
import { DestructionVerifier } from '../../src/providers/destruction-verifier.js';
import type { InstanceInfo, Provider } from '../../src/providers/provider.js';
import {
  fingerprintOfKey,
  hostKeyFingerprint,
  SshLoginError,
  sshExec,
  sshProbe,
  type SshTarget,
} from '../../src/providers/ssh-probe.js';
import { generateDeploymentKeyPair, loadSsh2 } from '../../src/providers/ssh-keys.js';
import { HostileSshServer, FLOOD_BYTES, type HostileMode, type HostileOptions } from '../helpers/hostile-ssh.js';
import { waitFor } from '../helpers/wait.js';

const key = generateDeploymentKeyPair('ssh-bounds-test').privateKey;
const MiB = 1024 * 1024;

/** Service-side SSH bounds: whatever the machine does, a login and a command end within their bounds and their output within its cap. */
describe('ssh bounds (a machine its renter controls)', function () {
  this.timeout(60_000);
  const servers: HostileSshServer[] = [];
  const start = async (mode: HostileMode, opts: HostileOptions = {}) => {
    const s = await HostileSshServer.start(mode, opts);
    servers.push(s);
    return s;
  };
  const target = (s: HostileSshServer, hostKey?: string | null): SshTarget => ({
    host: '127.0.0.1',
    port: s.port,
    user: 'root',
    privateKey: key,
    hostKey,
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('cuts a command that never returns at the command bound and closes the connection', async () => {
    const s = await start('hang');
    const t0 = Date.now();
    const res = await sshExec(target(s), 'nvidia-smi -L', { timeoutMs: 5000, commandTimeoutMs: 300 });
    assert.equal(res.cut, 'timeout');
    assert.equal(res.code, null);
    assert.equal(s.execs, 1, 'the command did start');
    assert.ok(Date.now() - t0 < 10_000, 'ended near its bound, not whenever the machine pleased');
    await waitFor(async () => s.open === 0, { timeoutMs: 10_000, what: 'the connection to be closed by the service' });
  });

  it('cuts a login whose server never speaks, or never finishes the handshake, at the connect bound', async () => {
    for (const mode of ['silent', 'stall'] as const) {
      const s = await start(mode);
      const err = await sshExec(target(s), 'true', { timeoutMs: 400 }).then(
        () => assert.fail('logged in to a server that never finished the handshake'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof SshLoginError, String(err));
      assert.equal(err.reason, 'timeout', `${mode}: ${err.message}`);
      const probe = await sshProbe(target(s), { timeoutMs: 400 });
      assert.equal(probe.ok, false);
      assert.equal(!probe.ok && probe.reason, 'timeout', mode);
      await waitFor(async () => s.open === 0, { timeoutMs: 10_000, what: `${mode}: sockets destroyed by the service` });
    }
  });

  for (const stream of ['stdout', 'stderr'] as const) {
    it(`keeps at most the cap of an 800 MB flood on ${stream}, stops reading, and the process stays small`, async () => {
      const s = await start('flood', { floodStream: stream });
      const peakBefore = process.resourceUsage().maxRSS * 1024;
      const res = await sshExec(target(s), 'nvidia-smi -L', { commandTimeoutMs: 30_000, maxOutputBytes: 64 * 1024 });
      assert.equal(res.cut, 'output_cap');
      assert.equal(res[stream].length, 64 * 1024, 'exactly the cap is kept');
      await waitFor(async () => s.open === 0, { timeoutMs: 10_000, what: 'the flooding connection to be closed' });
      // What the machine got out before the service stopped reading: the cap and a window or two, not 800 MB.
      assert.ok(s.bytesSent < 16 * MiB, `the machine wrote ${s.bytesSent} bytes`);
      assert.ok(s.bytesSent < FLOOD_BYTES);
      const grew = process.resourceUsage().maxRSS * 1024 - peakBefore;
      assert.ok(grew < 100 * MiB, `peak RSS grew by ${grew} bytes`);
    });
  }

  it('survives eight floods at once', async () => {
    const floods = await Promise.all(Array.from({ length: 8 }, () => start('flood')));
    const results = await Promise.all(floods.map((s) => sshExec(target(s), 'x', { maxOutputBytes: 16 * 1024 })));
    assert.deepEqual(
      results.map((r) => r.cut),
      Array(8).fill('output_cap'),
    );
    const sent = floods.reduce((n, s) => n + s.bytesSent, 0);
    assert.ok(sent < 8 * 16 * MiB, `the machines wrote ${sent} bytes`);
  });

  it('answers a connection dropped mid-output without an unhandled error', async () => {
    const s = await start('drop');
    const res = await sshExec(target(s), 'nvidia-smi -L');
    assert.equal(res.cut, 'connection_lost');
    assert.equal(res.stdout, 'GPU 0: half a line of outp');
    // The process is still here, and the next command works as before.
    const honest = await start('answer', { stdout: 'fine\n' });
    assert.equal((await sshExec(target(honest), 'echo fine')).stdout, 'fine\n');
  });

  it('reads an honest answer whole, with its exit status and the host key shown', async () => {
    const s = await start('answer', { stdout: 'GPU 0: A\n' });
    const res = await sshExec(target(s), 'nvidia-smi -L');
    assert.deepEqual(
      { ...res },
      { stdout: 'GPU 0: A\n', stderr: '', code: 0, signal: null, cut: null, hostKey: s.hostKeyFingerprint },
    );
  });

  describe('host keys', () => {
    it('fingerprints a key as OpenSSH does (SHA-256 of the blob, unpadded base64)', () => {
      const pair = generateDeploymentKeyPair('fp');
      const blob = Buffer.from(pair.publicKey.split(' ')[1], 'base64');
      assert.equal(fingerprintOfKey(pair.publicKey), hostKeyFingerprint(blob));
      assert.equal(fingerprintOfKey(pair.privateKey), fingerprintOfKey(pair.publicKey));
      assert.match(hostKeyFingerprint(blob), /^SHA256:[A-Za-z0-9+/]{43}$/);
      assert.equal((loadSsh2().utils.parseKey(pair.publicKey) as { type: string }).type, 'ssh-ed25519');
    });

    it('logs in to the pinned key, and refuses a server showing another', async () => {
      const s = await start('answer', { stdout: 'ok\n' });
      assert.equal((await sshExec(target(s, s.hostKeyFingerprint), 'true')).stdout, 'ok\n');
      const other = fingerprintOfKey(generateDeploymentKeyPair('other').publicKey);
      const err = await sshExec(target(s, other), 'true').then(
        () => assert.fail('logged in to a machine with another host key'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof SshLoginError);
      assert.equal(err.reason, 'host_key');
      assert.equal(err.hostKey, s.hostKeyFingerprint);
      assert.equal(s.execs, 1, 'no command reached the other machine');
      const probe = await sshProbe(target(s, other));
      assert.deepEqual(probe.ok ? null : [probe.reason, probe.hostKey], ['host_key', s.hostKeyFingerprint]);
    });
  });

  describe('the machine check', () => {
    const want = { gpus: 1, startupScript: false };

    it('calls a machine whose check hangs, floods or hangs up misbehaving, within the bounds', async () => {
      const cases = [
        ['hang', 'timeout'],
        ['flood', 'output_cap'],
        ['drop', 'connection_lost'],
      ] as const;
      for (const [mode, cut] of cases) {
        const s = await start(mode);
        const check = await checkMachine(target(s), want, 2000, { commandTimeoutMs: 500 });
        assert.equal(check.kind, 'misbehaved', mode);
        assert.equal(check.kind === 'misbehaved' && check.cut, cut, mode);
        assert.equal(check.kind === 'misbehaved' && check.phase, 'checking_gpus');
        assert.equal(check.hostKey, s.hostKeyFingerprint, 'the login got in: its key may be pinned');
      }
    });

    it('passes an honest machine and names its host key; a changed key is not usable', async () => {
      const s = await start('answer', { stdout: 'GPU 0: H100\n__gpr_smi_exit=0\n__gpr_started=0\n' });
      const ran = s.nextExec();
      assert.deepEqual(await checkMachine(target(s), want, 2000), { kind: 'usable', hostKey: s.hostKeyFingerprint });
      assert.equal(await ran, CHECK_COMMAND);
      const pinned = fingerprintOfKey(generateDeploymentKeyPair('pinned').publicKey);
      assert.deepEqual(await checkMachine(target(s, pinned), want, 2000), {
        kind: 'host_key_changed',
        phase: 'waiting_for_ssh',
        pinned,
        seen: s.hostKeyFingerprint,
      });
    });
  });

  describe('the destruction probe', () => {
    const gone = {
      id: 'test',
      get: async (): Promise<InstanceInfo> => ({ instanceId: 'i', label: 'l', state: 'gone' }),
    } as unknown as Provider;

    it('takes another machine answering at the old address for ours being gone, and logs both keys', async () => {
      const s = await start('answer');
      const warned: Record<string, unknown>[] = [];
      const logger = { warn: (o: Record<string, unknown>) => void warned.push(o) };
      const pinned = fingerprintOfKey(generateDeploymentKeyPair('ours').publicKey);
      const check = await new DestructionVerifier().verify(gone, 'i', target(s, pinned), {
        logger: logger as never,
        deploymentId: 'd-1',
      });
      assert.equal(check.verified, true);
      assert.equal(check.sshRefused, true);
      assert.match(check.detail, /another machine has the address/);
      assert.equal(check.evidence?.ssh.outcome, 'host_key_changed');
      assert.deepEqual(
        warned.map((w) => [w.deploymentId, w.pinned, w.seen]),
        [['d-1', pinned, s.hostKeyFingerprint]],
      );
    });

    it('does not verify while our machine still lets the key in, and a silent server costs at most the connect bound', async () => {
      const s = await start('answer');
      const still = await new DestructionVerifier().verify(gone, 'i', target(s, s.hostKeyFingerprint));
      assert.equal(still.verified, false);
      const silent = await start('silent');
      const t0 = Date.now();
      const check = await new DestructionVerifier({ sshTimeoutMs: 300 }).verify(
        gone,
        'i',
        target(silent, s.hostKeyFingerprint),
      );
      assert.equal(check.verified, true);
      assert.match(check.detail, /timeout/);
      assert.ok(Date.now() - t0 < 10_000);
    });
  });
});
