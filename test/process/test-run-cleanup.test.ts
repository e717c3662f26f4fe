import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import mysql from 'mysql2/promise';

const MOCHA = createRequire(import.meta.url).resolve('mocha/bin/mocha.js');
const FIXTURES = ['test/process/fixtures/run-cleanup-required.ts', 'test/process/fixtures/run-cleanup-imported.ts'];

/** Databases on the shared server whose names start with `prefix`. */
async function databasesStartingWith(url: string): Promise<string[]> {
  const u = new URL(url);
  const conn = await mysql.createConnection({
    host: u.hostname,
    port: Number(u.port || 3306),
    user: decodeURIComponent(u.username),
  });
  try {
    const name = u.pathname.slice(1);
    const [rows] = await conn.query('SHOW DATABASES LIKE ?', [`${name.replace(/[\\_%]/g, (c) => `\\${c}`)}%`]);
    return (rows as Record<string, string>[]).map((r) => Object.values(r)[0]);
  } finally {
    await conn.end();
  }
}

/** Runs mocha as `npm test` does (this repository's .mocharc, root hooks, `exit: true`) on the given files and options. */
function mocha(files: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    delete env.KEEP_TEST_DATABASE;
    // A run of its own, even when this file runs in a worker of a parallel run.
    delete env.MOCHA_WORKER_ID;
    const child = spawn(process.execPath, [MOCHA, ...files], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('npm test cleans up after itself', function () {
  this.timeout(120_000);

  it('in one process, drops the run database and its child databases even when mocha loads a file with import() beside files it requires, and runs the registered clean-ups', async () => {
    const r = await mocha(['--no-parallel', ...FIXTURES]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const required = /^required: (\S+) (\S+)$/m.exec(r.stdout);
    const imported = /^imported: (\S+) true$/m.exec(r.stdout);
    assert.ok(required && imported, r.stdout);
    assert.equal(imported[1], required[1], 'one database per run, whichever way a file was loaded');
    assert.match(required[1], /\/gpu_rental_test_/);
    assert.deepEqual(await databasesStartingWith(required[1]), [], 'no database of the run is left on the server');
    assert.equal(existsSync(required[2]), false, 'the directory registered with atRunEnd is gone');
  });

  it("in a parallel run, drops every worker's database and its children once all are done, and runs each file's clean-ups", async () => {
    const r = await mocha(['--parallel', '--jobs', '2', ...FIXTURES]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const required = /^required: (\S+) (\S+)$/m.exec(r.stdout);
    const imported = /^imported: (\S+) true$/m.exec(r.stdout);
    assert.ok(required && imported, r.stdout);
    for (const url of [required[1], imported[1]]) {
      assert.match(url, /\/gpu_rental_test_/);
      assert.deepEqual(await databasesStartingWith(url), [], `no database of ${url} is left on the server`);
    }
    assert.equal(existsSync(required[2]), false, 'the directory registered with atRunEnd is gone');
  });
});
