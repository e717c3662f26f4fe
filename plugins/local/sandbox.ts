import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve, isAbsolute } from 'node:path';
import { nvidiaSmiScript, type SimulatedGpus } from './nvidia-smi-script.js';

/** Every local instance's "disk" lives under this directory. */
export const SANDBOX_ROOT = join(tmpdir(), 'gpu-rental-local');

export function sandboxDirFor(instanceId: string): string {
  return join(SANDBOX_ROOT, instanceId);
}

// The directory comes back from the database before we `rm -rf` it; refusing anything outside
// the sandbox root keeps a corrupted row from deleting the host's files.
function assertInsideRoot(dir: string): void {
  const rel = relative(SANDBOX_ROOT, resolve(dir));
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new Error(`local provider: refusing to touch "${dir}", which is not under ${SANDBOX_ROOT}`);
  }
}

/** Creates (or repairs, after a restart) the instance's home with its simulated `nvidia-smi`. */
export async function prepareSandbox(dir: string, gpus: SimulatedGpus): Promise<void> {
  assertInsideRoot(dir);
  await mkdir(join(dir, 'bin'), { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const script = join(dir, 'bin', 'nvidia-smi');
  await writeFile(script, nvidiaSmiScript(gpus), { mode: 0o755 });
  await chmod(script, 0o755);
}

export async function removeSandbox(dir: string): Promise<void> {
  assertInsideRoot(dir);
  // Retries cover a killed command that was still writing files as the tree is removed.
  await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
}
