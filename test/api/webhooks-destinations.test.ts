import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { recordEvent } from '../../src/modules/events/events.repository.js';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { addressAllowed } from '../../src/modules/webhooks/destination.js';
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
    prod = await createTestContext({ env: { WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'false', WEBHOOK_FIRST_RETRY_MS: '100' } });
  });
  after(async () => {
    await dev.close();
    await prod.close();
  });

  const create = (ctx: TestContext, who: SignedUp, url: string, eventTypes = ['credits.low']) =>
    ctx.api.post('/api/v1/webhook-endpoints').set(who.auth).set('Idempotency-Key', randomUUID()).send({ url, eventTypes });

  /** An owner key's endpoint (made where private destinations are allowed), an account event for it, and its delivery's id. */
  async function pendingDelivery(url: string): Promise<{ owner: SignedUp; endpointId: string; deliveryId: string }> {
    const agent = await account(dev);
    const owner = await addKey(dev, agent.accountId, { kind: 'OWNER' });
    const made = await create(dev, owner, url);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    await recordEvent(dev.services.ds.manager, { type: 'credits.low', accountId: owner.accountId, keyId: null, rentalId: null, data: { balanceMinor: 10 }, at: new Date() });
    assert.ok((await prod.services.webhookDeliveries.dispatch()) >= 1);
    const listed = await prod.api.get(`/api/v1/webhook-endpoints/${made.body.data.id}/deliveries`).set(owner.auth);
    assert.equal(listed.body.data.length, 1);
    return { owner, endpointId: made.body.data.id, deliveryId: listed.body.data[0].id };
  }

  it('refuses, in production mode, a url that is not https or names a loopback, private, link-local or metadata address (422 naming url)', async () => {
    const who = await account(prod);
    for (const url of ['http://example.com/hook', 'https://127.0.0.1/hook', 'https://localhost/hook', 'https://10.0.0.7/hook', 'https://[::1]/hook', 'https://169.254.169.254/latest', 'https://[fd00:ec2::254]/']) {
      const res = await create(prod, who, url);
      assert.equal(res.status, 422, `${url}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.match(res.body.error.message, /url/, url);
    }
    assert.equal((await create(dev, who, 'http://127.0.0.1:9/hook')).status, 201, 'development allows loopback over http');
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
      assert.match(d.attempts[0].error, /^refused: localhost resolves only to/);
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
      assert.deepEqual(d.attempts.map((a: { statusCode: number; error: string }) => [a.statusCode, a.error]), [[302, 'redirect not followed']]);
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
      assert.equal(await dev.services.webhookDeliveries.deliver(deliveryId), 'skipped', 'a failed delivery is tried no more');
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
        (await dev.services.ds.query(`SELECT id FROM ${AGENDA_JOBS_TABLE} WHERE name = 'webhooks.deliver' AND unique_key = ? AND locked_at IS NULL`, [deliveryId])).length;
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
    const event = { type: 'credits.low' as const, accountId: owner.accountId, keyId: null, rentalId: null, data: {}, at: new Date() };
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
    await recordEvent(dev.services.ds.manager, event);
    const deliveries = async () => (await dev.api.get(`/api/v1/webhook-endpoints/${made.body.data.id}/deliveries`).set(owner.auth)).body.data as { eventId: string }[];
    await prod.services.webhookDeliveries.dispatch();
    const first = await deliveries();
    assert.equal(first.length, 1, 'the committed one');
    release();
    await late;
    await prod.services.webhookDeliveries.dispatch();
    const both = await deliveries();
    assert.equal(both.length, 2, 'and the late one');
    assert.ok(BigInt(both[1].eventId) < BigInt(first[0].eventId), 'whose id is lower');
  });

  it('tells public unicast from every range it must refuse', () => {
    for (const a of ['8.8.8.8', '2606:4700::1']) assert.ok(addressAllowed(a, false), a);
    for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '100.64.0.1', '169.254.169.254', '169.254.1.1', '224.0.0.1', '0.0.0.0', '::', '::1', 'fc00::1', 'fd00:ec2::254', 'fe80::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1']) {
      assert.ok(!addressAllowed(a, false), a);
      assert.ok(addressAllowed(a, true), `${a} when private destinations are allowed`);
    }
  });
});
