import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile, rm, stat, writeFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import {
  SYSTEM_PATH,
  dropToRenter,
  namespacesCommand,
  type SandboxCommand,
  type SandboxOwner,
  type ShellIsolation,
} from './sandbox.js';

// One machine, one network and one mount namespace, as on a real machine: a server an SSH session
// or the startup script starts listens on the same loopback the port forwards reach, and `/tmp` is
// shared by its sessions. A small root-owned "holder" process creates the namespaces and keeps
// them; every command of the machine joins them with `nsenter` before dropping to the renter.

/** Namespaces a machine's commands join, with the tools to drop to the renter once inside. */
export type MachineIsolation = Exclude<ShellIsolation, { mode: 'none' }> & { nsenter: string };

/** True when this host lets a machine keep one set of namespaces for all its commands. */
export function hasMachineNamespaces(isolation: ShellIsolation): isolation is MachineIsolation {
  return isolation.mode !== 'none' && typeof isolation.nsenter === 'string';
}

/** Written by the holder inside the machine's fresh /run; a command that does not find it there is not in the machine. */
const MACHINE_MARK = '/run/.gpu-rental-machine';

// The holder, as root of the new namespaces, after they are prepared. $1 is the instance id. It
// lives until its stdin ends, that is until the service process that started it is gone; then it
// stops every process of the machine, so a machine does not outlive its provider process's host.
// A destroy kills it outright (see stopMachine).
const HOLDER = `printf '%s\\n' "$1" > ${MACHINE_MARK}
chmod 0644 ${MACHINE_MARK}
echo ready
exec >/dev/null 2>&1
cat
i=0
while [ $i -lt 20 ]; do
  found=
  for p in /proc/[0-9]*; do
    [ "\${p#/proc/}" = "$$" ] && continue
    [ "$p/ns/net" -ef /proc/$$/ns/net ] && kill -9 "\${p#/proc/}" && found=1
  done
  [ -n "$found" ] || exit 0
  i=$((i + 1))
done`;

// Runs as root of the machine's namespaces right after nsenter: refuses to go on unless it is in
// the machine ($1, its id; a recycled holder pid would otherwise lead into another process's
// namespaces), enters its home ($2), then execs the rest (the drop to the renter). Builtins only.
const ENTER = `read -r seen < ${MACHINE_MARK} 2>/dev/null || seen=
[ "$seen" = "$1" ] || { echo 'this machine is not running' >&2; exit 255; }
cd "$2" || exit 255
shift 2
exec "$@"`;

/** A machine's holder, as recorded for other processes: its pid and its start time (to tell it from a recycled pid). */
interface HolderRecord {
  pid: number;
  start: string;
}

// The stdin of every holder this process started: open until the process exits (see HOLDER).
const holderPipes = new Map<string, { child: ChildProcess; stdin: Writable }>();

/**
 * Field 22 of /proc/<pid>/stat, the process's start time in clock ticks since boot; null when
 * there is no such process or it has exited (a zombie keeps no namespaces).
 */
async function processStart(pid: number): Promise<string | null> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (text === null) return null;
  // The command name (field 2) may hold spaces and parentheses; the fields after it do not.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  if (rest[0] === 'Z' || rest[0] === 'X') return null;
  return rest[19] ?? null;
}

const holderFile = (stateDir: string) => join(stateDir, 'holder.json');

/** The pid of the machine's holder when it is still the one recorded; null when the machine is not running. */
export async function liveHolder(stateDir: string): Promise<number | null> {
  const text = await readFile(holderFile(stateDir), 'utf8').catch(() => null);
  if (text === null) return null;
  const rec = JSON.parse(text) as HolderRecord;
  return (await processStart(rec.pid)) === rec.start ? rec.pid : null;
}

/**
 * Creates the machine's namespaces for `dir`, marked with `instanceId`, and records their holder
 * in `stateDir`. Call from the one process that serves the machine.
 */
export async function startHolder(
  isolation: MachineIsolation,
  instanceId: string,
  dir: string,
  stateDir: string,
): Promise<number> {
  const cmd = namespacesCommand(isolation, dir, ['/bin/sh', '-c', HOLDER, 'holder', instanceId]);
  // Its own session: a signal to the service's process group (^C) must not skip its cleanup.
  const child = spawn(cmd.file, cmd.args, {
    cwd: dir,
    env: { PATH: SYSTEM_PATH },
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const pid = await new Promise<number>((resolve, reject) => {
    let out = '';
    let err = '';
    let settled = false;
    const timer = setTimeout(() => fail('timed out'), 10_000);
    function fail(why: string) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(
        new Error(`local provider: the machine's namespaces could not be made (${err.trim().split('\n')[0] || why})`),
      );
    }
    child.on('error', (e) => fail(e.message));
    child.on('exit', (code) => fail(`exit ${code}`));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out !== 'ready\n' || child.pid === undefined || settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(child.pid);
    });
  });
  child.stdout.destroy();
  child.stderr.destroy();
  child.stdin.on('error', () => undefined);
  // Neither the holder nor its pipe keeps this process alive; the pipe closes with it.
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  holderPipes.set(stateDir, { child, stdin: child.stdin });
  const start = await processStart(pid);
  if (start === null) throw new Error('local provider: the machine stopped as it started');
  const tmp = `${holderFile(stateDir)}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify({ pid, start } satisfies HolderRecord), { mode: 0o600 });
  await rename(tmp, holderFile(stateDir));
  return pid;
}

/**
 * The command that runs `argv` as the renter inside the machine whose holder is `holderPid`, in
 * its home `dir`. Only the service's fixed tools run before the drop.
 */
export function machineCommand(
  isolation: MachineIsolation,
  holderPid: number,
  instanceId: string,
  dir: string,
  owner: SandboxOwner | undefined,
  argv: string[],
): SandboxCommand {
  const user = isolation.mode === 'user' ? ['--user', '--preserve-credentials'] : [];
  return {
    file: isolation.nsenter,
    args: [
      `--target=${holderPid}`,
      ...user,
      '--net',
      '--mount',
      '--',
      '/bin/sh',
      '-c',
      ENTER,
      'enter',
      instanceId,
      dir,
      ...dropToRenter(isolation, owner),
      ...argv,
    ],
  };
}

/** Network namespace of a process, as device and inode; null once it is gone. */
async function netns(pid: number | string): Promise<string | null> {
  const st = await stat(`/proc/${pid}/ns/net`).catch(() => null);
  return st ? `${st.dev}:${st.ino}` : null;
}

/**
 * Stops the machine recorded in `stateDir`: its holder and every process in its network
 * namespace (commands, the startup script's children, port relays), wherever they were started.
 */
export async function stopMachine(stateDir: string): Promise<void> {
  const pid = await liveHolder(stateDir);
  if (pid !== null) {
    // Read while the holder still holds it: a namespace's inode is unique only while it exists.
    const ns = await netns(pid);
    kill(pid);
    if (ns !== null) await killNamespace(ns);
  }
  // Closed only now: the end of its stdin would set the holder sweeping on its own.
  holderPipes.get(stateDir)?.stdin.destroy();
  holderPipes.delete(stateDir);
  await rm(holderFile(stateDir), { force: true });
}

async function killNamespace(ns: string): Promise<void> {
  for (let pass = 0; pass < 100; pass++) {
    let found = false;
    for (const pid of await readdir('/proc')) {
      if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
      if ((await netns(pid)) !== ns) continue;
      found = true;
      kill(Number(pid));
    }
    if (!found) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

function kill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}
