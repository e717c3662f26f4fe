import { createHash } from 'node:crypto';
import { chmod, chown, mkdir, rm, writeFile } from 'node:fs/promises';
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

// A block of ids no distribution hands to users or system accounts (those stay below 65534).
const SANDBOX_ID_BASE = 200_000;
const SANDBOX_ID_SPAN = 100_000;

/**
 * When the service runs as root, each instance's shell runs as an unprivileged uid and gid of its
 * own, derived from the instance id (no account needed: the kernel checks numbers). It cannot read
 * the service's `/proc/<pid>/environ`, signal it, or open another instance's sandbox. Run as any
 * other user the shells already lack root and keep the service's uid (undefined: nothing to switch).
 */
export function sandboxOwnerFor(instanceId: string, runningUid: number | undefined = process.getuid?.()): SandboxOwner | undefined {
  if (runningUid !== 0) return undefined;
  const id = SANDBOX_ID_BASE + (createHash('sha256').update(instanceId).digest().readUInt32BE(0) % SANDBOX_ID_SPAN);
  return { uid: id, gid: id };
}

// The directory comes back from the database before we `rm -rf` it; refusing anything outside
// the sandbox root keeps a corrupted row from deleting the host's files.
function assertInsideRoot(dir: string): void {
  const rel = relative(SANDBOX_ROOT, resolve(dir));
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new Error(`local provider: refusing to touch "${dir}", which is not under ${SANDBOX_ROOT}`);
  }
}

/**
 * Creates (or repairs, after a restart) the instance's home with its simulated `nvidia-smi`,
 * owned by the instance's own user when there is one.
 */
export async function prepareSandbox(dir: string, gpus: SimulatedGpus, owner: SandboxOwner | undefined = sandboxOwnerFor(gpus.instanceId)): Promise<void> {
  assertInsideRoot(dir);
  await mkdir(join(dir, 'bin'), { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const script = join(dir, 'bin', 'nvidia-smi');
  await writeFile(script, nvidiaSmiScript(gpus), { mode: 0o755 });
  await chmod(script, 0o755);
  if (owner) {
    // The root is traversable but not listable: a shell reaches its own directory by name only.
    await chmod(SANDBOX_ROOT, 0o711);
    for (const p of [dir, join(dir, 'bin'), script]) await chown(p, owner.uid, owner.gid);
  }
}

export async function removeSandbox(dir: string): Promise<void> {
  assertInsideRoot(dir);
  // Retries cover a killed command that was still writing files as the tree is removed.
  await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
}
