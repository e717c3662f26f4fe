import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkedId,
  checkedSshTarget,
  GprUnsafeValueError,
  isSafeHost,
  shellQuote,
  sshArgs,
  sshCommandLine,
} from '../../clients/sdk/src/ssh-target.js';

const ID = '5e1d9c8b-7a6f-4e3d-8c2b-1a0f9e8d7c6b';
const good = { deploymentId: ID, host: 'gpu-7.example.com', port: 22, user: 'root' };

/** The one place the clients check what the service says about SSH access. */
describe('SSH target checks (shared by gpr and gpr-mcp)', () => {
  it('accepts DNS names, IPv4 and IPv6 literals; refuses options, spaces, "@", "%", brackets and numeric names', () => {
    for (const h of [
      'gpu-7.example.com',
      'localhost',
      'a',
      '203.0.113.10',
      '2001:db8::10',
      '::1',
      '::ffff:192.0.2.1',
      'x1.y-2.example',
    ])
      assert.ok(isSafeHost(h), h);
    for (const h of [
      '',
      '-oProxyCommand=x',
      '-host',
      'host-',
      'a b',
      'a\tb',
      'a\nb',
      'root@h',
      'fe80::1%eth0',
      '[::1]',
      'h%h',
      '1.2.3',
      '999.1.1.1',
      '01.2.3.4',
      'a..b',
      '.a',
      'a_b.example',
      `${'a'.repeat(64)}.example`,
      `${'a.'.repeat(127)}com`,
      'ünï.example',
    ]) {
      assert.ok(!isSafeHost(h), JSON.stringify(h));
    }
  });

  it('accepts login names and refuses anything that could be read as an option or a second host', () => {
    for (const user of ['root', 'ubuntu', '_svc', 'a.b-c_d', 'A1', 'u'.repeat(32)])
      assert.equal(checkedSshTarget({ ...good, user }, ID).user, user);
    for (const user of [
      '-oProxyCommand=touch /tmp/x',
      '-l',
      '1root',
      'root@evil',
      'ro ot',
      'root\n',
      '',
      'u'.repeat(33),
      'rööt',
      'root%h',
      42,
      null,
    ]) {
      assert.throws(
        () => checkedSshTarget({ ...good, user }, ID),
        (e: unknown) => e instanceof GprUnsafeValueError && e.field === 'user',
        JSON.stringify(user),
      );
    }
  });

  it('accepts integer ports 1-65535 only', () => {
    assert.equal(checkedSshTarget({ ...good, port: 65535 }, ID).port, 65535);
    for (const port of [0, -22, 65536, 22.5, '22', NaN, Infinity, null]) {
      assert.throws(
        () => checkedSshTarget({ ...good, port }, ID),
        (e: unknown) => e instanceof GprUnsafeValueError && e.field === 'port',
        String(port),
      );
    }
  });

  it('ids are UUIDs, and the reveal must be for the deployment asked about', () => {
    assert.equal(checkedId('rentalId', ID.toUpperCase()), ID);
    for (const id of ['../../x', `${ID}/..`, `${ID}\n`, '', 'x', 7, undefined]) {
      assert.throws(() => checkedId('deploymentId', id), GprUnsafeValueError, JSON.stringify(id));
    }
    assert.throws(() => checkedSshTarget(good, '11111111-2222-4333-8444-555555555555'), /not the deployment asked for/);
    assert.throws(() => checkedSshTarget({ ...good, deploymentId: '../../x' }, ID), /deploymentId "\.\.\/\.\.\/x"/);
  });

  it('the refusal shows the value JSON-quoted and cut short, never raw control characters', () => {
    const err = (() => {
      try {
        checkedSshTarget({ ...good, host: `\u001b]0;owned\u0007${'x'.repeat(200)}` }, ID);
      } catch (e) {
        return e as Error;
      }
    })();
    assert.ok(err);
    assert.doesNotMatch(err.message, /[\u0000-\u001f]/);
    assert.ok(err.message.length < 250, err.message);
  });

  it('ssh arguments end with "--" and user@host; the command line quotes what a shell would split', () => {
    const dir = mkdtempSync(join(tmpdir(), "gpr key's dir "));
    const files = { keyFile: join(dir, `${ID}.key`), knownHostsFile: join(dir, `${ID}.known_hosts`) };
    const target = checkedSshTarget(good, ID);
    const args = sshArgs(target, files, { batch: true });
    assert.deepEqual(args.slice(-2), ['--', 'root@gpu-7.example.com']);
    assert.ok(args.indexOf('BatchMode=yes') < args.indexOf('--'));
    assert.ok(args.includes(`UserKnownHostsFile="${files.knownHostsFile}"`), 'quoted: the path has spaces');
    const line = sshCommandLine(target, files);
    assert.ok(line.startsWith(`ssh -i ${shellQuote(files.keyFile)} -p 22 `), line);
    assert.ok(line.endsWith(' -- root@gpu-7.example.com'), line);
    assert.equal(shellQuote("it's"), `'it'\\''s'`);
    assert.equal(shellQuote('plain/path-1.key'), 'plain/path-1.key');
    // ssh would expand "%d" in a path; such a config directory is refused rather than misread.
    assert.throws(
      () => sshArgs(target, { keyFile: '/home/a%d/k.key', knownHostsFile: '/home/a%d/k.known_hosts' }),
      /XDG_CONFIG_HOME/,
    );
  });
});
