import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { recordEvent } from '../../src/modules/events/events.repository.js';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { AppError } from '../../src/errors/app-error.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import type { Principal } from '../../src/modules/keys/principal.js';
import {
  addressAllowed,
  noAllowedAddress,
  refusedRange,
  type Resolver,
} from '../../src/modules/webhooks/destination.js';
import { WebhookDeliveries } from '../../src/modules/webhooks/webhook-delivery.js';
import { MysqlWebhookEventLog } from '../../src/modules/webhooks/webhook-dispatch.repository.js';
import { WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { account, addKey } from '../helpers/rentals.js';

/** A loopback receiver answering `status` (and `headers`) to everything, recording the paths called. */
async function receiver(status: number, headers: (port: number) => Record<string, string> = () => ({})) {
  const paths: string[] = [];
  const server: Server = createServer((req, res) => {
    paths.push(req.url ?? '');
    req.resume();
    res.writeHead(status, headers(port));
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { paths, port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('webhooks: where deliveries may go', function () {
  this.timeout(60_000);
  // Two services on the one database: one allowing private destinations (development), one not (production).
  let dev: TestContext;
  let prod: TestContext;

  before(async () => {
    dev = await createTestContext({ env: { WEBHOOK_FIRST_RETRY_MS: '100' } });
    prod = await createTestContext({
      env: { WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'false', WEBHOOK_FIRST_RETRY_MS: '100' },
    });
  });
  after(async () => {
    await dev.close();
    await prod.close();
  });

  const create = (ctx: TestContext, who: SignedUp, url: string, eventTypes = ['credits.low']) =>
    ctx.api
      .post('/api/v1/webhook-endpoints')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ url, eventTypes });

  /** An owner key's endpoint (made where private destinations are allowed), an account event for it, and its delivery's id. */
  async function pendingDelivery(url: string): Promise<{ owner: SignedUp; endpointId: string; deliveryId: string }> {
    const agent = await account(dev);
    const owner = await addKey(dev, agent.accountId, { kind: 'OWNER' });
    const made = await create(dev, owner, url);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    await recordEvent(dev.services.ds.manager, {
      type: 'credits.low',
      accountId: owner.accountId,
      keyId: null,
      rentalId: null,
      data: { balanceMinor: 10 },
      at: new Date(),
    });
    assert.ok((await prod.services.webhookDeliveries.dispatch()) >= 1);
    const listed = await prod.api.get(`/api/v1/webhook-endpoints/${made.body.data.id}/deliveries`).set(owner.auth);
    assert.equal(listed.body.data.length, 1);
    return { owner, endpointId: made.body.data.id, deliveryId: listed.body.data[0].id };
  }

  it('refuses, in production mode, a url that is not https or names a loopback, private, link-local or metadata address (422 naming url)', async () => {
    const who = await account(prod);
    for (const url of [
      'http://example.com/hook',
      'https://127.0.0.1/hook',
      'https://localhost/hook',
      'https://10.0.0.7/hook',
      'https://[::1]/hook',
      'https://169.254.169.254/latest',
      'https://[fd00:ec2::254]/',
    ]) {
      const res = await create(prod, who, url);
      assert.equal(res.status, 422, `${url}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.match(res.body.error.message, /url/, url);
    }
    assert.equal(
      (await create(dev, who, 'http://127.0.0.1:9/hook')).status,
      201,
      'development allows loopback over http',
    );
  });

  it('calls no address that became private after the endpoint was made, at delivery time', async () => {
    const rx = await receiver(200);
    try {
      const { owner, endpointId, deliveryId } = await pendingDelivery(`http://localhost:${rx.port}/later`);
      assert.equal(await prod.services.webhookDeliveries.deliver(deliveryId), 'retrying');
      assert.deepEqual(rx.paths, [], 'the receiver was never called');
      const [d] = (await prod.api.get(`/api/v1/webhook-endpoints/${endpointId}/deliveries`).set(owner.auth)).body.data;
      assert.equal(d.status, 'PENDING');
      assert.equal(d.attempts.length, 1);
      assert.equal(d.attempts[0].statusCode, null);
      assert.equal(d.attempts[0].error, `refused: ${noAllowedAddress('localhost')}`);
    } finally {
      await rx.close();
    }
  });

  it('follows no redirect: a 3xx is a failed try, and its Location is never called', async () => {
    const rx = await receiver(302, (port) => ({ location: `http://127.0.0.1:${port}/elsewhere` }));
    try {
      const { owner, endpointId, deliveryId } = await pendingDelivery(`http://127.0.0.1:${rx.port}/moved`);
      assert.equal(await dev.services.webhookDeliveries.deliver(deliveryId), 'retrying');
      assert.deepEqual(rx.paths, ['/moved']);
      const [d] = (await dev.api.get(`/api/v1/webhook-endpoints/${endpointId}/deliveries`).set(owner.auth)).body.data;
      assert.deepEqual(
        d.attempts.map((a: { statusCode: number; error: string }) => [a.statusCode, a.error]),
        [[302, 'redirect not followed']],
      );
    } finally {
      await rx.close();
    }
  });

  it('gives up 24 hours after the first try', async () => {
    const rx = await receiver(500);
    try {
      const { owner, endpointId, deliveryId } = await pendingDelivery(`http://127.0.0.1:${rx.port}/down`);
      assert.equal(await dev.services.webhookDeliveries.deliver(deliveryId), 'retrying');
      dev.clock.advance(24 * 3600_000);
      assert.equal(await dev.services.webhookDeliveries.deliver(deliveryId), 'failed');
      assert.equal(
        await dev.services.webhookDeliveries.deliver(deliveryId),
        'skipped',
        'a failed delivery is tried no more',
      );
      const [d] = (await dev.api.get(`/api/v1/webhook-endpoints/${endpointId}/deliveries`).set(owner.auth)).body.data;
      assert.equal(d.status, 'FAILED');
      assert.equal(d.attempts.length, 2);
    } finally {
      await rx.close();
    }
  });

  it('enqueues a long overdue delivery again, without doubling a job still waiting for it', async () => {
    const rx = await receiver(500);
    try {
      const { deliveryId } = await pendingDelivery(`http://127.0.0.1:${rx.port}/slow`);
      assert.equal(await dev.services.webhookDeliveries.deliver(deliveryId), 'retrying');
      const waiting = async () =>
        (
          await dev.services.ds.query(
            `SELECT id FROM ${AGENDA_JOBS_TABLE} WHERE name = 'webhooks.deliver' AND unique_key = ? AND locked_at IS NULL`,
            [deliveryId],
          )
        ).length;
      const before = await waiting();
      assert.ok(before >= 1, 'the retry is scheduled');
      dev.clock.advance(10 * 60_000);
      assert.ok((await dev.services.webhookDeliveries.revive()) >= 1);
      assert.equal(await waiting(), before, 'the waiting retry was moved, not doubled');
    } finally {
      await rx.close();
    }
  });

  it('delivers an event that committed after a later one was fanned out', async () => {
    const agent = await account(dev);
    const owner = await addKey(dev, agent.accountId, { kind: 'OWNER' });
    const made = await create(dev, owner, 'http://127.0.0.1:9/late');
    assert.equal(made.status, 201);
    const event = {
      type: 'credits.low' as const,
      accountId: owner.accountId,
      keyId: null,
      rentalId: null,
      data: {},
      at: new Date(),
    };
    // One account's events are numbered one at a time, so the later one is another account's.
    const other = await account(dev);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let written!: () => void;
    const inserted = new Promise<void>((r) => (written = r));
    const late = dev.services.ds.transaction(async (m) => {
      await recordEvent(m, event);
      written();
      await gate;
    });
    await inserted;
    await recordEvent(dev.services.ds.manager, { ...event, accountId: other.accountId });
    const [{ id: laterId }] = (await dev.services.ds.query(`SELECT MAX(id) AS id FROM events WHERE account_id = ?`, [
      other.accountId,
    ])) as { id: string }[];
    const deliveries = async () =>
      (await dev.api.get(`/api/v1/webhook-endpoints/${made.body.data.id}/deliveries`).set(owner.auth)).body.data as {
        eventId: string;
      }[];
    await prod.services.webhookDeliveries.dispatch();
    const [{ at: cursor }] = (await dev.services.ds.query(
      `SELECT last_event_id AS at FROM event_cursors WHERE name = 'webhooks'`,
    )) as { at: string }[];
    assert.ok(BigInt(cursor) >= BigInt(laterId), 'the dispatcher went past the later event');
    assert.deepEqual(await deliveries(), [], 'the uncommitted one is not seen yet');
    release();
    await late;
    await prod.services.webhookDeliveries.dispatch();
    const got = await deliveries();
    assert.equal(got.length, 1, 'the late one');
    assert.ok(BigInt(got[0].eventId) < BigInt(laterId), 'whose id is lower than one already fanned out');
  });

  it('tells public unicast from every range it must refuse', () => {
    for (const a of ['8.8.8.8', '2606:4700::1']) assert.ok(addressAllowed(a, false), a);
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '100.64.0.1',
      '169.254.169.254',
      '169.254.1.1',
      '224.0.0.1',
      '0.0.0.0',
      '::',
      '::1',
      'fc00::1',
      'fd00:ec2::254',
      'fe80::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
    ]) {
      assert.ok(!addressAllowed(a, false), a);
      assert.ok(addressAllowed(a, true), `${a} when private destinations are allowed`);
    }
  });

  it('refuses, form by form, every IPv6 form that embeds or maps a refused IPv4 address, site-local, and the special-purpose ranges', () => {
    const refused: [string, string][] = [
      // IPv4 special-purpose ranges that are not globally reachable, and multicast.
      ['0.1.2.3', '0.0.0.0/8'],
      ['10.0.0.1', '10.0.0.0/8'],
      ['100.64.0.1', '100.64.0.0/10'],
      ['100.127.255.254', '100.64.0.0/10'],
      ['127.0.0.1', '127.0.0.0/8'],
      ['127.255.255.254', '127.0.0.0/8'],
      ['169.254.169.254', '169.254.0.0/16'],
      ['172.16.0.1', '172.16.0.0/12'],
      ['172.31.255.254', '172.16.0.0/12'],
      ['192.0.0.9', '192.0.0.0/24'],
      ['192.0.2.1', '192.0.2.0/24'],
      ['192.88.99.1', '192.88.99.0/24'],
      ['192.168.0.1', '192.168.0.0/16'],
      ['198.18.0.1', '198.18.0.0/15'],
      ['198.19.255.254', '198.18.0.0/15'],
      ['198.51.100.1', '198.51.100.0/24'],
      ['203.0.113.1', '203.0.113.0/24'],
      ['224.0.0.1', '224.0.0.0/4'],
      ['239.255.255.250', '224.0.0.0/4'],
      ['240.0.0.1', '240.0.0.0/4'],
      ['255.255.255.255', '255.255.255.255/32'],
      // IPv6 forms that carry an IPv4 address: the two judged by what they carry, the rest refused whatever they carry.
      ['::ffff:127.0.0.1', '::ffff:0:0/96'],
      ['::ffff:7f00:1', '::ffff:0:0/96'],
      ['::ffff:198.18.0.1', '::ffff:0:0/96'],
      ['::ffff:169.254.169.254', '::ffff:0:0/96'],
      ['64:ff9b::127.0.0.1', '64:ff9b::/96'],
      ['64:ff9b::a00:1', '64:ff9b::/96'],
      ['64:ff9b::a9fe:a9fe', '64:ff9b::/96'],
      ['::127.0.0.1', '::/96'],
      ['::7f00:1', '::/96'],
      ['::8.8.8.8', '::/96'],
      ['::a00:1', '::/96'],
      ['64:ff9b:1::a00:1', '64:ff9b:1::/48'],
      ['64:ff9b:1::808:808', '64:ff9b:1::/48'],
      ['2002:7f00:1::1', '2002::/16'],
      ['2002:808:808::1', '2002::/16'],
      ['2002:a9fe:a9fe::', '2002::/16'],
      ['2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001::/23'],
      ['2001::1', '2001::/23'],
      ['2001:2::1', '2001::/23'],
      ['::ffff:0:7f00:1', '::/3'],
      // IPv6 special-purpose ranges, site-local and multicast, and what is not global unicast.
      ['::', '::/128'],
      ['::1', '::1/128'],
      ['100::1', '100::/64'],
      ['2001:db8::1', '2001:db8::/32'],
      ['3fff::1', '3fff::/20'],
      ['5f00::1', '5f00::/16'],
      ['fc00::1', 'fc00::/7'],
      ['fd00:ec2::254', 'fc00::/7'],
      ['fe80::1', 'fe80::/10'],
      ['febf::1', 'fe80::/10'],
      ['fec0::1', 'fec0::/10'],
      ['feff::1', 'fec0::/10'],
      ['ff02::1', 'ff00::/8'],
      ['4000::1', '4000::/2'],
      ['8000::1', '8000::/1'],
      ['1000::1', '::/3'],
    ];
    for (const [address, range] of refused) {
      assert.ok(!addressAllowed(address, false), address);
      assert.ok(refusedRange(address)?.startsWith(range), `${address}: ${refusedRange(address)} (expected ${range})`);
    }
    for (const address of ['fe80::1%eth0', 'example.com', '127.1', ''])
      assert.ok(!addressAllowed(address, false), `${JSON.stringify(address)} is no address`);
    // Globally reachable: public unicast, and a mapped or NAT64 form of a public IPv4 address.
    for (const address of [
      '8.8.8.8',
      '1.1.1.1',
      '192.0.1.1',
      '198.20.0.1',
      '100.128.0.1',
      '172.32.0.1',
      '2606:4700::1',
      '2a00:1450::1',
      '::ffff:8.8.8.8',
      '64:ff9b::808:808',
      '64:ff9b::8.8.8.8',
    ]) {
      assert.ok(addressAllowed(address, false), address);
    }
  });

  it('refuses the four forms the audit got through, at creation (422 naming url; no name is resolved, no socket opened)', async () => {
    const who = await account(prod);
    for (const url of [
      'https://[::7f00:1]/hook',
      'https://[64:ff9b:1::a00:1]/hook',
      'https://[fec0::1]/hook',
      'https://198.18.0.1/hook',
    ]) {
      const res = await create(prod, who, url);
      assert.equal(res.status, 422, `${url}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.match(res.body.error.message, /^Invalid request: url: .* has no address webhooks may be sent to/, url);
    }
    // Written with its dotted tail, the IPv4-compatible form is refused before its address is: it reads otherwise once parsed.
    const dotted = await create(prod, who, 'https://[::127.0.0.1]/hook');
    assert.equal(dotted.status, 422);
    assert.match(dotted.body.error.message, /host reads as \[::7f00:1\] once parsed/);
  });

  it('answers one refusal for a name that does not resolve and one that resolves only to refused addresses, at creation and at a try', async () => {
    const answers: Record<string, string[] | 'NXDOMAIN'> = {
      'nowhere.example': 'NXDOMAIN',
      'loopback.example': ['127.0.0.1', '::1'],
      'mapped.example': ['::ffff:10.0.0.1'],
      'nat64.example': ['64:ff9b::a9fe:a9fe'],
      'sixtofour.example': ['2002:a9fe:a9fe::1'],
    };
    const looked: string[] = [];
    const resolve: Resolver = async (host) => {
      looked.push(host);
      const a = answers[host];
      if (a === undefined || a === 'NXDOMAIN')
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };
    const s = prod.services;
    const box = SecretBox.fromConfig(prod.config);
    const events = new MysqlWebhookEventLog(s.store, s.logger);
    const service = new WebhooksService(s.store, events, prod.clock, box, s.jobs, s.rateLimiter, {
      allowPrivateDestinations: false,
      resolve,
    });
    const agent = await account(prod);
    const principal = {
      kind: 'AGENT',
      keyId: agent.keyId,
      accountId: agent.accountId,
      scopes: ['read', 'rent', 'manage'],
    } as unknown as Principal;
    const messages: string[] = [];
    for (const host of Object.keys(answers)) {
      const err = await service
        .create(principal, randomUUID(), { url: `https://${host}/hook`, eventTypes: ['credits.low'] })
        .then(
          () => assert.fail(`${host} was accepted`),
          (e: unknown) => e,
        );
      assert.ok(err instanceof AppError && err.code === 'VALIDATION_FAILED', `${host}: ${String(err)}`);
      messages.push(err.message.replace(host, '<host>'));
    }
    assert.deepEqual(looked, Object.keys(answers), 'each name was looked up through the injected resolver');
    assert.equal(new Set(messages).size, 1, `one text for all: ${messages.join(' | ')}`);
    assert.equal(messages[0], `Invalid request: url: ${noAllowedAddress('<host>')}.`);

    // At a try: the same words in the delivery's log whether the name stopped resolving or now resolves privately.
    // The retry is an hour away, and the endpoint is gone before it: no worker looks these names up for real.
    const deliveries = new WebhookDeliveries(s.store, events, prod.clock, s.logger, s.jobs, box, {
      allowPrivateDestinations: false,
      firstRetryMs: 3600_000,
      resolve,
    });
    const errors: string[] = [];
    for (const host of ['nowhere.example', 'mapped.example']) {
      const owner = await addKey(dev, (await account(dev)).accountId, { kind: 'OWNER' });
      const made = await create(dev, owner, `http://${host}:9/later`);
      assert.equal(made.status, 201, JSON.stringify(made.body));
      await recordEvent(s.ds.manager, {
        type: 'credits.low',
        accountId: owner.accountId,
        keyId: null,
        rentalId: null,
        data: {},
        at: new Date(),
      });
      const [{ id: eventId }] = (await s.ds.query(`SELECT MAX(id) AS id FROM events WHERE account_id = ?`, [
        owner.accountId,
      ])) as { id: string }[];
      // Written without a job of its own, so only this test tries it.
      const deliveryId = randomUUID();
      assert.ok(
        await s.store.read((r) =>
          r.webhooks.deliveries.record({
            id: deliveryId,
            endpointId: made.body.data.id,
            accountId: owner.accountId,
            eventId: String(eventId),
            at: new Date(),
          }),
        ),
      );
      try {
        assert.equal(await deliveries.deliver(deliveryId), 'retrying');
      } finally {
        assert.equal(
          (await dev.api.delete(`/api/v1/webhook-endpoints/${made.body.data.id}`).set(owner.auth)).status,
          204,
        );
      }
      const [attempt] = (await s.ds.query(`SELECT error FROM webhook_delivery_attempts WHERE delivery_id = ?`, [
        deliveryId,
      ])) as { error: string }[];
      errors.push(attempt.error.replace(host, '<host>'));
    }
    assert.deepEqual(errors, [`refused: ${noAllowedAddress('<host>')}`, `refused: ${noAllowedAddress('<host>')}`]);
  });

  it('stores and lists the url as parsed, and refuses control characters and a url whose parse changes its host', async () => {
    const who = await account(dev);
    const made = await create(dev, who, 'HTTP://LocalHost:9/hooks/a b?x=1');
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.data.url, 'http://localhost:9/hooks/a%20b?x=1');
    const listed = await dev.api.get('/api/v1/webhook-endpoints').set(who.auth);
    assert.deepEqual(
      listed.body.data.map((e: { url: string }) => e.url),
      ['http://localhost:9/hooks/a%20b?x=1'],
    );
    const [row] = (await dev.services.ds.query(`SELECT url FROM webhook_endpoints WHERE id = ?`, [
      made.body.data.id,
    ])) as { url: string }[];
    assert.equal(row.url, 'http://localhost:9/hooks/a%20b?x=1', 'stored as listed');

    const refusals: [string, RegExp][] = [
      ['http://127.0.0.1:9/a\r\nX-Injected: 1', /control characters/],
      ['http://127.0.0.1:9/a\nb', /control characters/],
      ['http://127.0.0.1:9/a\u0000b', /control characters/],
      ['http://exa\tmple.com/', /control characters/],
      ['http://exa\nmple.com/', /control characters/],
      ['http://ex%61mple.com/', /host reads as example\.com once parsed/],
      ['http://0x7f.1/', /host reads as 127\.0\.0\.1 once parsed/],
      ['http://2130706433/', /host reads as 127\.0\.0\.1 once parsed/],
      ['http:example.com/x', /host reads as example\.com once parsed/],
      ['http://bücher.example/', /host reads as xn--bcher-kva\.example once parsed/],
      ['http://[0:0::1]/', /host reads as \[::1\] once parsed/],
      ['http://127.0.0.1:9/x#frag', /fragment/],
      [`http://127.0.0.1:9/${'é'.repeat(400)}`, /longer than 2048 characters once parsed/],
    ];
    for (const [url, message] of refusals) {
      const res = await create(dev, who, url);
      assert.equal(res.status, 422, `${JSON.stringify(url)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.match(res.body.error.message, message, JSON.stringify(url));
    }
    assert.equal(
      (await dev.api.get('/api/v1/webhook-endpoints').set(who.auth)).body.data.length,
      1,
      'none of them was made',
    );
  });
});
