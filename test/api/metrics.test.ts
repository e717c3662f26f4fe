import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { RENTAL_COUNTS_CACHE_MS } from '../../src/metrics/metrics-endpoint.js';
import { startMetricsListener } from '../../src/metrics-listener.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { startTestWorker } from '../helpers/jobs.js';
import { freePort } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { account, credit, discardQueuedRentalJobs, offerIds, rent, rentOk } from '../helpers/rentals.js';

const TOKEN = 'metrics-token-for-the-tests-0123456789';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text: every line must be a comment or `name{labels} value`, else it throws. */
function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
    // Values as Go's ParseFloat reads them, which ignores case in NaN and Inf: prom-client writes
    // an empty gauge (the event-loop lag between two close scrapes) as `Nan`.
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?[0-9.e+-]+|NaN|[+-]Inf)$/i.exec(line);
    assert.ok(m, `not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[2] ?? '';
    const pairs = [...body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)];
    assert.equal(pairs.map((p) => p[0]).join(','), body, `labels of ${line}`);
    for (const [, k, v] of pairs) labels[k] = v;
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

/** The value of the one sample of `name` whose labels include `labels` (0 when there is none). */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const hits = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return hits.reduce((sum, s) => sum + s.value, 0);
}

describe('GET /metrics', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext({ env: { METRICS_TOKEN: TOKEN } });
  });
  after(() => ctx.close());

  const scrape = async () => {
    const res = await ctx.api.get('/metrics').set('Authorization', `Bearer ${TOKEN}`);
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/);
    return parseMetrics(res.text);
  };

  it('is refused without the token, or with another, as 401 with a Bearer challenge', async () => {
    const none = await ctx.api.get('/metrics');
    assert.equal(none.status, 401);
    assert.equal(none.body.error.code, 'UNAUTHENTICATED');
    assert.match(none.headers['www-authenticate'], /^Bearer/);
    assert.equal((await ctx.api.get('/metrics').set('Authorization', `Bearer ${TOKEN}x`)).status, 401);
    assert.equal((await ctx.api.get('/metrics').set('Authorization', TOKEN)).status, 401);
    assert.doesNotMatch(none.text, /gpu_rental_/);
  });

  it('is not on the api port at all without METRICS_TOKEN', async () => {
    const plain = await createTestContext();
    try {
      assert.equal((await plain.api.get('/metrics')).status, 404);
    } finally {
      await plain.close();
    }
  });

  it('has each series after admissions, a refusal, a top-up, a sweep, a job, provider calls and a webhook try, labelled only with bounded values', async () => {
    const before = await scrape();
    const who = await account(ctx, { creditsMinor: 50_000 });
    await credit(ctx, who.accountId, 1234);
    const offers = await offerIds(ctx);
    const offerId = Object.values(offers)[0];
    const rental = await rentOk(ctx, who, { offerId });
    const refused = await rent(ctx, who, { offerId: randomUUID() });
    assert.equal(refused.status, 404);
    assert.equal((await ctx.api.get(`/api/v1/rentals/${rental.rentalId}`).set(who.auth)).status, 200);
    assert.equal((await ctx.api.get(`/api/v1/rentals/${randomUUID()}`).set(who.auth)).status, 404);
    assert.equal((await ctx.api.get(`/nowhere/${randomUUID()}/${who.accountId}`)).status, 404);
    await ctx.api.get('/api/v1/offers');
    await ctx.services.providers.get('local').listInstances();
    // A webhook try of a delivery that does not exist is skipped, through the job's own handler.
    await ctx.services.jobDefinitions.find((d) => d.name === 'webhooks.deliver')!.handler({ deliveryId: randomUUID() });
    await discardQueuedRentalJobs(ctx);
    const worker = await startTestWorker(ctx);
    try {
      await ctx.services.jobs.now('rental.meter', {});
      // The run of this one job, not every job it may lead to: the sweep also meters the rentals
      // other files left running in the run's database, and may queue their ends.
      const meterRuns = (samples: Sample[]) =>
        valueOf(samples, 'gpu_rental_job_runs_total', { job_name: 'rental.meter', outcome: 'success' });
      await waitFor(async () => meterRuns(await scrape()) > meterRuns(before), {
        timeoutMs: 30_000,
        what: 'the metering job to run',
      });
    } finally {
      await worker.stop();
    }

    const cached = await scrape();
    assert.equal(
      valueOf(cached, 'gpu_rental_rentals', { status: 'PENDING' }),
      valueOf(before, 'gpu_rental_rentals', { status: 'PENDING' }),
      'rentals are read at most once per cache period',
    );
    ctx.clock.advance(RENTAL_COUNTS_CACHE_MS);
    const after = await scrape();
    const grew = (name: string, labels: Record<string, string> = {}) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);
    assert.ok(
      grew('gpu_rental_http_requests_total', { method: 'GET', route: '/api/v1/rentals/:id', status: '200' }) >= 1,
    );
    assert.ok(
      grew('gpu_rental_http_requests_total', { method: 'GET', route: '/api/v1/rentals/:id', status: '404' }) >= 1,
    );
    assert.ok(grew('gpu_rental_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }) >= 1);
    assert.ok(
      grew('gpu_rental_http_requests_total', { method: 'GET', route: '/api/v1/offers', status: '200' }) >= 1,
      'the fast inventory read has its template',
    );
    assert.ok(
      grew('gpu_rental_http_request_duration_seconds_count', {
        method: 'POST',
        route: '/api/v1/rentals',
        status: '201',
      }) >= 1,
    );
    assert.ok(grew('gpu_rental_admissions_total', { outcome: 'admitted' }) >= 1);
    assert.ok(grew('gpu_rental_admissions_total', { outcome: 'OFFER_NOT_FOUND' }) >= 1);
    assert.ok(
      valueOf(after, 'gpu_rental_rentals', { status: 'PENDING' }) >=
        valueOf(before, 'gpu_rental_rentals', { status: 'PENDING' }) + 1,
    );
    assert.ok(
      after.some((s) => s.name === 'gpu_rental_rentals' && s.labels.status === 'ACTIVE'),
      'every unfinished status is listed',
    );
    assert.ok(
      !after.some((s) => s.name === 'gpu_rental_rentals' && s.labels.status === 'TERMINATED'),
      'finished rentals are not counted',
    );
    assert.ok(
      grew('gpu_rental_provider_calls_total', { provider: 'local', operation: 'listInstances', outcome: 'ok' }) >= 1,
    );
    assert.ok(
      valueOf(after, 'gpu_rental_provider_call_duration_seconds_count', {
        provider: 'local',
        operation: 'listOffers',
        outcome: 'ok',
      }) >= 1,
    );
    assert.ok(grew('gpu_rental_webhook_deliveries_total', { outcome: 'skipped' }) >= 1);
    assert.ok(grew('gpu_rental_credits_minor_total', { kind: 'TOPUP', direction: 'in' }) >= 50_000 + 1234);
    assert.ok(grew('gpu_rental_job_runs_total', { job_name: 'rental.meter', outcome: 'success' }) >= 1);
    assert.ok(grew('gpu_rental_job_duration_seconds_count', { job_name: 'rental.meter', outcome: 'success' }) >= 1);
    assert.ok(grew('gpu_rental_job_lag_seconds_count', { job_name: 'rental.meter' }) >= 1);
    assert.ok(grew('gpu_rental_metering_sweep_duration_seconds_count') >= 1);
    assert.ok(after.some((s) => s.name === 'gpu_rental_metering_rentals_swept_total'));
    assert.ok(valueOf(after, 'gpu_rental_process_cpu_seconds_total') > 0, 'the process metrics carry the prefix');

    // Our own series (Node's process metrics aside) carry no id, key, email or address.
    const ours = after.filter((s) => s.name.startsWith('gpu_rental_') && !/^gpu_rental_(process|nodejs)_/.test(s.name));
    for (const s of ours) {
      for (const [k, v] of Object.entries(s.labels)) {
        if (k === 'le') continue;
        const where = `${s.name} ${k}="${v}"`;
        assert.doesNotMatch(v, /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i, where);
        if (k !== 'status' || !/^[1-5]\d\d$/.test(v)) assert.doesNotMatch(v, /^\d+$/, where);
        assert.doesNotMatch(v, /@|\b\d{1,3}(\.\d{1,3}){3}\b|::/, where);
        assert.ok(!v.includes(who.token) && !v.includes(who.accountId), where);
      }
    }
    const routes = new Set(ours.filter((s) => s.name === 'gpu_rental_http_requests_total').map((s) => s.labels.route));
    for (const r of routes) assert.match(r, /^(\/[\w.-]*|\/:\w+)*$|^(unmatched|other)$/, `route label ${r}`);
  });

  describe('on METRICS_PORT', () => {
    let own: TestContext;
    let server: Server | undefined;
    let port: number;
    before(async () => {
      port = await freePort();
      own = await createTestContext({ env: { METRICS_PORT: String(port) } });
      server = await startMetricsListener(own.services, ['worker']);
    });
    after(async () => {
      await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
      await own.close();
    });

    it('serves /metrics, /readyz and /healthz on loopback for a worker, and nothing of it on the api port', async () => {
      const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(metrics.status, 200);
      assert.ok(parseMetrics(await metrics.text()).some((s) => s.name === 'gpu_rental_http_requests_total'));
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      assert.equal(ready.status, 200);
      assert.deepEqual(((await ready.json()) as { data: unknown }).data, {
        status: 'ready',
        checks: { database: 'ok', migrations: 'ok' },
      });
      assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
      assert.equal((await fetch(`http://127.0.0.1:${port}/api/v1/offers`)).status, 404);
      assert.equal((await own.api.get('/metrics')).status, 404);
    });
  });
});
