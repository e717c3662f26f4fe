import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { dropDatabase } from '../../src/db/data-source.js';
import { childDatabaseUrl } from '../helpers/db.js';
import { freePort, spawnService } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

/** Whether a new TCP connection to `port` is accepted (true) or refused (false). */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * What an operator relies on when a deployment or `systemctl stop` sends SIGTERM to an api process:
 * the request it is in the middle of still gets its answer, no new connection is taken, and the
 * process exits 0 (not killed at its 30 s deadline).
 */
describe('graceful shutdown of an api process', function () {
  this.timeout(60_000);

  it('on SIGTERM refuses new connections, completes the request in flight, and exits 0', async () => {
    const url = childDatabaseUrl('drain');
    const port = await freePort();
    const svc = spawnService(['--role', 'api'], { DATABASE_URL: url, PORT: String(port), LOG_LEVEL: 'info' });
    try {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200, {
        timeoutMs: 30_000,
        what: 'healthz',
      });

      // A signup whose body is still arriving: the request is in flight inside the service.
      const body = JSON.stringify({});
      const req = request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/v1/signup',
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
          'Idempotency-Key': randomUUID(),
          Expect: '100-continue',
        },
      });
      const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
        req.on('response', (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.on('error', reject);
      });
      // The 100 Continue shows the service has read the headers: the request is its own now.
      const continued = new Promise((r) => req.once('continue', r));
      req.flushHeaders();
      await continued;
      req.write(body.slice(0, 1));

      svc.child.kill('SIGTERM');
      await waitFor(async () => svc.stdout().includes('shutting down'), {
        timeoutMs: 10_000,
        what: 'the shutdown to start',
      });
      await waitFor(async () => !(await accepts(port)), { timeoutMs: 10_000, what: 'new connections to be refused' });
      assert.equal(svc.child.exitCode, null, 'still running while a request is in flight');

      req.end(body.slice(1));
      const res = await answered;
      assert.equal(res.status, 201, res.text);
      assert.ok(JSON.parse(res.text).data.token, 'the signup completed with its key');
      assert.equal(await svc.exited, 0, svc.stderr());
    } finally {
      svc.child.kill('SIGKILL');
      await dropDatabase(url);
    }
  });
});
