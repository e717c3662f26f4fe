import assert from 'node:assert/strict';
import { dropDatabase } from '../../src/db/data-source.js';
import { childDatabaseUrl } from '../helpers/db.js';
import { freePort, spawnService } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

describe('service process: METRICS_PORT', function () {
  this.timeout(60_000);

  it('serves /metrics and /readyz of every role on its own loopback port, and no /metrics on the public one', async () => {
    const url = childDatabaseUrl('metrics');
    const port = await freePort();
    const metricsPort = await freePort();
    const svc = spawnService([], { DATABASE_URL: url, PORT: String(port), METRICS_PORT: String(metricsPort) });
    try {
      const ready = await waitFor(
        async () => {
          const r = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
          return r.status === 200 && ((await r.json()) as { data: { checks: Record<string, string> } });
        },
        { timeoutMs: 30_000, what: 'readyz on the metrics port' },
      );
      assert.deepEqual(ready.data.checks, { database: 'ok', migrations: 'ok', inventory: 'ok' });
      const text = await waitFor(
        async () => {
          const t = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
          return /gpu_rental_job_runs_total\{job_name="inventory\.refresh",outcome="success"\}/.test(t) && t;
        },
        { timeoutMs: 30_000, what: 'a job run in the worker role' },
      );
      assert.match(
        text,
        /gpu_rental_provider_calls_total\{provider="local",operation="listOffers",outcome="ok"\} [1-9]/,
      );
      assert.match(text, /^gpu_rental_process_cpu_seconds_total /m);
      assert.equal(
        (await fetch(`http://127.0.0.1:${port}/metrics`)).status,
        404,
        'not on the public port without METRICS_TOKEN',
      );
      assert.equal((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 200);
      svc.child.kill('SIGTERM');
      assert.equal(await svc.exited, 0, svc.stderr());
    } finally {
      svc.child.kill('SIGKILL');
      await dropDatabase(url);
    }
  });

  it('refuses to start when METRICS_PORT is the public port, with one line', async () => {
    const port = await freePort();
    const svc = spawnService([], {
      DATABASE_URL: childDatabaseUrl('metrics'),
      PORT: String(port),
      METRICS_PORT: String(port),
    });
    assert.equal(await svc.exited, 1);
    assert.equal(svc.stderr().trim(), `Configuration error: METRICS_PORT must differ from PORT (${port})`);
  });
});
