import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { wrapStartupScript } from '../../src/modules/rentals/store/machine-secrets.js';
import { DEFAULT_MACHINE_SETTINGS, STARTUP_MARKER_PATH, type MachineSettings } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { AWKWARD_ENV, makeLambdaHarness, parseEnv0, pick } from './lambda-harness.js';

/**
 * Runs the user_data a launch really carried the way cloud-init runs a `#!` user-data script: as
 * root, once, on a machine whose SSH user is `ubuntu`. The machine is this host in a mount
 * namespace of its own: `/etc/passwd`, `/etc/group` and `/etc/shadow` there know an `ubuntu` user
 * whose home is a scratch directory, and `/etc/profile.d` is an empty tmpfs, so the real `su`,
 * `/etc/profile` and bash login shell do the work and nothing of this host changes. Needs root and
 * `unshare`, like the local provider's sandboxes.
 */
function canBoot(): string | null {
  if (process.getuid?.() !== 0) return 'needs root for a mount namespace and su';
  const probe = spawnSync('unshare', ['--mount', '--propagation', 'private', 'true']);
  if (probe.status !== 0)
    return `unshare --mount is not allowed here (${String(probe.stderr).trim() || probe.error?.message})`;
  if (spawnSync('sh', ['-c', 'command -v su && command -v bash && command -v base64']).status !== 0)
    return 'su, bash or base64 is missing';
  return null;
}

const BOOT = `set -e
mount --bind "$1/passwd" /etc/passwd
mount --bind "$1/group" /etc/group
mount --bind "$1/shadow" /etc/shadow
mount -t tmpfs -o mode=0755 tmpfs /etc/profile.d
"$1/user-data" > "$1/cloud-init-output.log" 2>&1
# The wrapper puts the agent's script in the background: wait for it (10 s at most).
i=0
while [ ! -e "$1/home/done" ] && [ "$(cat "$1/expect-script")" = yes ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
ls -A /etc/profile.d > "$1/profile.d"
if [ -e /etc/profile.d/gpr-env.sh ]; then stat -c '%a %U %G' /etc/profile.d/gpr-env.sh > "$1/perm"; fi
# What an SSH login of ubuntu gets: a login shell, started from an empty environment.
su - ubuntu -c 'env -0' > "$1/login-env"
# What sshd runs for \`ssh host cmd\`: the user's shell with -c, no login shell, SSH_CLIENT set.
runuser -u ubuntu -- env -i HOME="$1/home" USER=ubuntu SSH_CLIENT='127.0.0.1 50000 22' bash -c 'env -0' > "$1/ssh-env"
if [ -e "$1/home/.bashrc" ]; then stat -c '%U %a' "$1/home/.bashrc" > "$1/bashrc-perm"; fi
`;

/** How Ubuntu's /etc/skel/.bashrc begins: non-interactive shells read no further. */
const SKEL_BASHRC = `# ~/.bashrc: executed by bash(1) for non-login shells.
case $- in
    *i*) ;;
      *) return;;
esac
export LATE=1
`;

/** The agent's own script: records who ran it, with which environment, then says it is done. */
const AGENT_SCRIPT = `#!/bin/sh
id -un > "$HOME/whoami"
env -0 > "$HOME/script-env"
touch "$HOME/done"
`;

interface Booted {
  home: string;
  read(file: string): string | null;
}

describe('Lambda user_data on a booting machine (cloud-init as root, the SSH user ubuntu)', function () {
  this.timeout(30_000);
  const why = canBoot();
  const keys = generateDeploymentKeyPair('lambda-boot');
  const dirs: string[] = [];

  before(() => {
    // The test machines of this project run as root with unshare (as the local provider needs): a
    // machine that cannot is told so, rather than the check passing unseen.
    if (why) assert.fail(`cannot run the user_data boot here: ${why}`);
  });
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** Launches through the fake with `machine`, then boots what the launch carried. */
  async function boot(machine: MachineSettings, bashrc?: string): Promise<Booted> {
    const h = await makeLambdaHarness();
    let userData: string | undefined;
    try {
      const res = await h.provider.create(h.label(), h.offer(), keys.publicKey, machine);
      assert.equal(res.kind, 'created', JSON.stringify(res));
      userData = h.fake.userDataOf((res as { instanceId: string }).instanceId);
    } finally {
      await h.cleanup();
    }
    assert.ok(userData, 'the launch carried user_data');

    const dir = mkdtempSync(join(tmpdir(), 'gpr-lambda-boot-'));
    dirs.push(dir);
    chmodSync(dir, 0o755);
    const uid = 61_000 + Math.floor(Math.random() * 4000);
    const home = join(dir, 'home');
    mkdirSync(home);
    chownSync(home, uid, uid);
    chmodSync(home, 0o750);
    if (bashrc !== undefined) {
      writeFileSync(join(home, '.bashrc'), bashrc, { mode: 0o644 });
      chownSync(join(home, '.bashrc'), uid, uid);
    }
    writeFileSync(
      join(dir, 'passwd'),
      `${readFileSync('/etc/passwd', 'utf8')}ubuntu:x:${uid}:${uid}:Ubuntu:${home}:/bin/bash\n`,
    );
    writeFileSync(join(dir, 'group'), `${readFileSync('/etc/group', 'utf8')}ubuntu:x:${uid}:\n`);
    writeFileSync(join(dir, 'shadow'), `${readFileSync('/etc/shadow', 'utf8')}ubuntu:*:19000:0:99999:7:::\n`, {
      mode: 0o640,
    });
    writeFileSync(join(dir, 'user-data'), userData, { mode: 0o700 });
    writeFileSync(join(dir, 'expect-script'), machine.startupScript === null ? 'no' : 'yes');
    const r = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', BOOT, 'sh', dir], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    const read = (file: string) => (existsSync(join(dir, file)) ? readFileSync(join(dir, file), 'utf8') : null);
    assert.equal(r.status, 0, `boot failed: ${r.stderr}\n${read('cloud-init-output.log') ?? ''}`);
    assert.equal(read('cloud-init-output.log'), '', 'the user_data script printed nothing');
    return { home, read };
  }

  it('variables and a startup script: the script runs once as ubuntu with the variables, records its start, and SSH logins and commands have them too', async () => {
    const env = { ...AWKWARD_ENV, API_TOKEN: 'tok-live-5d0b7c3e9a' };
    const b = await boot(
      { ...DEFAULT_MACHINE_SETTINGS, env, startupScript: wrapStartupScript(AGENT_SCRIPT) },
      SKEL_BASHRC,
    );
    assert.match(b.read(`home/${STARTUP_MARKER_PATH}`) ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$/);
    assert.equal(b.read('home/whoami'), 'ubuntu\n');
    const scriptEnv = parseEnv0(b.read('home/script-env') ?? '');
    assert.deepEqual(pick(scriptEnv, Object.keys(env)), env);
    assert.equal(scriptEnv.HOME, b.home);
    assert.deepEqual(pick(parseEnv0(b.read('login-env') ?? ''), Object.keys(env)), env);
    // A command given to ssh, without a login shell, has them as well: the image's .bashrc reads them first.
    const sshEnv = parseEnv0(b.read('ssh-env') ?? '');
    assert.deepEqual(pick(sshEnv, Object.keys(env)), env);
    assert.equal(sshEnv.LATE, undefined, 'the rest of .bashrc still stops early for non-interactive shells');
    assert.equal(b.read('bashrc-perm'), 'ubuntu 644\n', '.bashrc keeps its owner and mode');
    assert.equal(
      b.read('home/.bashrc'),
      `[ -r /etc/profile.d/gpr-env.sh ] && . /etc/profile.d/gpr-env.sh\n${SKEL_BASHRC}`,
    );
    assert.equal(b.read('perm'), '640 root ubuntu\n', 'the values are readable by root and ubuntu only');
    assert.equal(b.read('profile.d'), 'gpr-env.sh\n');
  });

  it('variables alone: every login shell and SSH command of ubuntu has them, and nothing else runs', async () => {
    const env = { ONLY: 'a value', MULTI: 'x\ny' };
    const b = await boot({ ...DEFAULT_MACHINE_SETTINGS, env });
    assert.deepEqual(pick(parseEnv0(b.read('login-env') ?? ''), Object.keys(env)), env);
    // Without a .bashrc of the image's, one holding only the line is made, the user's own.
    assert.deepEqual(pick(parseEnv0(b.read('ssh-env') ?? ''), Object.keys(env)), env);
    assert.equal(b.read('bashrc-perm'), 'ubuntu 600\n');
    assert.equal(b.read(`home/${STARTUP_MARKER_PATH}`), null);
  });

  it('a startup script alone: it runs as ubuntu without a profile file of ours', async () => {
    const b = await boot({ ...DEFAULT_MACHINE_SETTINGS, startupScript: wrapStartupScript(AGENT_SCRIPT) });
    assert.equal(b.read('home/whoami'), 'ubuntu\n');
    assert.ok(b.read(`home/${STARTUP_MARKER_PATH}`));
    assert.equal(b.read('profile.d'), '');
    assert.equal(b.read('home/.bashrc'), null, 'no variables, no line in .bashrc');
  });
});
