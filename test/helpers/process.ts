import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { sandboxUidEnv } from './sandbox-uids.js';

export interface Spawned {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Runs the service entry point as `npm start` would, with tsx instead of a prior build. */
export function spawnService(args: string[], env: Record<string, string>): Spawned {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      LOG_LEVEL: 'warn',
      NODE_ENV: 'development',
      ...sandboxUidEnv(),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/**
 * Polls `fn` every `intervalMs` until it returns a truthy value, which it resolves with; rejects
 * once `timeoutMs` has passed, naming `what` and the last error `fn` threw. The one polling helper
 * of the tests: wait on an event or a barrier where there is one, and poll only state that
 * announces nothing (a row, another process's output).
 */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs: number,
  what: string,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    // Checked after a try, so a slow `fn` still gets its last look before the deadline counts.
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
