import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createApp } from '../../src/app.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup, type SignedUp } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { sentRequests } from '../helpers/sql-requests.js';
import { account, offerIds } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'pl-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

/** Client addresses as a trusted proxy on loopback states them (TRUST_PROXY=loopback); nothing connects to them. */
const ADDRESS = { a: '198.51.100.1', b: '198.51.100.2', c: '198.51.100.3', d: '198.51.100.4' };

interface ErrorBody {
  error: { code: string; message: string; requestId: string };
}

/** An event stream or waiting read as the client sees it: open (200, read as it comes) or refused. */
interface Push {
  status: number;
  headers: Headers;
  /** The envelope of a refusal. */
  error?: ErrorBody['error'];
  /** What came of a 200 so far (heartbeat comments and events). */
  raw: string;
  /** Resolves when the server ends the answer (or the client closes it). */
  ended: Promise<void>;
  close(): void;
}

/** GET `path` of `base` as `who` from `address`, holding the answer open while the server does. */
async function push(base: string, path: string, who: SignedUp, address: string, accept?: string): Promise<Push> {
  const abort = new AbortController();
  const headers: Record<string, string> = {
    ...who.auth,
    'X-Forwarded-For': address,
    ...(accept ? { Accept: accept } : {}),
  };
  const res = await fetch(`${base}${path}`, { headers, signal: abort.signal });
  const out: Push = {
    status: res.status,
    headers: res.headers,
    raw: '',
    ended: Promise.resolve(),
    close: () => abort.abort(),
  };
  if (res.status === 429) {
    out.error = ((await res.json()) as ErrorBody).error;
    return out;
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  out.ended = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        out.raw += decoder.decode(value, { stream: true });
      }
    } catch {
      // Closed by the test.
    }
  })();
  return out;
}

const stream = (base: string, who: SignedUp, address: string) =>
  push(base, '/api/v1/events', who, address, 'text/event-stream');

/** The bounds of streams and waiting reads (finding 5) and what a revoked key's waits do (finding 19). */
describe('push limits: event streams and waiting reads', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let server: Server;
  let base: string;
  let offer: string;

  before(async () => {
    ctx = await createTestContext({
      offers: OFFERS,
      env: { TRUST_PROXY: 'loopback', PUSH_MAX_PER_KEY: '3', PUSH_MAX_PER_ADDRESS: '5', PUSH_MAX_OPEN: '8' },
      // No heartbeat within a test: what ends a stream here is the hub, not a heartbeat.
      app: { eventStream: { heartbeatMs: 600_000 } },
    });
    offer = (await offerIds(ctx))['pl-h100'];
    server = createServer(ctx.app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await ctx.close();
  });

  const limits = () => ctx.services.eventHub.limits!;
  const hub = () => ctx.services.eventHub;
  /** Nothing of any stream or wait is left: no place, no key or address entry, no hub listener. */
  const nothingHeld = async () =>
    limits().open === 0 &&
    limits().listeners === 0 &&
    limits().tracked.keys === 0 &&
    limits().tracked.addresses === 0 &&
    hub().listeners === 0 &&
    hub().listeningKeys === 0;

  /** A PENDING rental of `who` (no worker runs here, so it stays PENDING and a wait for ACTIVE holds). */
  async function pendingRental(who: SignedUp): Promise<string> {
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: offer });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data.rentalId as string;
  }

  /** A 429 with Retry-After and `message`; refused before the key was read (address, ceiling), its connection closes. */
  function assertRefused(p: Push, message: RegExp): void {
    assert.equal(p.status, 429);
    assert.equal(p.error?.code, 'RATE_LIMITED');
    assert.equal(p.headers.get('retry-after'), '5');
    assert.match(p.error!.message, message);
    if (/^This (address|server)/.test(p.error!.message))
      assert.equal(p.headers.get('connection'), 'close', 'the refusal frees its descriptor at once');
  }

  it('replays the flood of streams at a small scale: 429 past each bound, /healthz and other requests answer, closing frees places', async () => {
    const [k1, k2, k3, k4] = await Promise.all([signup(ctx), signup(ctx), signup(ctx), signup(ctx)]);
    const open: Push[] = [];
    for (let i = 0; i < 3; i++) open.push(await stream(base, k1, ADDRESS.a));
    assert.deepEqual(
      open.map((s) => s.status),
      [200, 200, 200],
    );
    await waitFor(async () => hub().listeners === 3, { timeoutMs: 5000, what: 'three streams listening' });

    // One free key: its fourth stream is refused, saying how many and what to do.
    assertRefused(
      await stream(base, k1, ADDRESS.a),
      /This key already holds 3 event streams and waiting reads.*Close one/,
    );
    // The address: five in all, whichever keys.
    for (let i = 0; i < 2; i++) open.push(await stream(base, k2, ADDRESS.a));
    assertRefused(
      await stream(base, k2, ADDRESS.a),
      /This address already holds 5 event streams and waiting reads.*Close one/,
    );
    // The process: eight in all, whichever addresses.
    for (let i = 0; i < 3; i++) open.push(await stream(base, k3, ADDRESS.b));
    assert.deepEqual(
      open.map((s) => s.status),
      Array(8).fill(200),
    );
    await waitFor(async () => hub().listeners === 8, { timeoutMs: 5000, what: 'eight streams listening' });
    assertRefused(
      await stream(base, k4, ADDRESS.c),
      /This server holds the most event streams and waiting reads it takes at once \(8\)/,
    );
    assert.equal(limits().open, 8, 'a refused request holds no place');

    // Everything else still answers, from the same key and address too.
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const page = await fetch(`${base}/api/v1/events`, { headers: { ...k4.auth, 'X-Forwarded-For': ADDRESS.c } });
    assert.equal(page.status, 200);
    assert.equal(((await page.json()) as { data: unknown[] }).data.length, 0);
    const me = await fetch(`${base}/api/v1/me`, { headers: { ...k1.auth, 'X-Forwarded-For': ADDRESS.a } });
    assert.equal(me.status, 200);
    await me.body?.cancel();

    // Closing a stream frees its places at once.
    open[7].close();
    await waitFor(async () => limits().open === 7 && hub().listeners === 7, {
      timeoutMs: 5000,
      what: 'the closed stream to let go',
    });
    const again = await stream(base, k4, ADDRESS.c);
    assert.equal(again.status, 200);
    open.push(again);

    for (const s of open) s.close();
    await waitFor(nothingHeld, { timeoutMs: 5000, what: 'every place and listener to be given back' });
  });

  it('counts waiting reads with the streams, and a refused one answers before its key is read', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const rentalId = await pendingRental(who);
    // A waiting read's answer (its headers too) comes when the wait ends: these are not awaited yet.
    const headers = { ...who.auth, 'X-Forwarded-For': ADDRESS.d };
    const waits = [0, 1].map(() =>
      fetch(`${base}/api/v1/rentals/${rentalId}?waitFor=ACTIVE&waitSeconds=6`, { headers }),
    );
    const s = await stream(base, who, ADDRESS.d);
    assert.equal(s.status, 200);
    await waitFor(async () => limits().listeners === 3, { timeoutMs: 5000, what: 'two waits and a stream listening' });
    assertRefused(
      await push(base, `/api/v1/deployments/${rentalId}?waitFor=ACTIVE`, who, ADDRESS.d),
      /This key already holds 3/,
    );
    assertRefused(await stream(base, who, ADDRESS.d), /This key already holds 3/);
    // A plain read is no waiting read.
    const plain = await fetch(`${base}/api/v1/rentals/${rentalId}`, { headers });
    assert.equal(plain.status, 200);
    await plain.body?.cancel();

    // The waits end by themselves (200, still PENDING), and give their places back.
    for (const w of waits) {
      const answer = await w;
      assert.equal(answer.status, 200);
      assert.equal(((await answer.json()) as { data: { status: string } }).data.status, 'PENDING');
    }
    await waitFor(async () => limits().listeners === 1, { timeoutMs: 5000, what: 'the waits to let go' });
    const next = await push(base, `/api/v1/rentals/${rentalId}?waitFor=ACTIVE&waitSeconds=1`, who, ADDRESS.d);
    assert.equal(next.status, 200);
    await next.ended;
    s.close();
    await waitFor(nothingHeld, { timeoutMs: 5000, what: 'every place and listener to be given back' });

    // Over the process bound, a waiting read is refused before its key is read.
    const fill: Push[] = [];
    const keys = await Promise.all([0, 1, 2].map(() => signup(ctx)));
    for (const [i, k] of keys.entries())
      for (let j = 0; j < (i < 2 ? 3 : 2); j++) fill.push(await stream(base, k, [ADDRESS.a, ADDRESS.b, ADDRESS.c][i]));
    assert.equal(limits().open, 8);
    const sent = await sentRequests(() => push(base, `/api/v1/rentals/${rentalId}?waitFor=ACTIVE`, who, ADDRESS.d));
    assertRefused(sent.result, /This server holds/);
    assert.deepEqual(
      sent.sent.filter((q) => /FROM api_keys WHERE prefix/.test(q)),
      [],
      'no key was read for it',
    );
    fill.forEach((f) => f.close());
    await waitFor(nothingHeld, { timeoutMs: 5000, what: 'every place and listener to be given back' });
  });

  it('ends the waiting reads and streams of a key revoked meanwhile, within a tail period, whichever process revoked it', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const rentalId = await pendingRental(who);
    const waiting = fetch(`${base}/api/v1/rentals/${rentalId}?waitFor=ACTIVE&waitSeconds=30`, {
      headers: { ...who.auth, 'X-Forwarded-For': ADDRESS.a },
    });
    const s = await stream(base, who, ADDRESS.a);
    assert.equal(s.status, 200);
    await waitFor(async () => hub().listeners === 2, { timeoutMs: 5000, what: 'the wait and the stream listening' });

    // What another process's revocation leaves: the row, and no word to this one.
    await ctx.services.ds.query('UPDATE api_keys SET revoked_at = NOW(3) WHERE id = ?', [who.keyId]);
    const revokedAt = Date.now();
    const answer = await waiting;
    const tookWait = Date.now() - revokedAt;
    await s.ended;
    const tookStream = Date.now() - revokedAt;
    // The wait had 30 s left and the stream's heartbeat is minutes away: only the hub ends them this soon.
    assert.ok(tookWait < 5000, `the waiting read answered ${tookWait} ms after the revocation`);
    assert.ok(tookStream < 5000, `the stream ended ${tookStream} ms after the revocation`);
    assert.equal(answer.status, 401);
    const body = (await answer.json()) as ErrorBody;
    const plain = (await (
      await fetch(`${base}/api/v1/rentals/${rentalId}`, { headers: who.auth })
    ).json()) as ErrorBody;
    assert.deepEqual({ ...body.error, requestId: '' }, { ...plain.error, requestId: '' }, 'the uniform 401');
    assert.equal(body.error.code, 'UNAUTHENTICATED');
    await waitFor(nothingHeld, { timeoutMs: 5000, what: 'every place and listener to be given back' });
  });

  it('costs no query per open stream: heartbeats are comments, and one revocation check a tail period covers every key', async () => {
    // Heartbeats every 100 ms here, so a stream that read its key at each would show it at once.
    const fast = createServer(createApp(ctx.services, { eventStream: { heartbeatMs: 100 } }));
    await new Promise<void>((r) => fast.listen(0, '127.0.0.1', r));
    const fastBase = `http://127.0.0.1:${(fast.address() as AddressInfo).port}`;
    try {
      const keys = await Promise.all([0, 1].map(() => signup(ctx)));
      const open: Push[] = [];
      for (const [i, k] of keys.entries())
        for (let j = 0; j < 3; j++) open.push(await stream(fastBase, k, [ADDRESS.a, ADDRESS.b][i]));
      await waitFor(async () => hub().listeners === 6, { timeoutMs: 5000, what: 'six streams listening' });
      const isCheck = (q: string) => /FROM api_keys WHERE id IN/.test(q);
      const heartbeats = (raw: string) => raw.split(': heartbeat\n\n').length - 1;
      // The window is a number of heartbeats and tail periods, not a time: a loaded machine only stretches it.
      const { result: tookMs, sent } = await sentRequests(async (all) => {
        const started = Date.now();
        const before = open.map((s) => heartbeats(s.raw));
        await waitFor(
          () => all.filter(isCheck).length >= 4 && open.every((s, i) => heartbeats(s.raw) >= before[i] + 2),
          { what: 'four revocation checks and two heartbeats on every stream' },
        );
        return Date.now() - started;
      });
      const checks = sent.filter(isCheck);
      // Checks start at least a tail period (250 ms) apart, so one per stream or per heartbeat would outrun the time taken.
      assert.ok(checks.length <= tookMs / 250 + 2, `${checks.length} revocation checks in ${tookMs} ms`);
      assert.deepEqual(
        sent.filter((q) => /FROM api_keys WHERE id = \?/.test(q)),
        [],
        'no stream reads its key on its own',
      );
      open.forEach((s) => s.close());
      await waitFor(nothingHeld, { timeoutMs: 5000, what: 'every place and listener to be given back' });
    } finally {
      fast.closeAllConnections();
      await new Promise((r) => fast.close(r));
    }
  });
});
