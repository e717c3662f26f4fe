import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildClients, GPR_BIN, run } from './helpers/build.js';
import {
  FAKE_PRIVATE_KEY,
  filesUnder,
  GOOD_DEPLOYMENT_ID,
  GOOD_RENTAL_ID,
  goodAnswers,
  HostileService,
  recordingSsh,
  type HostileAnswers,
} from './helpers/hostile-service.js';

const TOKEN = `gpr_AAAAAAAA.${'B'.repeat(43)}`;

/**
 * `gpr ssh` and `gpr creds` against a compromised service: whatever it returns, nothing it chose
 * runs on this machine and no file lands outside the CLI's own key directory.
 */
describe('gpr ssh / creds against a hostile service', function () {
  this.timeout(60_000);
  const service = new HostileService();

  before(async () => {
    buildClients();
    await service.start();
  });
  after(() => service.stop());
  beforeEach(() => {
    service.answers = goodAnswers();
  });

  /** A scratch root holding the config home (root/home/cfg) and nothing else. */
  function scratch() {
    const root = mkdtempSync(join(tmpdir(), 'gpr-hostile-'));
    const home = join(root, 'home');
    const xdg = join(home, 'cfg');
    mkdirSync(xdg, { recursive: true });
    return { root, home, xdg, keysDir: join(xdg, 'gpr', 'keys') };
  }
  const gpr = (s: { home: string; xdg: string }, args: string[], env: Record<string, string> = {}) =>
    run(GPR_BIN, args, {
      HOME: s.home,
      XDG_CONFIG_HOME: s.xdg,
      GPR_BASE_URL: service.baseUrl,
      GPR_TOKEN: TOKEN,
      GPR_RETRIES: '0',
      ...env,
    });
  const answer = (patch: {
    rental?: Partial<HostileAnswers['rental']>;
    credentials?: Partial<HostileAnswers['credentials']>;
  }) => {
    const a = goodAnswers();
    service.answers = {
      rental: { ...a.rental, ...patch.rental },
      credentials: { ...a.credentials, ...patch.credentials },
    };
  };

  it('a user that is an ssh option ("-oProxyCommand=...") is refused with exit 1: the real ssh never runs it and no key is written', async () => {
    const s = scratch();
    const marker = mkdtempSync(join(tmpdir(), 'gpr-pwned-'));
    answer({ credentials: { user: `-oProxyCommand=touch ${marker}/pwned` } });
    const r = await gpr(s, ['ssh', GOOD_RENTAL_ID, '--', 'true']);
    assert.deepEqual(readdirSync(marker), [], 'the ProxyCommand ran');
    assert.equal(r.code, 1, `exit ${r.code}\n${r.stderr}`);
    assert.match(r.stderr, /^Error UNSAFE_SERVICE_VALUE: The service returned user "-oProxyCommand=touch /m);
    assert.match(r.stderr, /^Next: .*nothing was run or written/m);
    assert.deepEqual(filesUnder(s.root), [], 'nothing written');

    const machine = await gpr(s, ['--json', 'ssh', GOOD_RENTAL_ID, '--', 'true']);
    assert.equal(machine.code, 1);
    const { error } = JSON.parse(machine.stdout);
    assert.equal(error.code, 'UNSAFE_SERVICE_VALUE');
    assert.deepEqual(readdirSync(marker), []);
  });

  it('a deployment id that is a path ("../../x") is refused before any file is written or ssh runs', async () => {
    const s = scratch();
    const ssh = recordingSsh();
    answer({ rental: { deploymentId: '../../x' }, credentials: { deploymentId: '../../x' } });
    const r = await gpr(s, ['ssh', GOOD_RENTAL_ID, '--', 'true'], { GPR_SSH_BIN: ssh.bin });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /UNSAFE_SERVICE_VALUE: The service returned deploymentId "\.\.\/\.\.\/x"/);
    assert.ok(!existsSync(ssh.argvFile), 'ssh ran');
    assert.deepEqual(filesUnder(s.root), [], 'nothing written');
    assert.ok(
      !service.requests.some((q) => q.includes('credentials/reveal') && q.includes('..')),
      'the bad id was not even sent back',
    );

    // The reveal answering for another deployment than the one asked about is refused the same way.
    answer({ credentials: { deploymentId: '../../x' } });
    const other = await gpr(s, ['ssh', GOOD_RENTAL_ID, '--', 'true'], { GPR_SSH_BIN: ssh.bin });
    assert.equal(other.code, 1, other.stderr);
    answer({ credentials: { deploymentId: '11111111-2222-4333-8444-555555555555' } });
    const swapped = await gpr(s, ['ssh', GOOD_RENTAL_ID, '--', 'true'], { GPR_SSH_BIN: ssh.bin });
    assert.equal(swapped.code, 1, swapped.stderr);
    assert.match(swapped.stderr, /not the deployment asked for/);
    assert.ok(!existsSync(ssh.argvFile), 'ssh ran');
    assert.deepEqual(filesUnder(s.root), []);
  });

  const HOSTILE: [string, Parameters<typeof answer>[0]][] = [
    ['host that is an option', { credentials: { host: '-oProxyCommand=touch /tmp/x' } }],
    ['host with a space', { credentials: { host: '203.0.113.10 -oProxyCommand=x' } }],
    ['host with an @', { credentials: { host: 'evil@203.0.113.10' } }],
    ['host with an IPv6 zone', { credentials: { host: 'fe80::1%-oProxyCommand=x' } }],
    ['host with a newline', { credentials: { host: 'a.example\nProxyCommand x' } }],
    ['user with an @', { credentials: { user: 'root@evil.example' } }],
    ['user with a space', { credentials: { user: 'root -oX' } }],
    ['port 0', { credentials: { port: 0 } }],
    ['port 70000', { credentials: { port: 70000 } }],
    ['port as text', { credentials: { port: '22 -oProxyCommand=x' } }],
    ['fractional port', { credentials: { port: 22.5 } }],
    ['rental id that is a path', { rental: { rentalId: '../x' } }],
  ];
  for (const [what, patch] of HOSTILE) {
    it(`refuses a ${what} (exit 1, ssh never runs, nothing written)`, async () => {
      const s = scratch();
      const ssh = recordingSsh();
      answer(patch);
      const r = await gpr(s, ['ssh', GOOD_RENTAL_ID], { GPR_SSH_BIN: ssh.bin });
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /^Error UNSAFE_SERVICE_VALUE/m);
      assert.ok(!existsSync(ssh.argvFile), 'ssh ran');
      assert.deepEqual(filesUnder(s.root), []);
      const creds = await gpr(s, ['--json', 'creds', GOOD_RENTAL_ID]);
      assert.equal(creds.code, 1, creds.stdout);
      assert.equal(JSON.parse(creds.stdout).error.code, 'UNSAFE_SERVICE_VALUE');
      assert.deepEqual(filesUnder(s.root), []);
    });
  }

  it('a normal gpr ssh: options, then "--", then user@host, then the command; key 0600 in its own directory; a planted symlink is replaced, not followed', async () => {
    const s = scratch();
    const ssh = recordingSsh();
    const outside = join(s.root, 'outside.txt');
    writeFileSync(outside, 'keep me\n');
    mkdirSync(s.keysDir, { recursive: true, mode: 0o700 });
    const keyFile = join(s.keysDir, `${GOOD_DEPLOYMENT_ID}.key`);
    symlinkSync(outside, keyFile);

    const r = await gpr(s, ['ssh', GOOD_RENTAL_ID, '--', 'nvidia-smi', '-L'], { GPR_SSH_BIN: ssh.bin });
    assert.equal(r.code, 0, r.stderr);
    const argv = readFileSync(ssh.argvFile, 'utf8').trimEnd().split('\n');
    const dash = argv.indexOf('--');
    assert.deepEqual(argv.slice(dash), ['--', 'root@203.0.113.10', 'nvidia-smi', '-L']);
    assert.deepEqual(argv.slice(0, 4), ['-i', keyFile, '-p', '22']);
    assert.ok(
      argv.includes(`UserKnownHostsFile="${join(s.keysDir, `${GOOD_DEPLOYMENT_ID}.known_hosts`)}"`),
      argv.join(' '),
    );

    assert.equal(readFileSync(outside, 'utf8'), 'keep me\n', 'the symlink was followed');
    assert.ok(lstatSync(keyFile).isFile());
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    assert.equal(statSync(s.keysDir).mode & 0o777, 0o700);
    assert.equal(readFileSync(keyFile, 'utf8'), FAKE_PRIVATE_KEY);
    assert.deepEqual(filesUnder(s.root), ['home/cfg/gpr/keys/5e1d9c8b-7a6f-4e3d-8c2b-1a0f9e8d7c6b.key', 'outside.txt']);

    // Again: the key file is replaced in place (no leftover temporary files); IPv6 hosts work.
    answer({ credentials: { host: '2001:db8::10', port: 2222, user: 'ubuntu' } });
    const again = await gpr(s, ['ssh', GOOD_RENTAL_ID], { GPR_SSH_BIN: ssh.bin });
    assert.equal(again.code, 0, again.stderr);
    const argv2 = readFileSync(ssh.argvFile, 'utf8').trimEnd().split('\n');
    assert.deepEqual(argv2.slice(argv2.indexOf('--')), ['--', 'ubuntu@2001:db8::10']);
    assert.deepEqual(argv2.slice(2, 4), ['-p', '2222']);
    assert.deepEqual(readdirSync(s.keysDir), [`${GOOD_DEPLOYMENT_ID}.key`]);
  });

  it('gpr creds prints the checked fields, saves the key and shows a command of its own, never the service’s', async () => {
    const s = scratch();
    const r = await gpr(s, ['--json', 'creds', GOOD_RENTAL_ID]);
    assert.equal(r.code, 0, r.stderr);
    const c = JSON.parse(r.stdout);
    const keyFile = join(s.keysDir, `${GOOD_DEPLOYMENT_ID}.key`);
    assert.deepEqual(
      {
        deploymentId: c.deploymentId,
        host: c.host,
        port: c.port,
        user: c.user,
        keyFile: c.keyFile,
        privateKey: c.privateKey,
      },
      {
        deploymentId: GOOD_DEPLOYMENT_ID,
        host: '203.0.113.10',
        port: 22,
        user: 'root',
        keyFile,
        privateKey: FAKE_PRIVATE_KEY,
      },
    );
    assert.equal(c.privateKeyFile, undefined, "the service's file name is not passed on");
    assert.match(c.sshCommand, / -- root@203\.0\.113\.10$/);
    assert.ok(c.sshCommand.startsWith(`ssh -i ${keyFile} -p 22 `), c.sshCommand);
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    const human = await gpr(s, ['creds', GOOD_RENTAL_ID]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^key file\s+.*\.key$/m);
    assert.match(human.stdout, /^command\s+ssh -i .* -- root@203\.0\.113\.10$/m);
  });
});
