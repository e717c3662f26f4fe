import assert from 'node:assert/strict';
import { sshProbe } from '../../src/providers/ssh-probe.js';
import { FakeVastApi, REPRICED_OFFER, type VastStartFailure } from '../fakes/vast-api.js';
import { offer } from '../fakes/vast-fixtures.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { cloudAgent, cloudService, type CloudAgent } from '../helpers/cloud-agent.js';

/** A second 1x H100 ask, dearer than the fixture's 2.10, so a GPU-intent rental has somewhere to go. */
const SECOND_H100 = offer(7100021, 'H100 SXM', 1, 81_559, 2.3, { geolocation: 'Nevada, US' });

/**
 * Rentals through the whole service (API, worker, real Vast plugin) against the Vast fake in
 * recorded mode: it answers as the live API was recorded (taken asks under HTTP 400,
 * `no_such_instance` in two forms, `null`/`[]`/`destroyed` after a destroy, starts that fail,
 * instances repriced after accept), and the service must rent, fall back and end regardless.
 */
describe('Vast rentals against live answers (API + worker + recorded Vast fake)', function () {
  this.timeout(300_000);
  let vast: FakeVastApi;
  let ctx: TestContext;
  let worker: TestWorker;
  let agent: CloudAgent;

  before(async () => {
    vast = await FakeVastApi.start({ behaviour: 'recorded', bootMs: 100 });
    vast.offers.push({ ...SECOND_H100 });
    ctx = await createTestContext(cloudService({ vast }, { PRICE_MARKUP_PERCENT: '10' }));
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
    agent = cloudAgent(ctx);
  });

  after(async () => {
    await worker?.stop();
    await ctx?.close();
    await vast?.close();
  });

  const attempts = async (
    deploymentId: string,
  ): Promise<{ outcome: string; instance: string | null; detail: string | null }[]> =>
    ctx.services.ds.query(
      `SELECT outcome, instance_id AS instance, detail FROM deployment_attempts WHERE deployment_id = ? ORDER BY attempt`,
      [deploymentId],
    );
  const instanceOf = async (deploymentId: string): Promise<string> =>
    (await ctx.services.ds.query(`SELECT instance_id AS id FROM deployments WHERE id = ?`, [deploymentId]))[0].id;
  const deletesOf = (instanceId: string) =>
    vast.calls.filter((c) => c.method === 'DELETE' && c.path === `/api/v0/instances/${instanceId}/`);
  const createsOf = (askId: number) =>
    vast.calls.filter((c) => c.method === 'PUT' && c.path === `/api/v0/asks/${askId}/`);

  async function providerStatus(): Promise<{ lastErrorClass: string | null; lastErrorAt: string | null }> {
    const res = await ctx.api.get('/api/v1/providers');
    const vastStatus = (
      res.body.data as { id: string; lastErrorClass: string | null; lastErrorAt: string | null }[]
    ).find((p) => p.id === 'vast')!;
    return { lastErrorClass: vastStatus.lastErrorClass, lastErrorAt: vastStatus.lastErrorAt };
  }

  it('a taken ask (HTTP 400 no_such_ask) falls back to the next candidate', async () => {
    vast.noCapacity('7100001');
    // The database is shared with other files, whose Vast errors may be on record: nothing new may be.
    const before = await providerStatus();
    try {
      const who = await agent.fundedAgent();
      const { deploymentId } = await agent.rent(who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 1000 });
      const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
      assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
      assert.deepEqual(
        (await attempts(deploymentId)).map((a) => a.outcome),
        ['UNAVAILABLE', 'CREATED'],
      );
      assert.equal(createsOf(7100001).at(-1)?.status, 400, 'the taken ask was answered as recorded');
      assert.equal(createsOf(SECOND_H100.id).length, 1);
      assert.deepEqual(await providerStatus(), before, 'capacity stays quiet on /api/v1/providers');
      await agent.terminate(who, deploymentId);
    } finally {
      vast.noCapacity('7100001', false);
    }
  });

  it('termination completes against every recorded form of "already gone"', async () => {
    const who = await agent.fundedAgent();
    // [destroy answer when the instance is already gone, show-instance after the destroy]; null: our destroy is the first.
    const forms: ['404' | '200' | null, 'null' | 'empty-array' | 'destroyed'][] = [
      ['404', 'null'],
      ['200', 'empty-array'],
      [null, 'destroyed'],
    ];
    for (const [gone, after] of forms) {
      vast.setQuirk('goneInstance', gone ?? true);
      vast.setQuirk('afterDestroy', after);
      const { deploymentId } = await agent.rent(who, { gpuModel: 'RTX 4090', gpuCount: 1, maxHourlyPriceMinor: 1000 });
      const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
      assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
      const instanceId = await instanceOf(deploymentId);
      if (gone) {
        // A destroy whose answer was lost: the instance is gone before the service asks.
        const res = await fetch(`${vast.url}/api/v0/instances/${instanceId}/`, {
          method: 'DELETE',
          headers: { Authorization: `Bearer ${vast.apiKey}` },
        });
        assert.equal(res.status, 200);
      }
      await agent.terminate(who, deploymentId);
      // The first destroy takes the instance (the test's own, when its answer was "lost"). A check
      // that cannot conclude (a probe timing out on a loaded machine) destroys again until one does:
      // each later destroy meets the instance already gone, in a recorded form (the one set, or
      // each in turn when none is).
      const [first, ...later] = deletesOf(instanceId).map((c) => c.status);
      assert.equal(first, 200, `${gone}/${after}`);
      if (gone) assert.ok(later.length >= 1, `${gone}/${after}: the service destroyed it too`);
      const goneForms = gone ? [Number(gone)] : [404, 200];
      assert.deepEqual(
        later.filter((s) => !goneForms.includes(s)),
        [],
        `${gone}/${after}: ${JSON.stringify(later)}`,
      );
    }
    assert.equal(vast.instances().length, 0);
  });

  for (const kind of ['oci-failure', 'manifest-not-found', 'image-pull-failure'] as VastStartFailure[]) {
    it(`an instance that cannot start (${kind}) leaves PROVISIONING within a minute and is destroyed`, async () => {
      vast.breakStarts('RTX 4090', kind);
      try {
        const who = await agent.fundedAgent();
        const started = Date.now();
        const { deploymentId, rentalId } = await agent.rent(who, {
          gpuModel: 'RTX 4090',
          gpuCount: 1,
          maxHourlyPriceMinor: 1000,
        });
        const failed = await agent.deployment(who, deploymentId, ['FAILED', 'ACTIVE'], 60_000);
        assert.equal(failed.status, 'FAILED', JSON.stringify(failed));
        assert.ok(Date.now() - started < 60_000);
        const instanceId = await instanceOf(deploymentId);
        await waitFor(async () => deletesOf(instanceId).some((c) => c.status === 200), {
          timeoutMs: 10_000,
          what: 'the fake saw the destroy',
        });
        assert.ok(!vast.instances().some((i) => i.id === instanceId), 'the instance no longer exists');
        const rental = (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data;
        assert.equal(rental.failureCode, 'PROVISIONING_FAILED', JSON.stringify(rental));
      } finally {
        vast.breakStarts('RTX 4090', null);
      }
    });
  }

  it('an instance repriced over its quote is destroyed and the next candidate is used', async () => {
    const who = await agent.fundedAgent();
    const { deploymentId, rentalId } = await agent.rent(who, {
      gpuModel: 'A100',
      gpuCount: 1,
      maxHourlyPriceMinor: 1000,
    });
    const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
    if (active.status !== 'ACTIVE') {
      // Says why it failed (the rental's failure and every attempt), which the deployment alone does not.
      const rental = (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data;
      assert.fail(`not ACTIVE: ${JSON.stringify({ rental, attempts: await attempts(deploymentId) })}`);
    }
    const tried = await attempts(deploymentId);
    assert.deepEqual(
      tried.map((a) => a.outcome),
      ['UNAVAILABLE', 'CREATED'],
    );
    assert.match(tried[0].detail ?? '', /over the 99 cents\/h the offer was quoted at/);
    // The calls between the repriced ask's create and the next create: its price read, then its destroy.
    const from = vast.calls.findIndex((c) => c.method === 'PUT' && c.path === `/api/v0/asks/${REPRICED_OFFER.id}/`);
    const to = vast.calls.findIndex((c, i) => i > from && c.method === 'PUT');
    assert.equal(vast.calls[from]?.status, 200, 'the repriced ask was rented');
    const between = vast.calls
      .slice(from + 1, to)
      .filter((c) => c.path.startsWith('/api/v0/instances/'))
      .map((c) => `${c.method} ${c.status}`);
    assert.deepEqual(
      between,
      ['GET 200', 'DELETE 200'],
      'the repriced instance was read and destroyed before the next candidate',
    );
    assert.equal(
      vast.instances().filter((i) => i.label?.includes(deploymentId)).length,
      1,
      'only the instance in use is left',
    );
    const c = (await ctx.api.post(`/api/v1/deployments/${deploymentId}/credentials/reveal`).set(who.auth)).body.data;
    assert.equal(
      (await sshProbe({ host: c.host, port: c.port, user: c.user, privateKey: c.privateKey }, { timeoutMs: 2000 })).ok,
      true,
    );
    await agent.terminate(who, deploymentId);
  });

  it('a create Vast refuses as a bad request fails the rental at once and shows on /api/v1/providers', async () => {
    vast.respondNext('create', 400, {
      success: false,
      error: 'invalid_args',
      msg: "error 400/3467: Invalid args: 'image' is not a valid image",
      ask_id: 7100003,
    });
    const who = await agent.fundedAgent();
    const { deploymentId, rentalId } = await agent.rent(who, {
      gpuModel: 'RTX 4090',
      gpuCount: 1,
      maxHourlyPriceMinor: 1000,
    });
    const failed = await agent.deployment(who, deploymentId, ['FAILED', 'ACTIVE']);
    assert.equal(failed.status, 'FAILED', JSON.stringify(failed));
    const tried = await attempts(deploymentId);
    assert.deepEqual(
      tried.map((a) => a.outcome),
      ['REJECTED'],
    );
    assert.match(tried[0].detail ?? '', /^VAST_PROVIDER_IMAGE: /);
    assert.equal(
      (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data.failureCode,
      'PROVIDER_REJECTED',
    );
    assert.equal((await providerStatus()).lastErrorClass, 'request');
  });
  it('a rental whose instance moved N GB is charged N x the per-GB price x the markup, in TRAFFIC entries, within its budget', async () => {
    const listed = (await ctx.api.get('/api/v1/offers')).body.data as {
      id: string;
      provider: string;
      pricePerHourMinor: number;
      trafficPricePerGb?: { upMicroUsd: number; downMicroUsd: number };
    }[];
    // The recorded ask billing 0.03 $/GB each way: 0.033 with the 10 % markup.
    const billed = listed.find((o) => o.provider === 'vast' && o.trafficPricePerGb?.upMicroUsd === 33_000)!;
    assert.ok(billed, 'the traffic-billing ask is listed');
    assert.deepEqual(billed.trafficPricePerGb, { upMicroUsd: 33_000, downMicroUsd: 33_000 });
    const who = await agent.fundedAgent();
    const { deploymentId, rentalId } = await agent.rent(who, { offerId: billed.id, budgetMinor: 5000 });
    const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
    assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
    const instanceId = await instanceOf(deploymentId);
    // 10 GiB pulled and 10 GiB pushed, beside the few KB of the service's own SSH checks: 20 x 3.3 = 66 cents.
    vast.moveTraffic(instanceId, { sentBytes: 10 * 2 ** 30, receivedBytes: 10 * 2 ** 30 });
    await ctx.services.jobs.now('rental.reconcile', {});
    await waitFor(
      async () => {
        const d = (await ctx.api.get(`/api/v1/deployments/${deploymentId}`).set(who.auth)).body.data;
        return d.traffic?.sentBytes >= 10 * 2 ** 30;
      },
      { what: 'the status poll records the counters' },
    );
    const done = await agent.terminate(who, deploymentId);
    const traffic = done.traffic as { sentBytes: number; receivedBytes: number; chargedMinor: number };
    assert.equal(traffic.chargedMinor, 66);
    assert.ok(traffic.sentBytes >= 10 * 2 ** 30 && traffic.sentBytes < 10 * 2 ** 30 + 2 ** 24);
    const entries: { amount: string }[] = await ctx.services.ds.query(
      `SELECT amount_minor AS amount FROM ledger_entries WHERE rental_id = ? AND kind = 'TRAFFIC'`,
      [rentalId],
    );
    assert.equal(-entries.reduce((n, e) => n + Number(e.amount), 0), 66);
    assert.ok((done.usageMinor as number) + traffic.chargedMinor <= 5000, 'within the budget');
    assert.ok(!vast.instances().some((i) => i.id === instanceId && i.status !== 'destroyed'), 'the instance is gone');
  });
});
