import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import ssh2 from 'ssh2';
import { CredentialReveal } from '../../src/modules/credentials/credential-reveal.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import {
  account,
  addKey,
  makeActive,
  offerIds,
  rentOk,
  setStatus,
  discardQueuedRentalJobs,
  queuedJobs,
} from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 50,
    maximumDurationSeconds: 86400,
  },
];

describe('Deployments API', () => {
  let ctx: TestContext;
  let offerId: string;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    offerId = (await offerIds(ctx)).l4;
  });
  after(() => ctx.close());

  const deployment = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });

  /** An account with an agent key, a second agent key and an owner key; credits for many rentals. */
  async function family() {
    const agent = await account(ctx, { creditsMinor: 10_000 });
    const sibling = await addKey(ctx, agent.accountId);
    const owner = await addKey(ctx, agent.accountId, { kind: 'OWNER', scopes: ['read', 'rent', 'manage', 'billing'] });
    return { agent, sibling, owner };
  }

  describe('GET /api/v1/deployments and /deployments/{id}', () => {
    it('lists the account for owner keys and only their own for agent keys, newest first', async () => {
      const { agent, sibling, owner } = await family();
      const stranger = await account(ctx, { creditsMinor: 1000 });
      const a1 = await rentOk(ctx, agent, { offerId });
      ctx.clock.advance(1000);
      const a2 = await rentOk(ctx, agent, { offerId });
      ctx.clock.advance(1000);
      const s1 = await rentOk(ctx, sibling, { offerId });
      await rentOk(ctx, stranger, { offerId });

      const ids = async (who: SignedUp, query = '') => {
        const res = await ctx.api.get(`/api/v1/deployments${query}`).set(who.auth);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return (res.body.data as { id: string }[]).map((d) => d.id);
      };
      assert.deepEqual(await ids(agent), [a2.deploymentId, a1.deploymentId]);
      assert.deepEqual(await ids(sibling), [s1.deploymentId]);
      assert.deepEqual(await ids(owner), [s1.deploymentId, a2.deploymentId, a1.deploymentId]);
      assert.deepEqual(await ids(owner, '?limit=2'), [s1.deploymentId, a2.deploymentId]);
      const bad = await ctx.api.get('/api/v1/deployments?limit=0').set(owner.auth);
      assert.equal(bad.status, 422);
    });

    it('returns one deployment in the contract shape; 404 for other keys of agents, other accounts and unknown ids', async () => {
      const { agent, sibling, owner } = await family();
      const stranger = await account(ctx, { creditsMinor: 1000 });
      const r = await rentOk(ctx, agent, { offerId });
      const res = await ctx.api.get(`/api/v1/deployments/${r.deploymentId}`).set(agent.auth);
      assert.equal(res.status, 200);
      const d = res.body.data;
      assert.equal(d.id, r.deploymentId);
      assert.equal(d.rentalId, r.rentalId);
      assert.equal(d.status, 'PENDING');
      assert.equal(d.billingModel, 'ACCOUNT_BALANCE');
      for (const f of ['hoursPurchased', 'durationSeconds', 'endsAt', 'endedAt']) assert.ok(f in d && d[f] === null, f);
      assert.deepEqual(d, r.deployment);
      assert.equal((await ctx.api.get(`/api/v1/deployments/${r.deploymentId}`).set(owner.auth)).status, 200);
      for (const who of [sibling, stranger]) {
        const denied = await ctx.api.get(`/api/v1/deployments/${r.deploymentId}`).set(who.auth);
        assert.equal(denied.status, 404);
        assert.equal(denied.body.error.code, 'NOT_FOUND');
      }
      assert.equal((await ctx.api.get(`/api/v1/deployments/${randomUUID()}`).set(agent.auth)).status, 404);
      assert.equal((await ctx.api.get('/api/v1/deployments').set('Authorization', 'Bearer nope')).status, 401);
    });
  });

  describe('POST /api/v1/deployments/{id}/terminate', () => {
    const terminate = (who: SignedUp, id: string) => ctx.api.post(`/api/v1/deployments/${id}/terminate`).set(who.auth);

    it('accepts with 202, the status after the request and when it was asked for, marks the deployment TERMINATING once, and is repeatable', async () => {
      const { agent } = await family();
      const r = await rentOk(ctx, agent, { offerId });
      await makeActive(ctx, r.deploymentId);
      const first = await terminate(agent, r.deploymentId);
      assert.equal(first.status, 202, JSON.stringify(first.body));
      const requestedAt = ctx.clock.now().toISOString();
      const { message, ...answer } = first.body.data;
      assert.deepEqual(answer, {
        accepted: true,
        deploymentId: r.deploymentId,
        rentalId: r.rentalId,
        status: 'TERMINATING',
        terminateRequestedAt: requestedAt,
      });
      assert.match(
        message,
        new RegExp(
          `TERMINATING\\. Wait with GET /api/v1/rentals/${r.rentalId}\\?waitFor=TERMINATED \\(answered the moment`,
        ),
      );
      // The next step, followed literally, is a waiting read that works.
      const waitPath = /GET (\/api\/v1\/rentals\/\S+)/.exec(message)![1];
      const waited = await ctx.api.get(`${waitPath}&waitSeconds=1`).set(agent.auth);
      assert.equal(waited.status, 200);
      assert.equal(waited.body.data.rentalId, r.rentalId);
      const d1 = await deployment(r.deploymentId);
      assert.equal(d1.status, 'TERMINATING');
      assert.equal(d1.terminationReason, 'REQUESTED');
      assert.equal(d1.terminateRequestedAt?.getTime(), ctx.clock.now().getTime());
      assert.equal(d1.statusChangedAt?.getTime(), ctx.clock.now().getTime());
      assert.equal(
        (await ctx.services.ds.getRepository(Order).findOneByOrFail({ id: r.rentalId })).status,
        'TERMINATING',
      );

      ctx.clock.advance(5000);
      // A repeat (by the rental id this time) answers the same: the status, and the first request's time.
      const again = await terminate(agent, r.rentalId);
      assert.equal(again.status, 202);
      assert.deepEqual(again.body.data, first.body.data);
      const d2 = await deployment(r.deploymentId);
      assert.equal(d2.status, 'TERMINATING');
      assert.equal(
        d2.terminateRequestedAt?.getTime(),
        d1.terminateRequestedAt?.getTime(),
        'the first request time is kept',
      );
      const view = await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(agent.auth);
      assert.equal(view.body.data.status, 'TERMINATING');
      // The terminate job is queued once per deployment however often termination is asked for.
      const jobs = await queuedJobs(ctx, r.deploymentId);
      assert.deepEqual(
        jobs.filter((j) => j.name === 'rental.terminate'),
        [{ name: 'rental.terminate', deploymentId: r.deploymentId }],
      );
    });

    it('moves PENDING and PROVISIONING deployments to TERMINATING too', async () => {
      const { agent } = await family();
      const pending = await rentOk(ctx, agent, { offerId });
      const provisioning = await rentOk(ctx, agent, { offerId });
      await setStatus(ctx, provisioning.deploymentId, 'PROVISIONING');
      for (const r of [pending, provisioning]) {
        const res = await terminate(agent, r.deploymentId);
        assert.equal(res.status, 202);
        assert.equal(res.body.data.status, 'TERMINATING');
        assert.equal((await deployment(r.deploymentId)).status, 'TERMINATING');
      }
    });

    it('leaves finished deployments as they are (202, nothing changes) and says they already finished', async () => {
      const { agent } = await family();
      const r = await rentOk(ctx, agent, { offerId });
      const ended = new Date('2026-03-01T00:00:00.000Z');
      await setStatus(ctx, r.deploymentId, 'TERMINATED', { endedAt: ended, terminationReason: 'EXPIRED' });
      const res = await terminate(agent, r.deploymentId);
      assert.equal(res.status, 202);
      assert.equal(res.body.data.status, 'TERMINATED');
      assert.equal(res.body.data.terminateRequestedAt, null);
      assert.match(res.body.data.message, /^Already TERMINATED/);
      const failed = await rentOk(ctx, agent, { offerId });
      await setStatus(ctx, failed.deploymentId, 'FAILED');
      const f = await terminate(agent, failed.rentalId);
      assert.equal(f.status, 202);
      assert.deepEqual([f.body.data.deploymentId, f.body.data.status], [failed.deploymentId, 'FAILED']);
      assert.match(f.body.data.message, /^Already FAILED/);
      assert.deepEqual(
        (await queuedJobs(ctx, r.deploymentId)).filter((j) => j.name === 'rental.terminate'),
        [],
      );
      const d = await deployment(r.deploymentId);
      assert.equal(d.status, 'TERMINATED');
      assert.equal(d.terminationReason, 'EXPIRED');
      assert.equal(d.terminateRequestedAt, null);
      assert.equal(d.endedAt?.toISOString(), ended.toISOString());
    });

    it('records a request on an unpaid card order without taking it from the payment path', async () => {
      const { agent } = await family();
      const r = await rentOk(ctx, agent, { offerId });
      // As the card checkout leaves an order before its payment arrives.
      await setStatus(ctx, r.deploymentId, 'AWAITING_PAYMENT');
      await ctx.services.ds.getRepository(Order).update({ id: r.rentalId }, { funding: 'CARD' });
      await discardQueuedRentalJobs(ctx);
      const res = await terminate(agent, r.deploymentId);
      assert.equal(res.status, 202);
      assert.equal(res.body.data.status, 'AWAITING_PAYMENT');
      assert.ok(res.body.data.terminateRequestedAt);
      assert.match(res.body.data.message, /instead of started/);
      const d = await deployment(r.deploymentId);
      assert.equal(d.status, 'AWAITING_PAYMENT');
      assert.equal(d.terminationReason, 'REQUESTED');
      assert.ok(d.terminateRequestedAt);
      assert.deepEqual(await queuedJobs(ctx, r.deploymentId), []);
    });

    it('refuses a JSON body that says something with 400 INVALID_REQUEST and changes nothing; ignores an empty one or {}', async () => {
      const { agent } = await family();
      const r = await rentOk(ctx, agent, { offerId });
      for (const type of ['application/json', 'application/json; charset=utf-8', 'application/merge-patch+json']) {
        const res = await ctx.api
          .post(`/api/v1/deployments/${r.deploymentId}/terminate`)
          .set(agent.auth)
          .set('Content-Type', type)
          .send('{"force":true}');
        assert.equal(res.status, 400, type);
        assert.equal(res.body.error.code, 'INVALID_REQUEST');
        assert.match(res.body.error.message, /takes no body and reads nothing of it.*an empty body or \{\} is ignored/);
      }
      assert.equal((await deployment(r.deploymentId)).status, 'PENDING');
      const empty = await ctx.api
        .post(`/api/v1/deployments/${r.deploymentId}/terminate`)
        .set(agent.auth)
        .set('Content-Type', 'application/json');
      assert.equal(empty.status, 202, empty.text);
      const object = await ctx.api
        .post(`/api/v1/deployments/${r.deploymentId}/terminate`)
        .set(agent.auth)
        .set('Content-Type', 'application/json')
        .send('{}');
      assert.equal(object.status, 202, object.text);
    });

    it('lets agent keys terminate only their own deployments; owner keys any of the account; needs manage', async () => {
      const { agent, sibling, owner } = await family();
      const stranger = await account(ctx, { creditsMinor: 1000 });
      const reader = await addKey(ctx, agent.accountId, { kind: 'OWNER', scopes: ['read', 'rent'] });
      const r = await rentOk(ctx, agent, { offerId });
      for (const who of [sibling, stranger]) {
        const res = await terminate(who, r.deploymentId);
        assert.equal(res.status, 404);
        assert.equal(res.body.error.code, 'NOT_FOUND');
      }
      const forbidden = await terminate(reader, r.deploymentId);
      assert.equal(forbidden.status, 403);
      assert.equal(forbidden.body.error.code, 'FORBIDDEN');
      assert.equal((await deployment(r.deploymentId)).status, 'PENDING');
      assert.equal((await terminate(owner, r.deploymentId)).status, 202);
      assert.equal((await deployment(r.deploymentId)).status, 'TERMINATING');
      assert.equal((await terminate(agent, randomUUID())).status, 404);
    });

    it('frees the concurrency slot only once terminated, not at the request', async () => {
      const who = await account(ctx, { creditsMinor: 10_000, maxConcurrentDeployments: 1 });
      const r = await rentOk(ctx, who, { offerId });
      assert.equal((await terminate(who, r.deploymentId)).status, 202);
      const blocked = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ offerId });
      assert.equal(blocked.status, 409);
      assert.equal(blocked.body.error.code, 'CONCURRENCY_LIMIT_REACHED');
    });
  });

  describe('POST /api/v1/deployments/{id}/credentials/reveal', () => {
    const reveal = (who: SignedUp, id: string, requestId?: string) => {
      const req = ctx.api.post(`/api/v1/deployments/${id}/credentials/reveal`).set(who.auth);
      return requestId ? req.set('X-Request-Id', requestId) : req;
    };
    const audits = (deploymentId: string) =>
      ctx.services.ds.getRepository(CredentialReveal).find({ where: { deploymentId }, order: { id: 'ASC' } });

    it('reveals host, port, user, the private key and a ready ssh command, and audits every call', async () => {
      const { agent, owner } = await family();
      const r = await rentOk(ctx, agent, { offerId });
      const pair = await makeActive(ctx, r.deploymentId, { host: '127.0.0.1', port: 40022, user: 'gpu' });
      const res = await reveal(agent, r.deploymentId, 'req-reveal-test-0001');
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const c = res.body.data;
      assert.equal(c.deploymentId, r.deploymentId);
      assert.equal(c.host, '127.0.0.1');
      assert.equal(c.port, 40022);
      assert.equal(c.user, 'gpu');
      assert.equal(c.privateKey, pair.privateKey);
      assert.equal(c.publicKey, pair.publicKey);
      assert.match(c.sshCommand, new RegExp(`^ssh -i ${c.privateKeyFile} -p 40022 .*gpu@127\\.0\\.0\\.1$`));
      // The revealed key is a usable ed25519 key whose public half is the one installed.
      const parsed = ssh2.utils.parseKey(c.privateKey);
      assert.ok(!(parsed instanceof Error));
      const key = Array.isArray(parsed) ? parsed[0] : parsed;
      assert.equal(key.type, 'ssh-ed25519');
      assert.equal(key.getPublicSSH().toString('base64'), pair.publicKey.split(' ')[1]);
      assert.equal(res.headers['cache-control'], 'no-store', 'a private key must not be cached');

      ctx.clock.advance(1000);
      assert.equal((await reveal(owner, r.deploymentId, 'req-reveal-test-0002')).status, 200);
      const rows = await audits(r.deploymentId);
      assert.equal(rows.length, 2);
      assert.deepEqual(
        rows.map((a) => [a.keyId, a.accountId, a.requestId]),
        [
          [agent.keyId, agent.accountId, 'req-reveal-test-0001'],
          [owner.keyId, agent.accountId, 'req-reveal-test-0002'],
        ],
      );
      assert.equal(rows[1].calledAt.getTime() - rows[0].calledAt.getTime(), 1000);
      assert.deepEqual(
        rows.map((a) => [a.outcome, a.refusal]),
        [
          ['REVEALED', null],
          ['REVEALED', null],
        ],
      );
    });

    it('answers 409 DEPLOYMENT_NOT_ACTIVE with the status before ACTIVE (Retry-After) and after it (no retry), and audits those calls as refused', async () => {
      const { agent } = await family();
      const r = await rentOk(ctx, agent, { offerId });
      const pending = await reveal(agent, r.deploymentId);
      assert.equal(pending.status, 409, JSON.stringify(pending.body));
      assert.equal(pending.body.error.code, 'DEPLOYMENT_NOT_ACTIVE');
      assert.match(
        pending.body.error.message,
        new RegExp(
          `${r.deploymentId} is PENDING\\. The machine is starting: wait with GET /api/v1/rentals/${r.rentalId}\\?waitFor=ACTIVE,FAILED .*then reveal again, or retry in 5 s`,
        ),
      );
      assert.equal(pending.headers['retry-after'], '5');
      // Retry-After follows the phase: a machine being checked is seconds away, one booting further.
      for (const [phase, seconds] of [
        ['booting', '10'],
        ['checking_gpus', '2'],
        ['starting', '2'],
      ] as const) {
        await setStatus(ctx, r.deploymentId, 'PROVISIONING', { phase });
        const provisioning = await reveal(agent, r.rentalId);
        assert.equal(provisioning.status, 409);
        assert.match(provisioning.body.error.message, new RegExp(`is PROVISIONING.*retry in ${seconds} s`));
        assert.equal(provisioning.headers['retry-after'], seconds, phase);
      }
      await makeActive(ctx, r.deploymentId);
      for (const status of ['TERMINATING', 'TERMINATED', 'FAILED'] as const) {
        await setStatus(ctx, r.deploymentId, status);
        const ended = await reveal(agent, r.deploymentId);
        assert.equal(ended.status, 409, status);
        assert.equal(ended.body.error.code, 'DEPLOYMENT_NOT_ACTIVE');
        assert.match(
          ended.body.error.message,
          new RegExp(`is ${status}\\. It will never be ACTIVE again, so do not retry`),
        );
        assert.equal(ended.headers['retry-after'], undefined, `no Retry-After once ${status}`);
      }
      // Audited against the deployment, whichever id was asked with.
      const rows = await audits(r.deploymentId);
      assert.deepEqual(
        rows.map((a) => [a.keyId, a.outcome, a.refusal, a.refusedCalls]),
        [[agent.keyId, 'REFUSED', 'NOT_ACTIVE', 7]],
        "one row counts the minute's refusals",
      );
      ctx.clock.advance(60_000);
      assert.equal((await reveal(agent, r.deploymentId)).status, 409);
      assert.deepEqual(
        (await audits(r.deploymentId)).map((a) => a.refusedCalls),
        [7, 1],
        'the next minute has a row of its own',
      );
    });

    it('accepts the rental id as well as the deployment id', async () => {
      const { agent, sibling } = await family();
      const r = await rentOk(ctx, agent, { offerId });
      const pair = await makeActive(ctx, r.deploymentId);
      const res = await reveal(agent, r.rentalId);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.data.deploymentId, r.deploymentId);
      assert.equal(res.body.data.privateKey, pair.privateKey);
      assert.deepEqual(
        (await audits(r.deploymentId)).map((a) => a.outcome),
        ['REVEALED'],
      );
      // Another key cannot see it by either id, active or not: still 404.
      for (const id of [r.rentalId, r.deploymentId]) assert.equal((await reveal(sibling, id)).status, 404);
      await setStatus(ctx, r.deploymentId, 'PENDING');
      const hidden = await reveal(sibling, r.rentalId);
      assert.equal(hidden.status, 404);
      assert.equal(hidden.body.error.code, 'NOT_FOUND');
    });

    it('audits a flood of refused calls in a bounded number of rows, counting every call', async () => {
      const { agent } = await family();
      const before = await ctx.services.ds.getRepository(CredentialReveal).countBy({ keyId: agent.keyId });
      for (let i = 0; i < 40; i++) assert.equal((await reveal(agent, randomUUID())).status, 404);
      const rows = await ctx.services.ds.getRepository(CredentialReveal).findBy({ keyId: agent.keyId });
      assert.equal(rows.length - before, 1);
      assert.equal(rows.at(-1)!.refusedCalls, 40);
      assert.ok(rows.at(-1)!.lastCalledAt! >= rows.at(-1)!.calledAt);
    });

    it("needs the manage scope: a read-only key cannot obtain the machine's private key (403)", async () => {
      const { agent } = await family();
      const reader = await addKey(ctx, agent.accountId, { kind: 'OWNER', scopes: ['read'] });
      const r = await rentOk(ctx, agent, { offerId });
      await makeActive(ctx, r.deploymentId);
      const res = await reveal(reader, r.deploymentId);
      assert.equal(res.status, 403);
      assert.equal(res.body.error.code, 'FORBIDDEN');
      assert.ok(!JSON.stringify(res.body).includes('PRIVATE KEY'));
      assert.equal((await reveal(agent, r.deploymentId)).status, 200, 'an agent key (read, rent, manage) may');
    });

    it('shows agent keys only their own deployments; other keys get 404, audited against the caller', async () => {
      const { agent, sibling } = await family();
      const stranger = await account(ctx, { creditsMinor: 1000 });
      const r = await rentOk(ctx, agent, { offerId });
      await makeActive(ctx, r.deploymentId);
      for (const who of [sibling, stranger]) assert.equal((await reveal(who, r.deploymentId)).status, 404);
      const rows = await audits(r.deploymentId);
      assert.deepEqual(
        rows.map((a) => [a.keyId, a.accountId, a.outcome, a.refusal]),
        [
          [sibling.keyId, sibling.accountId, 'REFUSED', 'NOT_FOUND'],
          [stranger.keyId, stranger.accountId, 'REFUSED', 'NOT_FOUND'],
        ],
      );
      const ghost = randomUUID();
      assert.equal((await reveal(agent, ghost)).status, 404);
      assert.equal((await audits(ghost)).length, 1, 'even an id that names no deployment');
    });

    it('refuses a JSON Content-Type (400, audited) and keys without manage (403, stopped before the handler)', async () => {
      const { agent } = await family();
      const renter = await addKey(ctx, agent.accountId, { kind: 'OWNER', scopes: ['read', 'rent'] });
      const r = await rentOk(ctx, agent, { offerId });
      await makeActive(ctx, r.deploymentId);
      const json = await reveal(agent, r.deploymentId)
        .set('Content-Type', 'application/json')
        .send('{"includePrivateKey":true}');
      assert.equal(json.status, 400);
      assert.equal(json.body.error.code, 'INVALID_REQUEST');
      const forbidden = await reveal(renter, r.deploymentId);
      assert.equal(forbidden.status, 403);
      assert.deepEqual(
        (await audits(r.deploymentId)).map((a) => [a.keyId, a.outcome, a.refusal]),
        [[agent.keyId, 'REFUSED', 'JSON_BODY']],
      );
      const empty = await reveal(agent, r.deploymentId).set('Content-Type', 'application/json').send('{}');
      assert.equal(empty.status, 200, 'an empty object says nothing and is ignored');
    });

    it('refuses to open a sealed key copied from another deployment', async () => {
      const { agent } = await family();
      const a = await rentOk(ctx, agent, { offerId });
      const b = await rentOk(ctx, agent, { offerId });
      await makeActive(ctx, a.deploymentId);
      await makeActive(ctx, b.deploymentId);
      const donor = await deployment(a.deploymentId);
      await ctx.services.ds
        .getRepository(Deployment)
        .update({ id: b.deploymentId }, { sshPrivateKeyEnc: donor.sshPrivateKeyEnc });
      const res = await reveal(agent, b.deploymentId);
      assert.equal(res.status, 500);
      assert.ok(!JSON.stringify(res.body).includes('PRIVATE KEY'));
      assert.deepEqual(
        (await audits(b.deploymentId)).map((a) => [a.outcome, a.refusal]),
        [['REFUSED', 'ERROR']],
      );
    });
  });
});
