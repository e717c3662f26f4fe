import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { atRunEnd } from './db.js';
import { settledWithin, waitFor } from './wait.js';

/** A MariaDB server of a test's own, for server settings the shared one must not change. */
export interface PrivateMariaDb {
  /** `mysql://root@127.0.0.1:<port>/` (append a database name). */
  url: string;
  port: number;
  /** Ends the server and removes its data. */
  stop(): Promise<void>;
  /** Ends the server but keeps its data, as a database outage would; `resume` brings it back. */
  halt(): Promise<void>;
  /** Starts a halted server again on the same port and data, resolving once it answers. */
  resume(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function reachable(port: number): Promise<boolean> {
  try {
    const conn = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root', connectTimeout: 500 });
    await conn.end();
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts `mariadbd` on a free loopback port with a throw-away data directory and the given server
 * options (e.g. `--sql-mode=NO_BACKSLASH_ESCAPES`); root has no password, as on the shared server.
 */
export async function startPrivateMariaDb(serverArgs: string[]): Promise<PrivateMariaDb> {
  const dir = mkdtempSync(join(tmpdir(), 'gpu-rental-mariadb-'));
  const install = spawnSync(
    'mariadb-install-db',
    ['--no-defaults', `--datadir=${dir}`, '--auth-root-authentication-method=normal', '--skip-test-db', '--user=root'],
    { encoding: 'utf8' },
  );
  if (install.status !== 0) throw new Error(`mariadb-install-db failed: ${install.stderr || install.stdout}`);
  const port = await freePort();
  let child: ChildProcess;
  let exited = false;
  /** Starts the server on the data directory and port, and resolves once it answers. */
  const boot = async () => {
    exited = false;
    const started: ChildProcess = spawn(
      '/usr/sbin/mariadbd',
      [
        '--no-defaults',
        `--datadir=${dir}`,
        `--port=${port}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(dir, 'mysqld.sock')}`,
        '--user=root',
        '--skip-name-resolve',
        '--skip-log-bin',
        '--innodb-buffer-pool-size=32M',
        ...serverArgs,
      ],
      { stdio: 'ignore' },
    );
    child = started;
    started.once('exit', () => {
      if (child === started) exited = true;
    });
    const up = await waitFor(async () => exited || (await reachable(port)), {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: `the private MariaDB on port ${port}`,
    }).then(
      () => !exited,
      () => false,
    );
    if (!up) {
      started.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`the private MariaDB on port ${port} did not come up`);
    }
  };
  /** Ends the server process, keeping its data directory. */
  const halt = async () => {
    if (exited) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    if (!(await settledWithin(gone, 10_000))) {
      child.kill('SIGKILL');
      await gone;
    }
  };
  await boot();
  const stop = async () => {
    await halt();
    rmSync(dir, { recursive: true, force: true });
  };
  // Also at the end of the run: a test that failed before its own clean-up leaves no server or data directory.
  atRunEnd(stop);
  return { url: `mysql://root@127.0.0.1:${port}/`, port, stop, halt, resume: boot };
}
