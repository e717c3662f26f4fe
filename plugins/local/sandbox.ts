import { spawn, spawnSync } from 'node:child_process';
import { accessSync, chownSync, constants, mkdtempSync, rmSync, type Stats } from 'node:fs';
import { chmod, chown, lstat, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve, isAbsolute } from 'node:path';
import { nvidiaSmiScript, type SimulatedGpus } from './nvidia-smi-script.js';

/** Every local instance's "disk" lives under this directory. */
export const SANDBOX_ROOT = join(tmpdir(), 'gpu-rental-local');

export function sandboxDirFor(instanceId: string): string {
  return join(SANDBOX_ROOT, instanceId);
}

/** The uid and gid an instance's commands run as. */
export interface SandboxOwner {
  uid: number;
  gid: number;
}

/**
 * The default block sandbox uids are allocated from (see `LocalInstanceStore.allocateSandboxUid`):
 * ids no distribution hands to users or system accounts, which stay below 65534. Services on one
 * host with databases of their own each need a block of their own (LOCAL_PROVIDER_SANDBOX_UID_FIRST
 * and _COUNT): one that ends a machine kills every process of its uid.
 */
export const SANDBOX_UID_FIRST = 200_000;
/** How many uids the default block holds. */
export const SANDBOX_UID_COUNT = 100_000;
/** The highest uid Linux hands out: (uid_t)-1 is "no uid". */
export const UID_MAX = 4_294_967_294;

/** Machines run as sandbox uids only when the service runs as root; otherwise as the service's own user. */
export function usesSandboxUids(): boolean {
  return process.getuid?.() === 0;
}

/** The owner for an allocated sandbox uid; each instance's group is its own, numbered like its user. */
export function sandboxOwner(uid: number): SandboxOwner {
  return { uid, gid: uid };
}

/** The directories searched for the namespace tools; never the renter-influenced PATH. */
export const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * How renters' shells are cut off from this host:
 * - `root`: the service runs as root; commands get a network namespace (only its own loopback)
 *   and a mount namespace (fresh `/run`, `/tmp`, `/var/tmp`, `/dev/shm`, so no host daemon's Unix
 *   socket there is reachable), then drop to the instance's uid with `setpriv`.
 * - `user`: the service is unprivileged; the same namespaces come from an unprivileged user
 *   namespace, and the command runs as the service's own uid inside a nested one (no capabilities).
 * - `none`: neither works here; the shell shares the host network (`reason` says why).
 * With `nsenter`, a machine's namespaces are made once and every command of it joins them (see
 * `machine-namespaces.ts`), as on one machine; without it, each command gets namespaces of its own.
 */
export type ShellIsolation =
  | { mode: 'root'; unshare: string; setpriv: string; nsenter?: string }
  | { mode: 'user'; unshare: string; uid: number; gid: number; nsenter?: string }
  | { mode: 'none'; reason: string };

// Runs as root (or as root of the new user namespace) inside the fresh namespaces, before the drop
// to the renter. It takes the sandbox directory as $1 and execs the rest of its arguments. It trusts
// nothing the renter controls: the tools come from a fixed PATH, and the only renter-owned path
// it touches is the sandbox directory itself, which the service created.
const PREPARE_NAMESPACES = `set -e
renter_path=$PATH
PATH=${SYSTEM_PATH}
dir=$1
shift
ip link set lo up 2>/dev/null || :
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mkdir /run/.sandbox
mount --bind "$dir" /run/.sandbox
for d in /var/run /tmp /var/tmp /dev/shm; do
  if [ -d "$d" ] && [ ! -L "$d" ]; then mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$d"; fi
done
mkdir -p "$dir"
mount --move /run/.sandbox "$dir"
rmdir /run/.sandbox
cd "$dir"
PATH=$renter_path
exec "$@"`;

/** What to spawn for one renter command: `/bin/sh` with `shArgs`, behind the isolation in force. */
export interface SandboxCommand {
  file: string;
  args: string[];
  /** Set only when the spawn itself must switch user (no namespaces, service running as root). */
  uid?: number;
  gid?: number;
}

/**
 * The command line that runs `/bin/sh shArgs` for a renter in `dir`. The shell keeps the spawned
 * process's pid (every step execs), so killing its process group still ends the command.
 */
export function sandboxShellCommand(
  isolation: ShellIsolation,
  dir: string,
  owner: SandboxOwner | undefined,
  shArgs: string[],
): SandboxCommand {
  if (isolation.mode === 'none') return { file: '/bin/sh', args: shArgs, ...owner };
  return namespacesCommand(isolation, dir, [...dropToRenter(isolation, owner), '/bin/sh', ...shArgs]);
}

/**
 * The argv prefix that leaves the namespaces' root for the renter: `setpriv` to the instance's
 * uid as root, a nested user namespace otherwise. Root of the outer user namespace could unmount
 * the fresh /run; the nested one holds no capability over the network and mount namespaces, which
 * belong to the outer one.
 */
export function dropToRenter(
  isolation: Exclude<ShellIsolation, { mode: 'none' }>,
  owner: SandboxOwner | undefined,
): string[] {
  if (isolation.mode === 'root')
    return owner ? [isolation.setpriv, `--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--clear-groups', '--'] : [];
  return [isolation.unshare, '--user', `--map-user=${isolation.uid}`, `--map-group=${isolation.gid}`, '--'];
}

/** Fresh network and mount namespaces prepared for `dir`; `argv` runs in them as their root. */
export function namespacesCommand(
  isolation: Exclude<ShellIsolation, { mode: 'none' }>,
  dir: string,
  argv: string[],
): SandboxCommand {
  const user = isolation.mode === 'user' ? ['--user', '--map-root-user'] : [];
  return {
    file: isolation.unshare,
    args: [...user, '--net', '--mount', '--', '/bin/sh', '-c', PREPARE_NAMESPACES, 'sh', dir, ...argv],
  };
}

/**
 * The fixed environment of a renter's command in `dir` logged in as `user`: never the service's
 * own, which holds its secrets. `clientEnv` is what the SSH client sent and sshd would accept.
 */
export function sessionEnv(dir: string, user: string, clientEnv: Record<string, string> = {}): Record<string, string> {
  return {
    LANG: 'C.UTF-8',
    ...clientEnv,
    HOME: dir,
    PWD: dir,
    PATH: `${join(dir, 'bin')}:${SYSTEM_PATH}`,
    USER: user,
    LOGNAME: user,
    SHELL: '/bin/sh',
    TMPDIR: dir,
  };
}

function findTool(name: string, dirs: string[]): string | undefined {
  for (const dir of dirs) {
    const path = join(dir, name);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // Not in this directory.
    }
  }
  return undefined;
}

/** Whom the service runs as, and where to look for the namespace tools. */
export interface IsolationProbeOptions {
  uid?: number;
  gid?: number;
  /** Directories holding `unshare` and `setpriv`; default {@link SYSTEM_PATH}. */
  toolDirs?: string[];
}

/**
 * Finds the strongest isolation this host allows by running a real command behind it once:
 * `root` when running as root, else `user`; `none` when that fails. A probe for another uid than
 * the process's own runs as that uid (possible only as root).
 */
export function detectShellIsolation(o: IsolationProbeOptions = {}): ShellIsolation {
  const uid = o.uid ?? process.getuid?.();
  const gid = o.gid ?? process.getgid?.();
  if (uid === undefined || gid === undefined) return { mode: 'none', reason: 'this platform has no Linux namespaces' };
  const dirs = o.toolDirs ?? SYSTEM_PATH.split(':');
  const unshare = findTool('unshare', dirs);
  if (!unshare) return { mode: 'none', reason: 'util-linux `unshare` was not found' };
  // Optional: without it each command gets namespaces of its own and ports cannot be forwarded.
  const nsenter = findTool('nsenter', dirs);
  let isolation: ShellIsolation;
  if (uid === 0) {
    const setpriv = findTool('setpriv', dirs);
    if (!setpriv) return { mode: 'none', reason: 'util-linux `setpriv` was not found' };
    isolation = { mode: 'root', unshare, setpriv, ...(nsenter ? { nsenter } : {}) };
  } else {
    isolation = { mode: 'user', unshare, uid, gid, ...(nsenter ? { nsenter } : {}) };
  }
  const probeDir = mkdtempSync(join(tmpdir(), 'gpu-rental-probe-'));
  try {
    chownSync(probeDir, uid, gid);
    // As root the probe drops to `nobody`, so setpriv is tried too.
    const owner = uid === 0 ? { uid: 65534, gid: 65534 } : undefined;
    const cmd = sandboxShellCommand(isolation, probeDir, owner, ['-c', 'exit 0']);
    const asOther = uid !== process.getuid?.() ? { uid, gid } : {};
    const res = spawnSync(cmd.file, cmd.args, {
      cwd: probeDir,
      env: { PATH: SYSTEM_PATH },
      timeout: 10_000,
      encoding: 'utf8',
      ...asOther,
    });
    if (res.status === 0) return isolation;
    const why = (res.error?.message ?? res.stderr?.trim()) || `exit ${res.status ?? res.signal}`;
    return {
      mode: 'none',
      reason: `namespaces are not available to ${uid === 0 ? 'root' : 'this user'} here (${why.split('\n')[0]})`,
    };
  } finally {
    rmSync(probeDir, { recursive: true, force: true });
  }
}

let detected: ShellIsolation | undefined;

/** {@link detectShellIsolation} for this process, probed once. */
export function shellIsolation(): ShellIsolation {
  detected ??= detectShellIsolation();
  return detected;
}

const ignore = (code: string) => (err: NodeJS.ErrnoException) => {
  if (err.code !== code) throw err;
};

// The directory comes back from the database before we `rm -rf` it; refusing anything outside
// the sandbox root keeps a corrupted row from deleting the host's files.
function assertInsideRoot(dir: string): void {
  const rel = relative(SANDBOX_ROOT, resolve(dir));
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new Error(`local provider: refusing to touch "${dir}", which is not under ${SANDBOX_ROOT}`);
  }
}

/**
 * Creates (or repairs, after a restart) the instance's home with its simulated `nvidia-smi` in
 * `bin/` and the machine's description (`etc`: file name to text) in `etc/`.
 * The home belongs to `owner` when there is one; `bin/`, `etc/` and their files stay the service's,
 * read-only to the renter, so a repair never writes through a link the renter planted.
 */
export async function prepareSandbox(
  dir: string,
  gpus: SimulatedGpus,
  owner?: SandboxOwner,
  etc: Record<string, string> = {},
): Promise<void> {
  assertInsideRoot(dir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  if (owner) {
    // The root is traversable but not listable: a shell reaches its own directory by name only.
    await chmod(SANDBOX_ROOT, 0o711);
    await chown(dir, owner.uid, owner.gid);
  }
  const bin = await serviceDir(dir, 'bin');
  await writeServiceFile(join(bin, 'nvidia-smi'), nvidiaSmiScript(gpus), 0o755);
  if (Object.keys(etc).length === 0) return;
  const etcDir = await serviceDir(dir, 'etc');
  for (const [name, text] of Object.entries(etc)) await writeServiceFile(join(etcDir, name), text, 0o644);
}

/** `dir/name` as a directory of the service's, whatever the renter left at that name. */
async function serviceDir(dir: string, name: string): Promise<string> {
  const path = join(dir, name);
  const me = process.getuid?.();
  const ours = (st: Stats | null) => st !== null && st.isDirectory() && (me === undefined || st.uid === me);
  const st = await lstat(path).catch(() => null);
  if (!ours(st)) {
    if (st) {
      // Whatever the renter put there (a link, or a directory of an older version that it owned)
      // is moved aside, never followed; rename acts on the entry itself.
      await rename(path, join(dir, `${name}.replaced-${Date.now()}`)).catch(ignore('ENOENT'));
    }
    // Another process repairing the same machine may create it first.
    await mkdir(path, { mode: 0o755 }).catch(ignore('EEXIST'));
    if (!ours(await lstat(path)))
      throw new Error(`local provider: ${path} was replaced while the sandbox was being prepared`);
  }
  await chmod(path, 0o755);
  return path;
}

async function writeServiceFile(path: string, text: string, mode: number): Promise<void> {
  await writeFile(path, text, { mode });
  await chmod(path, mode);
}

/** True while a process other than a zombie has `uid` among its real, effective or saved uids. */
async function runsUnder(uid: number): Promise<boolean> {
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const uids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
    // A zombie holds no memory or files; whether its parent ever reaps it is not ours to wait for.
    if (uids && uids.slice(1).includes(String(uid)) && !/^State:\s+Z/m.test(status)) return true;
  }
  return false;
}

/**
 * Kills every process running as `owner`, wherever it was started (a process that left its
 * process group included), so the uid can be handed to another instance. Gives up after a few
 * seconds of processes forking faster than they die.
 */
export async function killSandboxProcesses(owner: SandboxOwner): Promise<void> {
  for (let pass = 0; pass < 100 && (await runsUnder(owner.uid)); pass++) {
    // kill(-1) as that uid signals every process of it but the caller itself.
    await new Promise<void>((done) => {
      const child = spawn('/bin/sh', ['-c', 'kill -9 -1'], {
        uid: owner.uid,
        gid: owner.gid,
        stdio: 'ignore',
        env: { PATH: SYSTEM_PATH },
      });
      child.on('error', () => done());
      child.on('close', () => done());
    });
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function removeSandbox(dir: string): Promise<void> {
  assertInsideRoot(dir);
  // Retries cover a killed command that was still writing files as the tree is removed.
  await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
}
