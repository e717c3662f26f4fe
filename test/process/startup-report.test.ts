import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { dropDatabase } from '../../src/db/data-source.js';
import { childDatabaseUrl } from '../helpers/db.js';
import { freePort, spawnService, type Spawned } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

/** An address of this machine other than loopback, where a 127.0.0.1 bind must not answer. */
function outsideAddress(): string {
  const a = Object.values(networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal);
  assert.ok(a, 'this machine has a non-loopback IPv4 address');
  return a.address;
}

function messages(svc: Spawned): string[] {
  return svc
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { msg: string }).msg);
}

async function stop(svc: Spawned): Promise<void> {
  svc.child.kill('SIGTERM');
  assert.equal(await svc.exited, 0, svc.stderr());
}

describe('service start-up', function () {
  this.timeout(90_000);
  const url = childDatabaseUrl('start');
  const name = new URL(url).pathname.slice(1);
  after(() => dropDatabase(url));

  it('binds 127.0.0.1 in development and reports the database, migrations, providers with offer counts and a first call', async () => {
    const port = await freePort();
    const svc = spawnService([], { DATABASE_URL: url, PORT: String(port), LOG_LEVEL: 'info' });
    try {
      await waitFor(async () => messages(svc).some((m) => m.startsWith('inventory loaded')), {
        timeoutMs: 30_000,
        what: 'inventory loaded',
      });
      const log = messages(svc);
      assert.ok(log.includes(`database ${name} created at mysql://root@127.0.0.1:3306/${name}`), log.join('\n'));
      assert.ok(
        log.some((m) => /^migrations applied: Initial\d+, /.test(m)),
        log.join('\n'),
      );
      assert.ok(log.includes('providers loaded: local'));
      assert.ok(
        log.some((m) => /^inventory loaded: local 1[0-9] offers$/.test(m)),
        log.join('\n'),
      );
      assert.ok(
        log.some(
          (m) =>
            m.startsWith(`GPU rental service listening on 127.0.0.1:${port}`) &&
            m.endsWith(`try: curl http://127.0.0.1:${port}/api/v1/gpus`),
        ),
        log.join('\n'),
      );
      assert.equal((await fetch(`http://127.0.0.1:${port}/api/v1/gpus`)).status, 200);
      await assert.rejects(
        fetch(`http://${outsideAddress()}:${port}/healthz`),
        'not reachable from outside the machine',
      );
    } finally {
      await stop(svc);
    }
  });

  it('binds what HOST says, and finds the database and nothing to migrate the second time', async () => {
    const port = await freePort();
    const svc = spawnService([], { DATABASE_URL: url, PORT: String(port), HOST: '0.0.0.0', LOG_LEVEL: 'info' });
    try {
      await waitFor(async () => (await fetch(`http://${outsideAddress()}:${port}/healthz`)).status === 200, {
        timeoutMs: 30_000,
        what: 'healthz from outside',
      });
      const log = messages(svc);
      assert.ok(log.includes(`database ${name} found at mysql://root@127.0.0.1:3306/${name}`), log.join('\n'));
      assert.ok(log.includes('migrations: none pending'));
      assert.ok(
        log.some(
          (m) =>
            m.startsWith(`GPU rental service listening on 0.0.0.0:${port}`) &&
            m.endsWith(`try: curl http://127.0.0.1:${port}/api/v1/gpus`),
        ),
      );
    } finally {
      await stop(svc);
    }
  });

  it('stops with one line and exit code 1 when the port is taken', async () => {
    const taken = createServer();
    const port = await freePort();
    await new Promise<void>((r) => taken.listen(port, '127.0.0.1', () => r()));
    try {
      const svc = spawnService([], { DATABASE_URL: url, PORT: String(port) });
      assert.equal(await svc.exited, 1);
      assert.equal(svc.stderr(), `port ${port} is in use; set PORT\n`);
    } finally {
      await new Promise<void>((r) => taken.close(() => r()));
    }
  });
});
