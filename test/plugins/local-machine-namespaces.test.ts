import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../helpers/wait.js';

const NOBODY = { uid: 65534, gid: 65534 };

// Run in a process of its own, which then exits without stopping the machine: starts a machine's
// namespaces for the directory in argv, runs a background command in them as the renter, and
// prints what the test checks as JSON.
const CHILD = `
import { spawnSync } from 'node:child_process';
const { liveHolder, machineCommand, startHolder } = await import(process.env.NAMESPACES);
const { detectShellIsolation, SYSTEM_PATH } = await import(process.env.SANDBOX);
const [dir, state] = process.argv.slice(1);
const isolation = detectShellIsolation();
const holder = await startHolder(isolation, 'test-machine', dir, state);
const owner = isolation.mode === 'root' ? { uid: ${NOBODY.uid}, gid: ${NOBODY.gid} } : undefined;
const run = (script) => {
  const cmd = machineCommand(isolation, holder, 'test-machine', dir, owner, ['/bin/sh', '-c', script]);
  const r = spawnSync(cmd.file, cmd.args, { env: { PATH: SYSTEM_PATH }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
};
const background = run('setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!');
const inside = run('id -u; pwd; grep CapEff /proc/self/status; echo shared > /tmp/note').split('\\n');
const again = run('cat /tmp/note');
const netns = Number(run('stat -L -c %i /proc/self/ns/net'));
console.log(JSON.stringify({ mode: isolation.mode, holder, live: await liveHolder(state), background: Number(background), inside, again, netns }));
`;

interface ChildReport {
  mode: string;
  holder: number;
  live: number | null;
  background: number;
  inside: string[];
  again: string;
  netns: number;
}

function runChild(dir: string, state: string, as?: { uid: number; gid: number }): Promise<ChildReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD, dir, state], {
      cwd: process.cwd(),
      env: {
        PATH: process.env.PATH ?? '',
        NAMESPACES: new URL('../../plugins/local/machine-namespaces.ts', import.meta.url).href,
        SANDBOX: new URL('../../plugins/local/sandbox.ts', import.meta.url).href,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...as,
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(JSON.parse(out) as ChildReport) : reject(new Error(`child exited ${code}: ${err}`)),
    );
  });
}

describe('local machine namespaces', function () {
  this.timeout(30_000);
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'local-machine-ns-'));
    await chown(dir, NOBODY.uid, NOBODY.gid);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function check(as: { uid: number; gid: number } | undefined, mode: string) {
    const state = join(dir, 'state');
    const home = join(dir, 'home');
    await mkdir(state);
    await mkdir(home);
    await chown(state, as?.uid ?? 0, as?.gid ?? 0);
    await chown(home, NOBODY.uid, NOBODY.gid);
    const report = await runChild(home, state, as);
    assert.equal(report.mode, mode);
    assert.equal(report.live, report.holder);
    const [uid, pwd, caps] = report.inside;
    assert.equal(uid, String(NOBODY.uid));
    assert.equal(pwd, home);
    assert.match(caps, /CapEff:\s+0+$/);
    assert.equal(report.again, 'shared', 'commands of one machine share its /tmp');
    assert.notEqual(report.netns, statSync('/proc/self/ns/net').ino, 'the machine has a network of its own');
    assert.ok(!existsSync(join(home, 'note')) && !existsSync('/tmp/note'), 'the machine /tmp is its own');
    // The process that started the machine has exited: its holder stops the machine, escaped processes included.
    await waitFor(
      async () => !existsSync(`/proc/${report.background}/ns/net`) && !existsSync(`/proc/${report.holder}/ns/net`),
      { timeoutMs: 5000, what: 'the machine to stop' },
    );
  }

  it('as root: one set of namespaces per machine, joined by every command, stopped when the service process exits', async () => {
    await check(undefined, 'root');
  });

  it('unprivileged: the same, inside a user namespace', async () => {
    await check(NOBODY, 'user');
  });
});
