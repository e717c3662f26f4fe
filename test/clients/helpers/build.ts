import { execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
export const GPR_BIN = `${ROOT}clients/cli/dist/gpr.js`;
export const GPR_MCP_BIN = `${ROOT}clients/mcp/dist/gpr-mcp.js`;

let built = false;

/** Builds the clients as `npm install` does (once per test run), so tests run what ships. */
export function buildClients(): void {
  if (built) return;
  execFileSync('npm', ['run', '--silent', 'build:clients'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
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
export function run(bin: string, args: string[], env: Record<string, string>, onStderr?: (chunk: string) => void): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
