import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { sshExec, sshProbe } from '../../src/providers/ssh-probe.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup, type SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { createTopup } from '../helpers/payments.js';
import { offerIds } from '../helpers/rentals.js';
import { waitFor } from '../helpers/wait.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'e2e-gone',
    name: 'NVIDIA A100 80GB',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 150,
    maximumDurationSeconds: 86400,
    create: 'unavailable',
    provisionSeconds: 0,
  },
  {
    key: 'e2e-a100',
    name: 'NVIDIA A100 80GB',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 200,
    maximumDurationSeconds: 86400,
    provisionSeconds: 1,
  },
  {
    key: 'e2e-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
  {
    key: 'e2e-l40s',
    name: 'NVIDIA L40S',
    category: 'datacenter',
    vramGb: 48,
    gpuCount: 1,
    pricePerHourMinor: 120,
    maximumDurationSeconds: 86400,
    create: 'ambiguous-created',
    provisionSeconds: 0,
  },
  {
    key: 'e2e-4090',
    name: 'NVIDIA GeForce RTX 4090',
    category: 'consumer',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 60,
    maximumDurationSeconds: 86400,
    create: 'ambiguous-none',
    provisionSeconds: 0,
  },
  {
    key: 'e2e-a6000',
    name: 'NVIDIA RTX A6000',
    category: 'workstation',
    vramGb: 48,
    gpuCount: 1,
    pricePerHourMinor: 80,
    maximumDurationSeconds: 86400,
    create: 'fail',
    provisionSeconds: 0,
  },
];

/** Full wiring: the HTTP app and a real Agenda worker on the same database, the local provider behind both. */
describe('rentals end to end (API + worker + local provider)', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let worker: TestWorker;
  let ids: Record<string, string>;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { RENTAL_POLL_MS: '50' } });
    ids = await offerIds(ctx);
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
  });
  after(async () => {
    await worker.stop();
    await ctx.close();
  });

  async function fundedAgent(
    amountMinor: number,
    billingModel: 'ACCOUNT_BALANCE' | 'LEGACY_PREPAID',
  ): Promise<SignedUp> {
    const who = await signup(ctx);
    await ctx.services.ds.getRepository(Account).update({ id: who.accountId }, { billingModel });
    const { topup } = await createTopup(ctx, who, amountMinor);
    const pay = await ctx.api.post(new URL(topup.paymentUrl).pathname);
    assert.equal(pay.status, 303);
    const bal = await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: who.accountId });
    assert.equal(bal.balanceMinor, amountMinor);
    return who;
  }

  async function until(who: SignedUp, deploymentId: string, statuses: string[], stepMs = 200) {
    let last: { status: string; [k: string]: unknown } | undefined;
    await waitFor(
      async () => {
        // The local provider boots on the injected (manual) clock; move it so provisionSeconds pass.
        ctx.clock.advance(stepMs);
        const res = await ctx.api.get(`/api/v1/deployments/${deploymentId}`).set(who.auth);
        last = res.body.data;
        return statuses.includes(res.body.data?.status);
      },
      { what: `deployment ${deploymentId} in ${statuses}` },
    );
    return last!;
  }

  async function lifecycle(who: SignedUp, body: object, expectGpu: RegExp) {
    const res = await ctx.api.post('/api/v1/rentals').set(who.auth).set('Idempotency-Key', randomUUID()).send(body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { deploymentId, rentalId } = res.body.data;
    const active = await until(who, deploymentId, ['ACTIVE', 'FAILED']);
    assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
    assert.ok(active.startedAt);

    const reveal = await ctx.api.post(`/api/v1/deployments/${deploymentId}/credentials/reveal`).set(who.auth);
    assert.equal(reveal.status, 200, JSON.stringify(reveal.body));
    const c = reveal.body.data;
    const target = { host: c.host, port: c.port, user: c.user, privateKey: c.privateKey };
    const smi = await sshExec(target, 'nvidia-smi');
    assert.equal(smi.code, 0);
    assert.match(smi.stdout, expectGpu);

    assert.equal((await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(who.auth)).status, 202);
    const done = await until(who, deploymentId, ['TERMINATED']);
    assert.ok(done.endedAt);
    assert.equal((await sshProbe(target, { timeoutMs: 2000 })).ok, false);
    const rental = await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth);
    assert.equal(rental.body.data.status, 'TERMINATED');
    return { deploymentId, rentalId };
  }

  it('metered: rent by offer, ACTIVE, reveal, nvidia-smi over SSH, terminate, TERMINATED and the key refused', async () => {
    const who = await fundedAgent(5000, 'ACCOUNT_BALANCE');
    await lifecycle(who, { offerId: ids['e2e-h100'] }, /H100/);
  });

  it('legacy: rent by GPU intent, falls past the unavailable offer, runs, terminates with no credit back (quoted 3 h at the cheapest candidate, 150/h)', async () => {
    const who = await fundedAgent(5000, 'LEGACY_PREPAID');
    await lifecycle(who, { gpuModel: 'A100 80GB', gpuCount: 1, maxHourlyPriceMinor: 250, budgetMinor: 500 }, /A100/);
    const bal = await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: who.accountId });
    assert.ok(bal.balanceMinor < 5000 && bal.balanceMinor === 5000 - 450, String(bal.balanceMinor));
  });

  it('explicit offer the provider no longer has: FAILED with OFFER_NOT_FOUND and the legacy debit back', async () => {
    const who = await fundedAgent(5000, 'LEGACY_PREPAID');
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: ids['e2e-gone'], budgetMinor: 500 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    await until(who, res.body.data.deploymentId, ['FAILED']);
    await waitFor(
      async () => {
        const r = await ctx.api.get(`/api/v1/rentals/${res.body.data.rentalId}`).set(who.auth);
        return JSON.stringify(r.body.data).includes('SUCCEEDED');
      },
      { timeoutMs: 10_000, what: 'reversal' },
    );
    const r = await ctx.api.get(`/api/v1/rentals/${res.body.data.rentalId}`).set(who.auth);
    assert.match(JSON.stringify(r.body.data), /OFFER_NOT_FOUND/);
    assert.equal(
      (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: who.accountId })).balanceMinor,
      5000,
    );
  });

  const instancesOf = async (deploymentId: string) =>
    (
      await ctx.services.ds.query(`SELECT state FROM local_provider_instances WHERE label LIKE ?`, [
        `%${deploymentId}%`,
      ])
    ).map((r: { state: string }) => r.state);
  const attemptsOf = async (deploymentId: string) =>
    (
      await ctx.services.ds.query(`SELECT outcome FROM deployment_attempts WHERE deployment_id = ? ORDER BY attempt`, [
        deploymentId,
      ])
    ).map((r: { outcome: string }) => r.outcome);

  async function failedWithReversal(
    who: SignedUp,
    res: { body: { data: { rentalId: string; deploymentId: string } } },
    stepMs = 200,
  ) {
    await until(who, res.body.data.deploymentId, ['FAILED'], stepMs);
    const rental = await waitFor(
      async () => {
        const r = await ctx.api.get(`/api/v1/rentals/${res.body.data.rentalId}`).set(who.auth);
        return r.body.data.reversalStatus === 'SUCCEEDED' && r.body.data;
      },
      { timeoutMs: 10_000, what: 'reversal' },
    );
    return rental as { failureReason: string | null; [k: string]: unknown };
  }

  it('ambiguous create whose instance exists: adopted by its label, one instance, usable over SSH, then destroyed', async () => {
    const who = await fundedAgent(5000, 'ACCOUNT_BALANCE');
    const { deploymentId } = await lifecycle(who, { gpuModel: 'L40S', gpuCount: 1, maxHourlyPriceMinor: 200 }, /L40S/);
    assert.deepEqual(await attemptsOf(deploymentId), ['ADOPTED']);
    assert.deepEqual(await instancesOf(deploymentId), ['destroyed']);
  });

  it('ambiguous create with no instance: looked for by label until the bound, never re-created, FAILED with the legacy debit back', async () => {
    const who = await fundedAgent(5000, 'LEGACY_PREPAID');
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ gpuModel: 'RTX 4090', gpuCount: 1, maxHourlyPriceMinor: 100, budgetMinor: 500 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    // The adoption bound runs on the injected clock; step it in large strides.
    await failedWithReversal(who, res, 5000);
    assert.deepEqual(await attemptsOf(res.body.data.deploymentId), ['NOT_FOUND']);
    assert.deepEqual(await instancesOf(res.body.data.deploymentId), []);
    assert.equal(
      (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: who.accountId })).balanceMinor,
      5000,
    );
  });

  it('provider reports the instance failed: FAILED with a customer-safe reason, the instance destroyed, nothing charged', async () => {
    const who = await fundedAgent(5000, 'ACCOUNT_BALANCE');
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: ids['e2e-a6000'] });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const rental = await failedWithReversal(who, res);
    assert.equal(rental.status, 'FAILED');
    assert.ok(rental.failureReason && !/stack|Error:|at \//.test(rental.failureReason), String(rental.failureReason));
    await waitFor(async () => (await instancesOf(res.body.data.deploymentId)).join() === 'destroyed', {
      timeoutMs: 10_000,
      what: 'instance destroyed',
    });
    assert.equal(
      (await ctx.services.ds.getRepository(Account).findOneByOrFail({ id: who.accountId })).balanceMinor,
      5000,
    );
  });
});
