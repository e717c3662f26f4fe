import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  GprApiError,
  GprClient,
  GprNetworkError,
  GprRentalStateError,
  GprTimeoutError,
  type Rental,
} from '../../clients/sdk/src/index.js';
import { RENTAL_ID, RentalService } from './helpers/rental-service.js';
import { renderSdkTypes, SDK_TYPES_PATH } from '../../scripts/generate-sdk-types.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { offerIds } from '../helpers/rentals.js';
import { freePort } from '../helpers/process.js';
import { withTimeout } from '../helpers/wait.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'sdk-l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 48,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
  {
    key: 'sdk-slow',
    name: 'NVIDIA L40S',
    category: 'datacenter',
    vramGb: 48,
    gpuCount: 1,
    pricePerHourMinor: 99,
    maximumDurationSeconds: 86400,
    provisionSeconds: 86400,
  },
  {
    key: 'sdk-fail',
    name: 'NVIDIA RTX A6000',
    category: 'workstation',
    vramGb: 48,
    gpuCount: 1,
    pricePerHourMinor: 79,
    maximumDurationSeconds: 86400,
    create: 'fail',
    provisionSeconds: 0,
  },
];

interface Seen {
  method: string;
  path: string;
  idempotencyKey?: string;
}

/**
 * Stands between the SDK and the app like a flaky network or load balancer: `plan` decides per
 * request whether to pass it on, answer for the app, or pass it on and lose the answer.
 */
async function flakyProxy(
  target: string,
  plan: (
    n: number,
    req: IncomingMessage,
  ) => 'pass' | 'lose-answer' | { status: number; headers?: Record<string, string> },
) {
  const seen: Seen[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    seen.push({
      method: req.method!,
      path: req.url!,
      idempotencyKey: req.headers['idempotency-key'] as string | undefined,
    });
    const action = plan(seen.length, req);
    if (typeof action === 'object') {
      res.writeHead(action.status, { 'Content-Type': 'application/json', ...action.headers });
      res.end(
        JSON.stringify({
          error: {
            code: action.status === 429 ? 'RATE_LIMITED' : 'UNAVAILABLE',
            message: 'from the proxy',
            requestId: 'req_proxy',
          },
        }),
      );
      return;
    }
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k)),
    ) as Record<string, string>;
    const upstream = await fetch(`${target}${req.url}`, {
      method: req.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
    });
    const body = Buffer.from(await upstream.arrayBuffer());
    if (action === 'lose-answer') {
      res.writeHead(502, { 'Content-Type': 'text/html' });
      res.end('<html>Bad gateway</html>');
      return;
    }
    res.writeHead(upstream.status, Object.fromEntries(upstream.headers));
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('GprClient (SDK) against the running test app', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let worker: TestWorker;
  let server: Server;
  let baseUrl: string;
  let ids: Record<string, string>;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { RENTAL_POLL_MS: '50' } });
    ids = await offerIds(ctx);
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
    server = ctx.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server?.close();
    await worker?.stop();
    await ctx.services.ds.query(`DELETE FROM agenda_jobs WHERE name LIKE 'rental.%'`);
    await ctx.close();
  });

  /** Moves the context's manual clock on while a wait is held, as time passing would (destruction checks run on it). */
  function ticking(stepMs = 500): { stop: () => void } {
    const t = setInterval(() => ctx.clock.advance(stepMs), 100);
    return { stop: () => clearInterval(t) };
  }

  /** A signed-up client whose account has `amountMinor` of credits, paid through the payment page. */
  async function funded(amountMinor = 2000, url = baseUrl) {
    const token = (await new GprClient({ baseUrl }).signup()).token;
    const client = new GprClient({ baseUrl, token });
    const topup = await client.createTopup(amountMinor);
    // The payment link names PUBLIC_BASE_URL (http://gpu.test); the page is this app's.
    assert.equal(
      (await fetch(`${baseUrl}${new URL(topup.paymentUrl!).pathname}`, { method: 'POST', redirect: 'manual' })).status,
      303,
    );
    assert.equal((await client.waitForTopup(topup.topupId, { intervalMs: 50 })).status, 'PAID');
    return { token, client: url === baseUrl ? client : new GprClient({ baseUrl: url, token, baseDelayMs: 10 }) };
  }

  it('has types generated from exactly the served /api/openapi.json (npm run clients:types)', async () => {
    assert.equal(await renderSdkTypes(), readFileSync(SDK_TYPES_PATH, 'utf8'));
  });

  it('reads public inventory and the account; errors carry code, message, request id and status', async () => {
    const pub = new GprClient({ baseUrl });
    assert.equal((await pub.offers()).length, 3);
    assert.equal((await pub.gpus()).count, 3);
    const { client } = await funded(700);
    const me = await client.me();
    assert.equal(me.balance.creditsMinor, 700);
    assert.equal(typeof me.billing.budgetRequired, 'boolean');

    const err = await new GprClient({ baseUrl, token: 'gpr_AAAAAAAA.nope' }).me().catch((e) => e);
    assert.ok(err instanceof GprApiError);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'UNAUTHENTICATED');
    assert.match(err.requestId!, /^req_/);
    assert.ok(err.message.length > 0);

    const down = await new GprClient({ baseUrl: `http://127.0.0.1:${await freePort()}`, retries: 0 })
      .offers()
      .catch((e) => e);
    assert.ok(down instanceof GprNetworkError);
  });

  it('retries a create whose answer was lost with the same Idempotency-Key: one rental, not two', async () => {
    const proxy = await flakyProxy(baseUrl, (n, req) =>
      req.method === 'POST' && req.url === '/api/v1/rentals' && n === 1 ? 'lose-answer' : 'pass',
    );
    try {
      const { client } = await funded(2000, proxy.url);
      proxy.seen.length = 0;
      const rental = await client.createRental({ offerId: ids['sdk-l4'], budgetMinor: 500 });
      const posts = proxy.seen.filter((s) => s.method === 'POST');
      assert.equal(posts.length, 2, 'sent twice');
      assert.ok(posts[0].idempotencyKey);
      assert.equal(posts[1].idempotencyKey, posts[0].idempotencyKey, 'with the same key');
      const deployments = await client.listDeployments();
      assert.deepEqual(
        deployments.map((d) => d.rentalId),
        [rental.rentalId],
        'the service made one rental',
      );
      await client.terminate(rental.deploymentId!);
    } finally {
      await proxy.close();
    }
  });

  it('waits out a 429 per Retry-After, and hands back one that asks for longer than it will wait', async () => {
    const proxy = await flakyProxy(baseUrl, (n) =>
      n === 1
        ? { status: 429, headers: { 'Retry-After': '1' } }
        : n === 3
          ? { status: 429, headers: { 'Retry-After': '120' } }
          : 'pass',
    );
    try {
      const client = new GprClient({ baseUrl: proxy.url, maxRetryAfterMs: 5000 });
      assert.equal((await client.offers()).length, 3);
      assert.equal(proxy.seen.length, 2);
      const err = await client.gpus().catch((e) => e);
      assert.ok(err instanceof GprApiError);
      assert.equal(err.status, 429);
      assert.equal(err.retryAfterSeconds, 120);
      assert.equal(proxy.seen.length, 3, 'not retried');
    } finally {
      await proxy.close();
    }
  });

  it('does not resend a POST without an Idempotency-Key after a 5xx', async () => {
    const proxy = await flakyProxy(baseUrl, (_n, req) => (req.method === 'POST' ? { status: 503 } : 'pass'));
    try {
      const { client } = await funded(600, proxy.url);
      proxy.seen.length = 0;
      const err = await client.terminate('00000000-0000-4000-8000-000000000000').catch((e) => e);
      assert.ok(err instanceof GprApiError);
      assert.equal(err.status, 503);
      assert.equal(proxy.seen.length, 1);
    } finally {
      await proxy.close();
    }
  });

  it('sends machine settings and a lease: the rental shows the variable names, the lease and, once ACTIVE, endsAt; never the values', async () => {
    const { client } = await funded(1000);
    const secret = 'hf_sdk_secret_value_0123456789';
    const rental = await client.createRental({
      offerId: ids['sdk-l4'],
      budgetMinor: 500,
      machine: { env: { HF_TOKEN: secret, MODEL_ID: 'm' } },
      terminateAfterSeconds: 3600,
    });
    assert.deepEqual(rental.machine.envNames, ['HF_TOKEN', 'MODEL_ID']);
    assert.equal(rental.leaseSeconds, 3600);
    assert.ok(!JSON.stringify(rental).includes(secret), 'the value is not returned');
    const phases: string[] = [];
    const active = await client.waitForRental(rental.rentalId, {
      until: 'ACTIVE',
      timeoutMs: 20_000,
      onPhase: (r) => phases.push(`${r.status}/${r.phase ?? ''}`),
    });
    assert.equal(phases.at(-1), 'ACTIVE/');
    assert.ok(
      phases.every((p, i) => i === 0 || p !== phases[i - 1]),
      `one call per change: ${phases.join(' ')}`,
    );
    assert.ok(active.endsAt, 'a lease ends');
    assert.equal(Date.parse(active.endsAt) - Date.parse(active.deployment!.startedAt!), 3600_000);
    assert.ok(!JSON.stringify(await client.getRental(rental.rentalId)).includes(secret));
    await client.terminate(rental.deploymentId!);
    const clock = ticking();
    try {
      await client.waitForRental(rental.rentalId, { until: 'TERMINATED', timeoutMs: 20_000 });
    } finally {
      clock.stop();
    }
  });

  it('waitForRental: ACTIVE with progress, TERMINATED after terminate, a timeout, and FAILED as an error', async () => {
    const { client } = await funded(3000);
    const rental = await client.createRental({ offerId: ids['sdk-l4'], budgetMinor: 500 });
    const seen: string[] = [];
    const active = await client.waitForRental(rental.rentalId, {
      until: 'ACTIVE',
      timeoutMs: 20_000,
      onProgress: (r: Rental) => seen.push(r.status),
    });
    assert.equal(active.status, 'ACTIVE');
    assert.equal(seen.at(-1), 'ACTIVE');
    assert.deepEqual(
      (await client.resolve(rental.deploymentId!)).rentalId,
      rental.rentalId,
      'a deployment id resolves to its rental',
    );
    await client.terminate(rental.deploymentId!);
    const clock = ticking();
    const ended = await client
      .waitForRental(rental.rentalId, { until: 'TERMINATED', timeoutMs: 20_000 })
      .finally(clock.stop);
    assert.equal(ended.status, 'TERMINATED');
    assert.ok(ended.endedAt);

    const slow = await client.createRental({ offerId: ids['sdk-slow'], budgetMinor: 500 }).catch((e) => e);
    // One concurrent rental per signup key: the first has ended, so this one is admitted.
    assert.ok(!(slow instanceof Error), String(slow));
    const timeout = await client.waitForRental(slow.rentalId, { until: 'ACTIVE', timeoutMs: 300 }).catch((e) => e);
    assert.ok(timeout instanceof GprTimeoutError);
    await client.terminate(slow.deploymentId);
    const clock2 = ticking();
    await client.waitForRental(slow.rentalId, { until: 'TERMINATED', timeoutMs: 20_000 }).finally(clock2.stop);

    const failing = await client.createRental({ offerId: ids['sdk-fail'], budgetMinor: 500 });
    const clock3 = ticking(200);
    const failed = await client
      .waitForRental(failing.rentalId, { until: 'ACTIVE', timeoutMs: 20_000 })
      .catch((e) => e)
      .finally(clock3.stop);
    assert.ok(failed instanceof GprRentalStateError, String(failed));
    assert.equal(failed.rental.status, 'FAILED');
  });

  it('waitFor returns on ACTIVE through waiting reads: one held read per change of status, none sent faster than the server answers', async () => {
    const proxy = await flakyProxy(baseUrl, () => 'pass');
    try {
      const { client } = await funded(1000, proxy.url);
      const rental = await client.createRental({ offerId: ids['sdk-l4'], budgetMinor: 500 });
      proxy.seen.length = 0;
      const statuses: string[] = [];
      const started = Date.now();
      const active = await client.waitFor(rental.rentalId, ['ACTIVE'], {
        timeoutMs: 20_000,
        onPhase: (r) => statuses.push(r.status),
      });
      assert.equal(active.status, 'ACTIVE');
      const reads = proxy.seen.filter((x) => x.method === 'GET');
      assert.ok(!reads[0].path.includes('waitFor'), 'the first read is plain');
      for (const r of reads.slice(1))
        assert.match(decodeURIComponent(r.path), /\?waitFor=[A-Z_,]+&waitSeconds=\d+$/, r.path);
      const changes = new Set(statuses).size;
      assert.ok(reads.length <= changes + 1, `${reads.length} reads for ${statuses.join(' ')}`);
      assert.ok(Date.now() - started < 10_000);
      await client.terminate(rental.deploymentId!);
      const clock = ticking();
      await client.waitFor(rental.rentalId, ['TERMINATED'], { timeoutMs: 20_000 }).finally(clock.stop);
    } finally {
      await proxy.close();
    }
  });

  it('events pages the log after an id, and streamEvents yields the same events live, resuming from the last id', async () => {
    const { client } = await funded(1000);
    const start = await client.events();
    assert.deepEqual(start.data, []);
    const controller = new AbortController();
    const streamed: string[] = [];
    const reading = (async () => {
      for await (const e of client.streamEvents({ after: start.nextAfter, signal: controller.signal })) {
        streamed.push(`${e.type} ${(e.data as { rentalId?: string }).rentalId}`);
        if (e.type === 'rental.active') break;
      }
    })();
    const rental = await client.createRental({ offerId: ids['sdk-l4'], budgetMinor: 500 });
    await client.waitFor(rental.rentalId, ['ACTIVE'], { timeoutMs: 20_000 });
    await withTimeout(reading, {
      timeoutMs: 10_000,
      what: () => `rental.active on the stream, which saw only ${streamed.join(', ')}`,
    });
    controller.abort();
    const page = await client.events({ after: start.nextAfter });
    assert.deepEqual(
      streamed,
      page.data.map((e) => `${e.type} ${(e.data as { rentalId?: string }).rentalId}`),
    );
    assert.equal(streamed.at(-1), `rental.active ${rental.rentalId}`);
    assert.equal((await client.events({ after: page.nextAfter })).data.length, 0);
    const refused = await new GprClient({ baseUrl, token: 'gpr_AAAAAAAA.nope' })
      .streamEvents()
      .next()
      .catch((e) => e);
    assert.ok(refused instanceof GprApiError && refused.status === 401, String(refused));
    await client.terminate(rental.deploymentId!);
    const clock = ticking();
    await client.waitFor(rental.rentalId, ['TERMINATED'], { timeoutMs: 20_000 }).finally(clock.stop);
  });
});

describe('GprClient (SDK): the rental request and phases as sent and seen', () => {
  const service = new RentalService();
  before(() => service.start());
  after(() => service.stop());

  it('createRental sends machine, terminateAfterSeconds and waitForCapacitySeconds exactly as given, with an Idempotency-Key', async () => {
    const client = new GprClient({ baseUrl: service.baseUrl, token: 'gpr_AAAAAAAA.x', retries: 0 });
    const body = {
      gpuModel: 'H100 SXM',
      gpuCount: 1 as const,
      maxHourlyPriceMinor: 400,
      machine: {
        image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
        env: { HF_TOKEN: 'hf_x' },
        startupScript: '#!/bin/sh\necho hi\n',
        ports: [8000],
        diskGb: 100,
      },
      terminateAfterSeconds: 7200,
      waitForCapacitySeconds: 1800,
    };
    const rental = await client.createRental(body, 'key-1');
    assert.deepEqual(
      service.creates.map((r) => [r.body, r.idempotencyKey]),
      [[body, 'key-1']],
    );
    assert.equal(rental.phase, 'waiting_for_capacity');
  });

  it('waitForRental calls onPhase once per change of status or phase', async () => {
    service.states = [
      { status: 'PENDING', phase: 'waiting_for_capacity' },
      { status: 'PENDING', phase: 'waiting_for_capacity' },
      { status: 'PROVISIONING', phase: 'creating' },
      { status: 'PROVISIONING', phase: 'booting' },
      { status: 'PROVISIONING', phase: 'booting' },
      { status: 'ACTIVE', phase: null },
    ];
    const client = new GprClient({ baseUrl: service.baseUrl, token: 'gpr_AAAAAAAA.x', retries: 0 });
    const phases: string[] = [];
    let polls = 0;
    const r = await client.waitForRental(RENTAL_ID, {
      until: 'ACTIVE',
      intervalMs: 1,
      onProgress: () => polls++,
      onPhase: (x) => phases.push(`${x.status} ${x.phase ?? '-'}`),
    });
    assert.equal(r.status, 'ACTIVE');
    assert.equal(polls, 6);
    assert.deepEqual(phases, [
      'PENDING waiting_for_capacity',
      'PROVISIONING creating',
      'PROVISIONING booting',
      'ACTIVE -',
    ]);
  });

  it('streamEvents reconnects with Last-Event-ID when the server ends the stream, skipping heartbeats', async () => {
    const lastIds: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      lastIds.push(req.headers['last-event-id'] as string | undefined);
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      const id = String(lastIds.length + 40);
      const event = { id, type: 'rental.active', createdAt: '2026-01-15T12:00:00.000Z', data: { rentalId: RENTAL_ID } };
      res.end(`: heartbeat\n\nid: ${id}\r\nevent: rental.active\r\ndata: ${JSON.stringify(event)}\r\n\r\n`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const client = new GprClient({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        token: 'gpr_AAAAAAAA.x',
      });
      const ids: string[] = [];
      for await (const e of client.streamEvents({ after: '40' })) {
        ids.push(e.id);
        if (ids.length === 3) break;
      }
      assert.deepEqual(ids, ['41', '42', '43']);
      assert.deepEqual(lastIds, ['40', '41', '42']);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
