import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createApp } from '../../src/app.js';
import { recordEvent } from '../../src/modules/events/events.repository.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { account, addKey, offerIds } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'es-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

interface StreamEvent {
  id: string;
  event: string;
  data: { id: string; type: string; createdAt: string; data: { rentalId?: string; status?: string } };
}

/** An open event stream, read as it arrives. */
interface Stream {
  status: number;
  headers: Headers;
  events: StreamEvent[];
  raw: string;
  ended: Promise<void>;
  close(): void;
}

async function listen(app: Express): Promise<{ server: Server; base: string }> {
  const server = createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function open(
  base: string,
  who: SignedUp | undefined,
  opts: { lastEventId?: string; after?: string } = {},
): Promise<Stream> {
  const abort = new AbortController();
  const headers: Record<string, string> = { Accept: 'text/event-stream', ...(who?.auth ?? {}) };
  if (opts.lastEventId !== undefined) headers['Last-Event-ID'] = opts.lastEventId;
  const res = await fetch(`${base}/api/v1/events${opts.after === undefined ? '' : `?after=${opts.after}`}`, {
    headers,
    signal: abort.signal,
  });
  const stream: Stream = {
    status: res.status,
    headers: res.headers,
    events: [],
    raw: '',
    ended: Promise.resolve(),
    close: () => abort.abort(),
  };
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  stream.ended = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        stream.raw += decoder.decode(value, { stream: true });
        const blocks = stream.raw.split('\n\n');
        stream.events = blocks.slice(0, -1).flatMap((block) => {
          const fields = Object.fromEntries(
            block
              .split('\n')
              .filter((l) => !l.startsWith(':'))
              .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]),
          );
          return fields.id ? [{ id: fields.id, event: fields.event, data: JSON.parse(fields.data) }] : [];
        });
      }
    } catch {
      // Aborted by the test.
    }
  })();
  return stream;
}

/** GET /api/v1/events as Server-Sent Events. */
describe('events: the stream', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let worker: TestWorker;
  let ids: Record<string, string>;
  let server: Server;
  let base: string;

  before(async () => {
    ctx = await createTestContext({
      offers: OFFERS,
      env: { RENTAL_POLL_MS: '50' },
      app: { eventStream: { heartbeatMs: 150 } },
    });
    ids = await offerIds(ctx);
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
    ({ server, base } = await listen(ctx.app));
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await ctx.services.eventHub.stop();
    await worker.stop();
    await ctx.close();
  });

  const newest = async (who: SignedUp): Promise<string> =>
    (await ctx.api.get('/api/v1/events').set(who.auth)).body.meta.nextAfter;

  async function rent(who: SignedUp): Promise<{ rentalId: string; deploymentId: string }> {
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: ids['es-h100'] });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { rentalId, deploymentId } = res.body.data;
    await reach(who, rentalId, 'ACTIVE');
    return { rentalId, deploymentId };
  }
  async function reach(who: SignedUp, rentalId: string, status: string): Promise<void> {
    const now = async () => (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data.status;
    await waitFor(async () => (ctx.clock.advance(200), (await now()) === status), { what: status });
  }
  async function terminate(who: SignedUp, r: { rentalId: string; deploymentId: string }): Promise<void> {
    assert.equal((await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(who.auth)).status, 202);
    await reach(who, r.rentalId, 'TERMINATED');
  }
  const typesOf = (s: Stream, rentalId: string) =>
    s.events.filter((e) => e.data.data.rentalId === rentalId).map((e) => e.event);

  it('replays the log after Last-Event-ID, then delivers live events, each as id, event and data', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const start = await newest(who);
    const r = await rent(who);
    const s = await open(base, who, { lastEventId: start });
    assert.equal(s.status, 200);
    assert.match(s.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.match(s.headers.get('cache-control') ?? '', /no-cache/);
    assert.equal(s.headers.get('x-accel-buffering'), 'no');
    await waitFor(async () => typesOf(s, r.rentalId).length >= 2, { timeoutMs: 5000, what: 'the replay' });
    assert.deepEqual(typesOf(s, r.rentalId), ['rental.provisioning', 'rental.active']);
    await terminate(who, r);
    await waitFor(async () => typesOf(s, r.rentalId).length >= 4, { timeoutMs: 5000, what: 'the live events' });
    assert.deepEqual(typesOf(s, r.rentalId), [
      'rental.provisioning',
      'rental.active',
      'rental.terminating',
      'rental.terminated',
    ]);
    for (const e of s.events) {
      assert.equal(e.data.id, e.id);
      assert.equal(e.data.type, e.event);
      assert.deepEqual(Object.keys(e.data).sort(), ['createdAt', 'data', 'id', 'type']);
    }
    // The JSON paging shows the same events with the same ids.
    const page = (await ctx.api.get('/api/v1/events').query({ after: start, limit: 10 }).set(who.auth)).body.data;
    assert.deepEqual(
      page.map((e: { id: string }) => e.id),
      s.events.map((e) => e.id),
    );
    s.close();
    await s.ended;
    await waitFor(async () => ctx.services.eventHub.listeners === 0, {
      timeoutMs: 2000,
      what: 'the hub to let the stream go',
    });
  });

  it('resumes from ?after= too, and without an id starts with the next event', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const start = await newest(who);
    const r = await rent(who);
    const fromAfter = await open(base, who, { after: start });
    await waitFor(async () => typesOf(fromAfter, r.rentalId).length >= 2, { timeoutMs: 5000, what: 'the replay' });
    const fromNow = await open(base, who);
    await waitFor(async () => ctx.services.eventHub.listeners >= 2, {
      timeoutMs: 2000,
      what: 'both streams listening',
    });
    await terminate(who, r);
    await waitFor(async () => typesOf(fromNow, r.rentalId).length >= 2, { timeoutMs: 5000, what: 'the live events' });
    assert.deepEqual(typesOf(fromNow, r.rentalId), ['rental.terminating', 'rental.terminated']);
    assert.deepEqual(typesOf(fromAfter, r.rentalId), [
      'rental.provisioning',
      'rental.active',
      'rental.terminating',
      'rental.terminated',
    ]);
    fromAfter.close();
    fromNow.close();
  });

  it("never shows one key another key's events; the owner sees the account's", async () => {
    const agentA = await account(ctx, { creditsMinor: 5000 });
    const agentB = await addKey(ctx, agentA.accountId);
    const owner = await addKey(ctx, agentA.accountId, { kind: 'OWNER' });
    const stranger = await account(ctx, { creditsMinor: 5000 });
    const start = await newest(owner);
    const streams = await Promise.all(
      [agentA, agentB, owner, stranger].map((who) => open(base, who, { lastEventId: start })),
    );
    const a = await rent(agentA);
    const b = await rent(agentB);
    await waitFor(async () => streams[2].events.length >= 4, { timeoutMs: 5000, what: "the owner's events" });
    // A later event each stream must show: the hub hands every stream the log in one order and a stream
    // sends in that order, so a stream showing it has shown whatever of the rentals' events it would.
    for (const accountId of [agentA.accountId, stranger.accountId])
      await recordEvent(ctx.services.ds.manager, {
        type: 'credits.low',
        accountId,
        keyId: null,
        rentalId: null,
        data: { balanceMinor: 10 },
        at: new Date(),
      });
    await waitFor(() => streams.every((s) => s.events.some((e) => e.event === 'credits.low')), {
      what: 'every stream to show its account event',
    });
    const rentalsOf = (s: Stream) => [...new Set(s.events.flatMap((e) => e.data.data.rentalId ?? []))].sort();
    assert.deepEqual(rentalsOf(streams[0]), [a.rentalId]);
    assert.deepEqual(rentalsOf(streams[1]), [b.rentalId]);
    assert.deepEqual(rentalsOf(streams[2]), [a.rentalId, b.rentalId].sort());
    assert.deepEqual(
      streams[3].events.map((e) => e.event),
      ['credits.low'],
    );
    streams.forEach((s) => s.close());
  });

  it('sends heartbeat comments, and ends the stream after its longest life', async () => {
    const who = await account(ctx);
    const s = await open(base, who);
    await waitFor(async () => s.raw.includes(': heartbeat\n\n'), { timeoutMs: 2000, what: 'a heartbeat' });
    s.close();

    const short = await listen(createApp(ctx.services, { eventStream: { heartbeatMs: 10_000, maxMs: 400 } }));
    try {
      const started = Date.now();
      const ending = await open(short.base, who);
      await ending.ended;
      const took = Date.now() - started;
      assert.ok(took >= 350 && took < 3000, `ended after ${took} ms`);
      await waitFor(async () => ctx.services.eventHub.listeners === 0, {
        timeoutMs: 2000,
        what: 'the hub to let the streams go',
      });
    } finally {
      short.server.closeAllConnections();
      await new Promise((r) => short.server.close(r));
    }
  });

  it('ends the stream of a key revoked while it is open, at the next heartbeat', async () => {
    const who = await account(ctx);
    const s = await open(base, who);
    await waitFor(async () => s.raw.includes(': heartbeat\n\n'), { timeoutMs: 2000, what: 'the stream to be open' });
    await ctx.services.ds.query('UPDATE api_keys SET revoked_at = NOW(3) WHERE id = ?', [who.keyId]);
    const started = Date.now();
    await s.ended;
    assert.ok(Date.now() - started < 3000, 'ended within a few heartbeats');
  });

  it('authenticates as the bearer routes do, and refuses an id that is not one', async () => {
    const none = await fetch(`${base}/api/v1/events`, { headers: { Accept: 'text/event-stream' } });
    assert.equal(none.status, 401);
    assert.equal(((await none.json()) as { error: { code: string } }).error.code, 'UNAUTHENTICATED');
    const who = await account(ctx, { scopes: ['rent'] });
    const noRead = await fetch(`${base}/api/v1/events`, { headers: { Accept: 'text/event-stream', ...who.auth } });
    assert.equal(noRead.status, 403);
    await noRead.body?.cancel();
    const reader = await account(ctx);
    const bad = await fetch(`${base}/api/v1/events`, {
      headers: { Accept: 'text/event-stream', 'Last-Event-ID': 'abc', ...reader.auth },
    });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { code: string } }).error.code, 'INVALID_REQUEST');
    const json = await fetch(`${base}/api/v1/events`, { headers: reader.auth });
    assert.equal(json.status, 200);
    assert.match(json.headers.get('content-type') ?? '', /json/);
    await json.body?.cancel();
  });
});
