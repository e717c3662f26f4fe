import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RUN_FAMILY_VARIABLE } from '../../helpers/db.js';

export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
export const GPR_BIN = `${ROOT}clients/cli/dist/gpr.js`;
export const GPR_MCP_BIN = `${ROOT}clients/mcp/dist/gpr-mcp.js`;

let built = false;

/** Held by the process building the clients: a build rewrites the bundles other processes run. */
const BUILD_LOCK = join(ROOT, 'node_modules', '.gpr-build-clients.lock');
/** A lock older than this was left by a process that died while building. */
const STALE_LOCK_MS = 5 * 60_000;

/** Runs `fn` holding {@link BUILD_LOCK} (a directory: its creation is atomic), waiting for it while another process holds it. */
export function underBuildLock<T>(fn: () => T): T {
  const deadline = Date.now() + 2 * STALE_LOCK_MS;
  for (;;) {
    try {
      mkdirSync(BUILD_LOCK);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = Date.now() - (statSync(BUILD_LOCK, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > STALE_LOCK_MS) rmSync(BUILD_LOCK, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`the clients' build lock ${BUILD_LOCK} is held too long`);
      // Synchronous, as its callers are: a short pause before looking at the lock again.
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(BUILD_LOCK, { recursive: true, force: true });
  }
}

/**
 * Builds the clients as `npm install` does, once per test run (whichever of its processes comes
 * first; the others find it done), so tests run what ships. Two processes building at once would
 * rewrite the bundles while a third runs them.
 */
export function buildClients(): void {
  if (built) return;
  const done = join(tmpdir(), `gpr-clients-built-${process.env[RUN_FAMILY_VARIABLE] ?? process.pid}`);
  underBuildLock(() => {
    if (existsSync(done)) return;
    execFileSync('npm', ['run', '--silent', 'build:clients'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    writeFileSync(done, '');
  });
  built = true;
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a node script as a subprocess with only the given environment (plus PATH), like an
 * agent's shell would; `onStderr` sees stderr as it arrives.
 */
export function run(
  bin: string,
  args: string[],
  env: Record<string, string>,
  onStderr?: (chunk: string) => void,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      onStderr?.(String(d));
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
