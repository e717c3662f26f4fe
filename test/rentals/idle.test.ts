import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { UTILIZATION_FILE } from '../../plugins/local/nvidia-smi-script.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { sshExec, type SshTarget } from '../../src/providers/ssh-probe.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { account, offerIds } from '../helpers/rentals.js';

const base = { category: 'datacenter', vramGb: 80, maximumDurationSeconds: 86400, provisionSeconds: 0 };
const OFFERS: LocalInventoryOffer[] = [
  { ...base, key: 'idle-h100', name: 'NVIDIA H100 SXM', gpuCount: 2, pricePerHourMinor: 100 },
];
const GRACE_SECONDS = 40;

interface Event {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
}

/** Idle machines stop, and rentals with an end say when they are about to end (API + worker + local provider). */
describe('idle rentals and rentals about to end', function () {
  this.timeout(90_000);
  let ctx: TestContext;
  let worker: TestWorker;
  let ids: Record<string, string>;

  before(async () => {
    ctx = await createTestContext({
      offers: OFFERS,
      env: { RENTAL_POLL_MS: '50', IDLE_GRACE_SECONDS: String(GRACE_SECONDS) },
    });
    ids = await offerIds(ctx);
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
  });
  after(async () => {
    await worker.stop();
    await ctx.close();
  });

  async function events(who: SignedUp, after: string, rentalId: string): Promise<Event[]> {
    const out: Event[] = [];
    for (let cursor = after; ;) {
      const res = await ctx.api.get('/api/v1/events').query({ after: cursor, limit: 100 }).set(who.auth);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      out.push(...res.body.data);
      if (res.body.data.length === 0) return out.filter((e) => e.data.rentalId === rentalId);
      cursor = res.body.meta.nextAfter;
    }
  }

  async function read(who: SignedUp, rentalId: string): Promise<Record<string, unknown>> {
    return (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data;
  }

  /** A running rental of a key that ends idle machines after `minutes` (the owner's setting, written as it is stored). */
  async function running(minutes: number | null, body: object = {}) {
    const who = await account(ctx, { creditsMinor: 100_000 });
    if (minutes !== null)
      await ctx.services.ds.getRepository(ApiKey).update({ id: who.keyId }, { idleTerminateMinutes: minutes });
    const start = (await ctx.api.get('/api/v1/events').set(who.auth)).body.meta.nextAfter as string;
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: ids['idle-h100'], ...body });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { rentalId, deploymentId } = res.body.data as { rentalId: string; deploymentId: string };
    await waitFor(async () => (ctx.clock.advance(200), (await read(who, rentalId)).status === 'ACTIVE'), {
      timeoutMs: 30_000,
      what: 'ACTIVE',
    });
    const c = (await ctx.api.post(`/api/v1/deployments/${deploymentId}/credentials/reveal`).set(who.auth)).body.data;
    const ssh: SshTarget = { host: c.host, port: c.port, user: c.user, privateKey: c.privateKey };
    return { who, rentalId, deploymentId, start, ssh };
  }

  /** Moves the clock on by `ms` and runs one idle sweep, as the worker's repeating job does. */
  async function sweepAfter(ms: number): Promise<string[]> {
    ctx.clock.advance(ms);
    return ctx.services.lifecycle.watchIdle();
  }

  it('warns a rental whose GPUs stayed idle for a whole window, then ends it with reason IDLE after the grace', async () => {
    const r = await running(1);
    assert.equal(
      (await sshExec(r.ssh, 'nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits')).stdout,
      '0\n0\n',
      'idle by default',
    );
    // Samples 15 s apart: the first idle one opens the window, which is whole a minute later.
    assert.deepEqual(await sweepAfter(0), [r.deploymentId]);
    assert.deepEqual(await sweepAfter(5_000), [], 'not sampled again before a quarter of its window');
    for (let i = 0; i < 3; i++) await sweepAfter(15_000);
    assert.deepEqual(
      (await events(r.who, r.start, r.rentalId)).map((e) => e.type),
      ['rental.provisioning', 'rental.active'],
      'no warning before a whole window',
    );
    await sweepAfter(15_000);
    const warned = (await events(r.who, r.start, r.rentalId)).map((e) => e.type);
    assert.deepEqual(warned, ['rental.provisioning', 'rental.active', 'rental.idle_warning']);
    assert.equal((await read(r.who, r.rentalId)).status, 'ACTIVE', 'a warning ends nothing yet');
    await sweepAfter(15_000);
    await sweepAfter(15_000);
    assert.equal((await read(r.who, r.rentalId)).status, 'ACTIVE', 'still within the grace');
    assert.equal(
      (await events(r.who, r.start, r.rentalId)).filter((e) => e.type === 'rental.idle_warning').length,
      1,
      'warned once',
    );
    await sweepAfter(15_000);
    await waitFor(async () => (ctx.clock.advance(200), (await read(r.who, r.rentalId)).status === 'TERMINATED'), {
      timeoutMs: 30_000,
      what: 'TERMINATED',
    });
    const ended = await read(r.who, r.rentalId);
    assert.equal(ended.terminationReason, 'IDLE');
    const types = (await events(r.who, r.start, r.rentalId)).map((e) => e.type);
    assert.deepEqual(types, [
      'rental.provisioning',
      'rental.active',
      'rental.idle_warning',
      'rental.terminating',
      'rental.terminated',
    ]);
  });

  it('never warns a rental whose GPUs work, and a rental busy again during the grace starts over', async () => {
    const r = await running(1);
    await sshExec(r.ssh, `mkdir -p "$HOME/${UTILIZATION_FILE.split('/')[0]}" && echo 87 > "$HOME/${UTILIZATION_FILE}"`);
    assert.equal(
      (await sshExec(r.ssh, 'nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits')).stdout,
      '87\n87\n',
    );
    for (let i = 0; i < 12; i++) await sweepAfter(15_000);
    assert.deepEqual(
      (await events(r.who, r.start, r.rentalId)).map((e) => e.type),
      ['rental.provisioning', 'rental.active'],
    );

    // Idle long enough to be warned, then busy again before the grace ends: the rental runs on.
    await sshExec(r.ssh, `echo 0 > "$HOME/${UTILIZATION_FILE}"`);
    for (let i = 0; i < 5; i++) await sweepAfter(15_000);
    assert.equal((await events(r.who, r.start, r.rentalId)).filter((e) => e.type === 'rental.idle_warning').length, 1);
    await sshExec(r.ssh, `echo 40 > "$HOME/${UTILIZATION_FILE}"`);
    for (let i = 0; i < 6; i++) await sweepAfter(15_000);
    assert.equal((await read(r.who, r.rentalId)).status, 'ACTIVE');
    assert.equal((await read(r.who, r.rentalId)).terminateRequestedAt ?? null, null);
    assert.equal((await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(r.who.auth)).status, 202);
  });

  it('never calls idle a rental whose machine cannot be sampled, and never samples a key without the setting', async () => {
    const r = await running(1);
    const plain = await running(null);
    assert.deepEqual(await sweepAfter(0), [r.deploymentId], 'only the watched rental is sampled');
    // Nothing answers at the recorded address any more: every sample fails and starts the window over.
    const { sshPort } = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: r.deploymentId });
    await ctx.services.ds.getRepository(Deployment).update({ id: r.deploymentId }, { sshPort: 1 });
    // Never left unwatched either: every sweep asks it again, each time a fresh login (its kept
    // connection was for the old address), and each unanswered sample starts its window over.
    for (let i = 0; i < 10; i++) assert.deepEqual(await sweepAfter(15_000), [r.deploymentId]);
    assert.equal(
      ctx.services.lifecycle.idleSessions.size,
      0,
      'no connection is kept to an address that does not answer',
    );
    assert.deepEqual(
      (await events(r.who, r.start, r.rentalId)).map((e) => e.type),
      ['rental.provisioning', 'rental.active'],
    );
    assert.equal((await read(r.who, r.rentalId)).status, 'ACTIVE');
    await ctx.services.ds.getRepository(Deployment).update({ id: r.deploymentId }, { sshPort });
    for (const x of [r, plain])
      assert.equal((await ctx.api.post(`/api/v1/deployments/${x.deploymentId}/terminate`).set(x.who.auth)).status, 202);
  });

  it('writes rental.expiring once, before the end of a lease', async () => {
    const r = await running(null, { terminateAfterSeconds: 120 });
    const active = await read(r.who, r.rentalId);
    const endsAt = new Date(String(active.endsAt)).getTime();
    // Half the lease before its end, as the lease is shorter than twenty minutes.
    await ctx.services.lifecycle.noticeExpiring(r.deploymentId);
    await ctx.services.lifecycle.reconcile();
    assert.deepEqual(
      (await events(r.who, r.start, r.rentalId)).map((e) => e.type),
      ['rental.provisioning', 'rental.active'],
      'not yet',
    );
    ctx.clock.set(new Date(endsAt - 59_000));
    await ctx.services.lifecycle.reconcile();
    await ctx.services.lifecycle.noticeExpiring(r.deploymentId);
    await ctx.services.lifecycle.reconcile();
    const all = await events(r.who, r.start, r.rentalId);
    assert.deepEqual(
      all.map((e) => e.type),
      ['rental.provisioning', 'rental.active', 'rental.expiring'],
    );
    const expiring = all[2];
    assert.ok(new Date(expiring.createdAt).getTime() < endsAt, 'before the end');
    assert.equal(expiring.data.status, 'ACTIVE');
    assert.equal(expiring.data.endsAt, active.endsAt);
    assert.equal((await ctx.api.post(`/api/v1/deployments/${r.deploymentId}/terminate`).set(r.who.auth)).status, 202);
  });
});
