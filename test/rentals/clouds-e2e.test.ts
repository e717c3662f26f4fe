import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { customerPriceMinor } from '../../src/providers/pricing.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, sshProbe } from '../../src/providers/ssh-probe.js';
import { FakeLambdaApi } from '../fakes/lambda-api.js';
import { FakeRunpodApi } from '../fakes/runpod-api.js';
import { FakeVastApi } from '../fakes/vast-api.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { cloudAgent, cloudService, type CloudAgent } from '../helpers/cloud-agent.js';

interface OfferView {
  id: string;
  name: string;
  gpuCount: number;
  pricePerHourMinor: number;
  provider: string;
}

/**
 * The whole service brokering three real cloud APIs (their faithful fakes): the real plugins, with
 * only their rate-limit spacing shortened, behind the API, the worker and the GPU catalog. It runs
 * twice: against the APIs as their documents describe them, and as they were recorded answering
 * live (taken asks as 400s, "already gone" in several forms, User-Agent gates, paged lists).
 */
for (const behaviour of ['documented', 'recorded'] as const) {
  describe(`rentals across Vast.ai, RunPod and Lambda (API + worker + cloud fakes, ${behaviour} APIs)`, function () {
    this.timeout(300_000);
    let vast: FakeVastApi;
    let runpod: FakeRunpodApi;
    let lambda: FakeLambdaApi;
    let ctx: TestContext;
    let worker: TestWorker;
    let agent: CloudAgent;

    before(async () => {
      vast = await FakeVastApi.start({ bootMs: 100, behaviour });
      runpod = await FakeRunpodApi.start({ bootMs: 200, directSshDelayMs: 100, behaviour });
      lambda = await FakeLambdaApi.start({ bootMs: 100, behaviour });
      // Options come from the environment exactly as in production; only the spacing is shortened.
      ctx = await createTestContext(
        cloudService({ vast, runpod, lambda }, { PRICE_MARKUP_PERCENT: '10', RUNPOD_PROVIDER_MARKUP_PERCENT: '25' }),
      );
      worker = await startTestWorker(ctx, { processEveryMs: 50 });
      agent = cloudAgent(ctx);
    });

    after(async () => {
      await worker?.stop();
      await ctx?.close();
      await Promise.all([vast?.close(), runpod?.close(), lambda?.close()]);
    });

    async function offers(): Promise<OfferView[]> {
      const res = await ctx.api.get('/api/v1/offers');
      assert.equal(res.status, 200);
      return res.body.data;
    }

    it("prices every provider's offers with its markup: cost rounded up to a cent, times (100 + markup) / 100, rounded up", async () => {
      const all = await offers();
      const pick = (provider: string, name: RegExp, count = 1) =>
        all.find((o) => o.provider === provider && name.test(o.name) && o.gpuCount === count);
      // Fixture costs: Vast dph_total 2.10 and 0.35, RunPod 2.39 per GPU, Lambda 329 cents.
      assert.equal(pick('vast', /H100/)?.pricePerHourMinor, customerPriceMinor(210, 10));
      assert.equal(pick('vast', /4090/)?.pricePerHourMinor, customerPriceMinor(35, 10));
      assert.equal(pick('runpod', /H100/)?.pricePerHourMinor, customerPriceMinor(239, 25));
      assert.equal(pick('runpod', /H100/, 8)?.pricePerHourMinor, customerPriceMinor(1912, 25));
      assert.equal(pick('lambda', /H100/)?.pricePerHourMinor, customerPriceMinor(329, 10));
      // And every cached offer, from the stored cost: one formula, no exceptions.
      const rows: { provider: string; cost: string; price: string }[] = await ctx.services.ds.query(
        `SELECT provider, cost_per_hour_minor AS cost, price_per_hour_minor AS price FROM offers WHERE available = 1 AND provider IN ('vast', 'runpod', 'lambda')`,
      );
      const markup: Record<string, number> = { vast: 10, runpod: 25, lambda: 10 };
      assert.ok(rows.length >= 10, `${rows.length} offers cached`);
      for (const r of rows)
        assert.equal(Number(r.price), customerPriceMinor(Number(r.cost), markup[r.provider]), JSON.stringify(r));
    });

    it('"H100" rents the cheapest H100 across providers; reveal, nvidia-smi over SSH, terminate, TERMINATED and the key refused', async () => {
      const who = await agent.fundedAgent();
      const { rentalId, deploymentId } = await agent.rent(who, {
        gpuModel: 'H100',
        gpuCount: 1,
        maxHourlyPriceMinor: 1000,
      });
      const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
      assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
      assert.deepEqual(await agent.attempts(deploymentId), ['vast:CREATED']);
      const rental = (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data;
      assert.equal(rental.quote.hourlyPriceMinor, customerPriceMinor(210, 10));

      const c = (await ctx.api.post(`/api/v1/deployments/${deploymentId}/credentials/reveal`).set(who.auth)).body.data;
      const target = { host: c.host, port: c.port, user: c.user, privateKey: c.privateKey };
      assert.equal(c.user, 'root');
      const smi = await sshExec(target, 'nvidia-smi');
      assert.equal(smi.code, 0);
      assert.match(smi.stdout, /H100/);

      await agent.terminate(who, deploymentId);
      assert.equal((await sshProbe(target, { timeoutMs: 2000 })).ok, false, 'the key no longer gets in');
      assert.equal(vast.instances().length, 0, 'the Vast instance is gone');
    });

    it('falls back to the next cheapest H100 when the cheapest answers "no capacity"', async () => {
      vast.noCapacity('H100 SXM');
      try {
        const who = await agent.fundedAgent();
        const { deploymentId } = await agent.rent(who, {
          gpuModel: 'nvidia h100',
          gpuCount: 1,
          maxHourlyPriceMinor: 1000,
        });
        const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
        assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
        assert.deepEqual(await agent.attempts(deploymentId), ['vast:UNAVAILABLE', 'runpod:CREATED']);
        await agent.terminate(who, deploymentId);
        assert.equal(runpod.instances().length, 0);
      } finally {
        vast.noCapacity('H100 SXM', false);
      }
    });

    it('adopts the instance of a create that never answered, by its label: exactly one instance', async () => {
      vast.noCapacity('H100 SXM');
      runpod.hangCreatesAfterCreating(true);
      const callsBefore = runpod.calls.length;
      try {
        const who = await agent.fundedAgent();
        const { deploymentId } = await agent.rent(who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 1000 });
        const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
        assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
        assert.deepEqual(await agent.attempts(deploymentId), ['vast:UNAVAILABLE', 'runpod:ADOPTED']);
        const mine = runpod.instances().filter((p) => p.name.includes(deploymentId));
        assert.equal(mine.length, 1, JSON.stringify(runpod.instances()));
        assert.equal(
          runpod.calls.slice(callsBefore).filter((c) => c.method === 'POST' && c.path === '/v2/pods').length,
          1,
          'one create call',
        );
        runpod.hangCreatesAfterCreating(false);
        await agent.terminate(who, deploymentId);
      } finally {
        vast.noCapacity('H100 SXM', false);
        runpod.hangCreatesAfterCreating(false);
      }
    });

    it("a provider answering 429 to everything is retried later, not failed; Lambda's per-deployment key is deleted after destruction", async () => {
      const offer = (await offers()).find((o) => o.provider === 'lambda' && /H100/.test(o.name) && o.gpuCount === 1)!;
      const who = await agent.fundedAgent();
      lambda.rateLimitAll(true, 1);
      let deploymentId: string;
      try {
        ({ deploymentId } = await agent.rent(who, { offerId: offer.id }));
        await waitFor(
          async () => {
            // The lifecycle's retry time is on the injected clock; the limiter's on the wall clock.
            ctx.clock.advance(200);
            return lambda.calls.filter((c) => c.status === 429).length >= 3;
          },
          { what: 'throttled calls' },
        );
        const d = (await ctx.api.get(`/api/v1/deployments/${deploymentId}`).set(who.auth)).body.data;
        assert.ok(['PENDING', 'PROVISIONING'].includes(d.status), `still waiting, not failed: ${d.status}`);
      } finally {
        lambda.rateLimitAll(false);
      }
      const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
      assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
      const label = lambda.instances().find((i) => i.name.includes(deploymentId))!.name;
      assert.ok(
        lambda.sshKeys().some((k) => k.name === label),
        'the deployment key is registered under its label',
      );
      await agent.terminate(who, deploymentId);
      await waitFor(async () => !lambda.sshKeys().some((k) => k.name === label), {
        timeoutMs: 10_000,
        what: 'per-deployment key deleted',
      });
    });

    it('the reconciler destroys an instance carrying our label prefix that no deployment owns', async () => {
      const provider = ctx.services.providers.get('vast');
      const vastOffer = (await offers()).find((o) => o.provider === 'vast' && /4090/.test(o.name))!;
      const row: { key: string } = (
        await ctx.services.ds.query(`SELECT provider_offer_key AS \`key\` FROM offers WHERE id = ?`, [vastOffer.id])
      )[0];
      const label = `gpr-${randomUUID()}-1`;
      const made = await provider.create(
        label,
        { id: vastOffer.id, key: row.key, name: vastOffer.name, gpuCount: 1 },
        generateDeploymentKeyPair('orphan').publicKey,
      );
      assert.equal(made.kind, 'created');
      assert.ok(vast.instances().some((i) => i.label === label));
      await ctx.services.jobs.now('rental.reconcile', {});
      await waitFor(async () => !vast.instances().some((i) => i.label === label), { what: 'orphan destroyed' });
    });

    it('one provider down leaves the others rentable, and /providers says which', async () => {
      await vast.close();
      await ctx.services.inventory.refresh();
      ctx.services.inventory.invalidate();
      const status = (await ctx.api.get('/api/v1/providers')).body.data as {
        id: string;
        lastErrorClass: string | null;
        offerCount: number;
      }[];
      const byId = Object.fromEntries(status.map((p) => [p.id, p]));
      assert.equal(byId.vast.lastErrorClass, 'unavailable');
      assert.ok(byId.runpod.offerCount > 0 && byId.lambda.offerCount > 0);
      assert.equal((await ctx.api.get('/healthz')).status, 200);

      // Past the staleness bound the dead provider's offers leave; the others are refreshed and stay.
      ctx.clock.advance(11 * 60_000);
      await ctx.services.inventory.refresh();
      ctx.services.inventory.invalidate();
      const left = await offers();
      assert.equal(left.filter((o) => o.provider === 'vast').length, 0);
      assert.ok(left.some((o) => o.provider === 'runpod') && left.some((o) => o.provider === 'lambda'));

      const who = await agent.fundedAgent();
      const { deploymentId } = await agent.rent(who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 1000 });
      const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
      assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
      assert.deepEqual(await agent.attempts(deploymentId), ['runpod:CREATED']);
      await agent.terminate(who, deploymentId);
    });
  });
}
