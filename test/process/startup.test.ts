import assert from 'node:assert/strict';
import mysql from 'mysql2/promise';
import { createDatabaseIfMissing, createDataSource, dropDatabase, migrate } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import { migrations } from '../../migrations/index.js';
import { childDatabaseUrl } from '../helpers/db.js';
import { freePort, spawnService } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

const freshUrl = () => childDatabaseUrl('proc');

async function databaseExists(name: string): Promise<boolean> {
  const c = await mysql.createConnection({ host: '127.0.0.1', user: 'root' });
  try {
    const [rows] = await c.query('SHOW DATABASES LIKE ?', [name]);
    return (rows as unknown[]).length === 1;
  } finally {
    await c.end();
  }
}

describe('service process', function () {
  this.timeout(60_000);

  it('exits with one clear line, and no stack trace, when MySQL is unreachable', async () => {
    const svc = spawnService([], { DATABASE_URL: 'mysql://root:hunter2@127.0.0.1:1/gpu_rental' });
    assert.equal(await svc.exited, 1);
    const lines = svc.stderr().trim().split('\n');
    assert.equal(lines.length, 1, svc.stderr());
    assert.match(lines[0], /^Cannot reach MySQL at mysql:\/\/root@127\.0\.0\.1:1\/gpu_rental \(ECONNREFUSED\)/);
    assert.match(lines[0], /start-stop-daemon --start --oknodo --background --exec \/usr\/sbin\/mariadbd/);
    assert.doesNotMatch(svc.stderr(), /hunter2|\n\s+at /);
  });

  it('creates its database, migrates, serves inventory, and stops cleanly on SIGTERM', async () => {
    const url = freshUrl();
    const name = new URL(url).pathname.slice(1);
    const port = await freePort();
    assert.equal(await databaseExists(name), false);
    const svc = spawnService([], { DATABASE_URL: url, PORT: String(port) });
    try {
      const health = await waitFor(
        async () => {
          const r = await fetch(`http://127.0.0.1:${port}/healthz`);
          return r.status === 200 && r.json();
        },
        { timeoutMs: 30_000, what: 'healthz' },
      );
      assert.equal((health as { data: { status: string } }).data.status, 'ok');
      assert.equal(await databaseExists(name), true);
      const offers = await waitFor(
        async () => {
          const r = (await (await fetch(`http://127.0.0.1:${port}/api/v1/offers`)).json()) as { data: unknown[] };
          return r.data.length >= 12 && r.data;
        },
        { timeoutMs: 15_000, what: 'offers' },
      );
      assert.ok(offers.length >= 12);
      svc.child.kill('SIGTERM');
      assert.equal(await svc.exited, 0, svc.stderr());
    } finally {
      svc.child.kill('SIGKILL');
      await dropDatabase(url);
    }
  });

  it('splits into roles: an api-only process serves what a worker-only process refreshed', async () => {
    const url = freshUrl();
    const port = await freePort();
    const api = spawnService(['--role', 'api'], { DATABASE_URL: url, PORT: String(port) });
    let worker: ReturnType<typeof spawnService> | undefined;
    try {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200, {
        timeoutMs: 30_000,
        what: 'api healthz',
      });
      const before = (await (await fetch(`http://127.0.0.1:${port}/api/v1/offers`)).json()) as { data: unknown[] };
      assert.deepEqual(before.data, [], 'the api role does not refresh inventory itself');
      worker = spawnService(['--role=worker'], { DATABASE_URL: url, PORT: String(port) });
      const after = await waitFor(
        async () => {
          const r = (await (await fetch(`http://127.0.0.1:${port}/api/v1/offers`)).json()) as { data: unknown[] };
          return r.data.length > 0 && r.data;
        },
        { timeoutMs: 30_000, what: 'offers from the worker' },
      );
      assert.ok(after.length >= 12);
    } finally {
      api.child.kill('SIGTERM');
      worker?.child.kill('SIGTERM');
      await api.exited;
      await worker?.exited;
      await dropDatabase(url);
    }
  });

  it('migrates exactly once when several processes start at once', async () => {
    const url = freshUrl();
    await createDatabaseIfMissing(url);
    const sources = [1, 2, 3, 4].map(() => createDataSource(url, 2, entities));
    try {
      await Promise.all(sources.map((s) => s.initialize()));
      await Promise.all(sources.map((s) => migrate(s)));
      const rows: { name: string }[] = await sources[0].query('SELECT name FROM migrations ORDER BY id');
      assert.deepEqual(
        rows.map((r) => r.name),
        migrations.map((m) => m.name),
      );
      assert.equal(await sources[1].showMigrations(), false);
    } finally {
      await Promise.all(sources.map((s) => s.destroy()));
      await dropDatabase(url);
    }
  });
});
