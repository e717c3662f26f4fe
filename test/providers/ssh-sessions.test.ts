import assert from 'node:assert/strict';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { SshLoginError, type SshTarget } from '../../src/providers/ssh-probe.js';
import { SshSessions } from '../../src/providers/ssh-sessions.js';
import { HostileSshServer, type HostileMode } from '../helpers/hostile-ssh.js';
import { waitFor } from '../helpers/wait.js';

const key = generateDeploymentKeyPair('ssh-sessions-test').privateKey;

/** Kept SSH connections: a repeated check logs in once, and every bound and pin holds as on a fresh login. */
describe(SshSessions.name, function () {
  this.timeout(60_000);
  const servers: HostileSshServer[] = [];
  let sut: SshSessions;
  const start = async (mode: HostileMode, stdout = '0\n') => {
    const s = await HostileSshServer.start(mode, { stdout });
    servers.push(s);
    return s;
  };
  const target = (s: HostileSshServer, hostKey?: string | null): SshTarget => ({
    host: '127.0.0.1',
    port: s.port,
    user: 'root',
    privateKey: key,
    hostKey: hostKey === undefined ? s.hostKeyFingerprint : hostKey,
  });
  const bounds = { timeoutMs: 5000, commandTimeoutMs: 2000 };
  beforeEach(() => (sut = new SshSessions()));
  afterEach(async () => {
    sut.close();
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('logs in once for a rental and runs each later command on that connection', async () => {
    const s = await start('answer', '12\n');
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await sut.exec('r1', target(s), 'q', bounds));
    assert.deepEqual(
      runs.map((r) => [r.loggedIn, r.stdout, r.code, r.cut]),
      [
        [true, '12\n', 0, null],
        [false, '12\n', 0, null],
        [false, '12\n', 0, null],
      ],
    );
    assert.equal(s.connections, 1);
    assert.equal(s.execs, 3);
    assert.equal(sut.size, 1);
  });

  it('logs in again when the machine dropped the kept connection, without losing the command', async () => {
    const s = await start('answer');
    await sut.exec('r1', target(s), 'q', bounds);
    s.dropConnections();
    await waitFor(async () => sut.size === 0, { what: 'the dropped connection to be forgotten' });
    const again = await sut.exec('r1', target(s), 'q', bounds);
    assert.equal(again.loggedIn, true);
    assert.equal(again.stdout, '0\n');
    assert.equal(s.connections, 2);
  });

  it('ends the connection of a command cut short, and logs in afresh next time', async () => {
    const s = await start('hang');
    const cut = await sut.exec('r1', target(s), 'q', { ...bounds, commandTimeoutMs: 300 });
    assert.equal(cut.cut, 'timeout');
    assert.equal(sut.size, 0, 'a misbehaving connection is not kept');
    await waitFor(async () => s.open === 0, { what: 'the cut connection to be closed' });
    s.mode = 'answer';
    const next = await sut.exec('r1', target(s), 'q', bounds);
    assert.equal(next.loggedIn, true);
    assert.equal(next.code, 0);
  });

  it('a machine that stops answering on a kept connection costs its command bound, then a login of its own bound', async () => {
    const s = await start('answer');
    await sut.exec('r1', target(s), 'q', bounds);
    s.mode = 'hang';
    const t0 = Date.now();
    const silent = await sut.exec('r1', target(s), 'q', { ...bounds, commandTimeoutMs: 300 });
    assert.equal(silent.cut, 'timeout');
    assert.ok(Date.now() - t0 < 5000);
    s.mode = 'silent';
    const refused = await sut.exec('r1', target(s), 'q', { ...bounds, timeoutMs: 400 }).then(
      () => assert.fail('logged in to a machine that says nothing'),
      (e: unknown) => e,
    );
    assert.ok(refused instanceof SshLoginError && refused.reason === 'timeout', String(refused));
  });

  it('reuses a connection only for the same address and pinned host key', async () => {
    const a = await start('answer');
    await sut.exec('r1', target(a), 'q', bounds);
    const pinnedElsewhere = await sut.exec('r1', target(a, 'SHA256:another-machine'), 'q', bounds).then(
      () => assert.fail('ran on a machine showing another host key'),
      (e: unknown) => e,
    );
    assert.ok(pinnedElsewhere instanceof SshLoginError && pinnedElsewhere.reason === 'host_key');
    const b = await start('answer');
    const moved = await sut.exec('r1', target(b), 'q', bounds);
    assert.equal(moved.loggedIn, true, 'another address is another login');
    assert.equal(b.connections, 1);
  });

  it('keeps at most maxOpen connections, least recently used out first, and closes those of rentals no longer watched', async () => {
    const s = await start('answer');
    const small = new SshSessions({ maxOpen: 2, idleMs: 60_000 });
    try {
      for (const k of ['a', 'b', 'c']) await small.exec(k, target(s), 'q', bounds);
      assert.equal(small.size, 2);
      assert.equal((await small.exec('c', target(s), 'q', bounds)).loggedIn, false);
      assert.equal((await small.exec('a', target(s), 'q', bounds)).loggedIn, true, 'a was the oldest');
      small.retain(new Set(['a']));
      assert.equal(small.size, 1);
      await waitFor(async () => s.open === 1, { what: 'the connections of rentals no longer watched to close' });
    } finally {
      small.close();
    }
  });
});
