import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BOOT_ARGS, BOOT_VARIABLE, bootScript, type BootPaths } from '../../plugins/runpod/machine.js';
import { wrapStartupScript } from '../../src/modules/rentals/store/machine-secrets.js';
import { DEFAULT_MACHINE_SETTINGS, STARTUP_MARKER_PATH, type MachineSettings } from '../../src/providers/provider.js';
import { waitFor } from '../helpers/wait.js';

// The pod's start command and boot script, run for real with /bin/sh in a scratch directory that
// stands for the container: its home, its /etc/profile.d, RunPod's /start.sh and sshd. Only the
// paths differ from a pod's.

/** The one argument of `sh -c '...'`, as any shell-like splitting of RunPod's `args` yields it. */
function bootCommand(): string {
  const m = /^sh -c '([^']*)'$/.exec(BOOT_ARGS);
  assert.ok(m, `BOOT_ARGS is sh -c with one single-quoted argument: ${BOOT_ARGS}`);
  return m[1];
}

/** The live processes (not zombies) whose environment has HOME=`home`, from /proc. */
function processesWithHome(home: string): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if (readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`HOME=${home}`)) found.push(Number(pid));
    } catch {
      // The process ended while we looked, or is not ours to read.
    }
  }
  return found;
}

/** The command lines of the live processes of process group `pgid`, from /proc. */
function commandsOfGroup(pgid: number): string[] {
  const commands: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // After the command name: state, parent pid, process group.
      const [state, , group] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state !== 'Z' && Number(group) === pgid)
        commands.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim());
    } catch {
      // The process ended while we looked.
    }
  }
  return commands;
}

const PUBLIC_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBootTestKeyOnly boot-test';

const VALUES: Record<string, string> = {
  QUOTES: `it's "double" and 'single' '\\'' done`,
  SHELLY: '$HOME `id` $(id) ; | & * ? [a] \\ ~',
  LINES: 'first line\nsecond line\n\n',
  UNICODE: 'héllo wörld ✓',
  EMPTY: '',
  SPACES: '  leading and trailing  ',
};

describe('RunPod boot script (run with /bin/sh)', function () {
  this.timeout(20_000);
  let root: string;
  let home: string;
  let paths: BootPaths;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'runpod-boot-'));
    home = join(root, 'home');
    for (const d of ['home', 'profile.d', 'tmp']) mkdirSync(join(root, d));
    writeFileSync(join(home, '.bashrc'), 'EXISTING_BASHRC=kept\n');
    // RunPod's start script stands in as one that records what it was started with.
    writeFileSync(join(root, 'start.sh'), `#!/bin/sh\nenv > "${root}/start-env"\necho started >> "${root}/starts"\n`, {
      mode: 0o755,
    });
    writeFileSync(join(root, 'sshd'), `#!/bin/sh\necho sshd >> "${root}/sshd-started"\n`, { mode: 0o755 });
    paths = { profileDir: join(root, 'profile.d'), imageStart: join(root, 'start.sh'), sshd: join(root, 'sshd') };
  });
  afterEach(async () => {
    // A boot leaves the startup script running in the background, writing under the home: it is
    // ended (and seen gone) before the scratch directory is removed.
    for (const pid of processesWithHome(home)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Ended meanwhile.
      }
    }
    await waitFor(() => processesWithHome(home).length === 0, { what: "the boot's background processes to end" });
    rmSync(root, { recursive: true, force: true });
  });

  const settings = (over: Partial<MachineSettings>): MachineSettings => ({
    ...DEFAULT_MACHINE_SETTINGS,
    env: {},
    ports: [],
    ...over,
  });

  /** The container's environment: RunPod's variables for the pod, the boot variable, a clean base. */
  function podEnv(machine: MachineSettings, bootPaths = paths): Record<string, string> {
    return {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: home,
      TMPDIR: join(root, 'tmp'),
      ...machine.env,
      PUBLIC_KEY,
      [BOOT_VARIABLE]: Buffer.from(bootScript(machine, bootPaths), 'utf8').toString('base64'),
    };
  }

  function boot(machine: MachineSettings): void {
    const run = spawnSync('sh', ['-c', bootCommand()], { env: podEnv(machine), encoding: 'utf8', timeout: 10_000 });
    assert.equal(run.status, 0, `boot failed: ${run.stderr}`);
  }

  /** What a shell sees after sourcing `file` from a clean environment, as an SSH login would. */
  function sourced(file: string, name: string): string {
    const run = spawnSync('sh', ['-c', `. "${file}"; printf '%s' "$${name}"`], {
      env: { PATH: '/usr/bin:/bin', HOME: home },
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, run.stderr);
    return run.stdout;
  }

  it('hands over to the image start with the variables and without the boot variable, leaving no boot file behind', () => {
    boot(settings({ env: VALUES }));
    const startEnv = readFileSync(join(root, 'start-env'), 'utf8');
    assert.match(startEnv, /^UNICODE=héllo wörld ✓$/m);
    assert.match(startEnv, /^PUBLIC_KEY=ssh-ed25519 /m);
    assert.ok(!startEnv.includes(BOOT_VARIABLE), 'the boot variable is unset before the image starts');
    assert.deepEqual(readdirSync(join(root, 'tmp')), [], 'the decoded boot script removed itself');
  });

  it('gives SSH logins (profile.d) and commands (.bashrc) every variable byte for byte, readable by the user only', () => {
    boot(settings({ env: VALUES }));
    const hook = join(root, 'profile.d', 'gpr-env.sh');
    for (const [name, value] of Object.entries(VALUES)) {
      assert.equal(sourced(hook, name), value, `${name} through profile.d`);
      assert.equal(sourced(join(home, '.bashrc'), name), value, `${name} through .bashrc`);
    }
    assert.equal(sourced(join(home, '.bashrc'), 'EXISTING_BASHRC'), 'kept');
    assert.equal(statSync(join(home, '.gpr', 'env.sh')).mode & 0o777, 0o600);
    // Booted again (a restarted container), the hook is not added twice.
    boot(settings({ env: VALUES }));
    const bashrc = readFileSync(join(home, '.bashrc'), 'utf8').split('\n');
    assert.equal(bashrc.filter((l) => l.includes('.gpr/env.sh')).length, 1);
    assert.equal(bashrc[0], `[ -r "${home}/.gpr/env.sh" ] && . "${home}/.gpr/env.sh"`);
  });

  it('runs the wrapped startup script once, with the variables, and marks its start', async () => {
    const agent = '#!/bin/sh\nprintf "%s|%s\\n" "$QUOTES" "$(pwd)" >> "$HOME/agent-ran"\n';
    const machine = settings({ env: { QUOTES: VALUES.QUOTES }, startupScript: wrapStartupScript(agent) });
    boot(machine);
    const ran = await waitFor(
      async () => (existsSync(join(home, 'agent-ran')) ? readFileSync(join(home, 'agent-ran'), 'utf8') : undefined),
      { timeoutMs: 5000, what: 'the agent script' },
    );
    assert.equal(ran, `${VALUES.QUOTES}|${home}\n`);
    assert.ok(existsSync(join(home, STARTUP_MARKER_PATH)));
    await waitFor(async () => !existsSync(join(home, '.gpr', 'startup-wrapper.sh')), {
      timeoutMs: 5000,
      what: 'the wrapper to be removed',
    });
    boot(machine);
    // A boot without the mark runs its script, after the one a second run would have been: once its
    // line is there, a second run's would be too.
    rmSync(join(home, STARTUP_MARKER_PATH));
    boot(settings({ startupScript: wrapStartupScript('#!/bin/sh\necho unmarked >> "$HOME/agent-ran"\n') }));
    const ranLog = () => readFileSync(join(home, 'agent-ran'), 'utf8');
    await waitFor(() => ranLog().includes('unmarked'), { what: 'the unmarked boot to run its script' });
    assert.equal(ranLog(), `${ran}unmarked\n`, 'not run again');
    assert.equal(readFileSync(join(root, 'starts'), 'utf8'), 'started\n'.repeat(3), 'the image started every time');
  });

  it('a script alone writes no env file; the image still starts', () => {
    boot(settings({ startupScript: wrapStartupScript('true\n') }));
    assert.ok(!existsSync(join(home, '.gpr', 'env.sh')));
    assert.ok(!existsSync(join(root, 'profile.d', 'gpr-env.sh')));
    assert.equal(readFileSync(join(root, 'starts'), 'utf8'), 'started\n');
  });

  it('an image without a start script gets the key installed and sshd started, and stays up', async () => {
    const machine = settings({ env: { A: 'b' } });
    const env = podEnv(machine, { ...paths, imageStart: join(root, 'no-such-start.sh') });
    const child = spawn('sh', ['-c', bootCommand()], { env, detached: true, stdio: 'ignore' });
    try {
      await waitFor(async () => existsSync(join(root, 'sshd-started')), {
        timeoutMs: 5000,
        what: 'sshd to be started',
      });
      assert.equal(readFileSync(join(home, '.ssh', 'authorized_keys'), 'utf8'), `${PUBLIC_KEY}\n`);
      assert.equal(statSync(join(home, '.ssh')).mode & 0o777, 0o700);
      // Past sshd, the script's last step: the loop that keeps the container up.
      await waitFor(() => commandsOfGroup(child.pid!).includes('sleep 3600'), { what: 'the keep-alive loop' });
      assert.equal(child.exitCode, null, 'the container keeps running');
    } finally {
      process.kill(-child.pid!, 'SIGKILL');
    }
  });
});
