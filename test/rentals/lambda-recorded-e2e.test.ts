import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sshExec, sshProbe } from '../../src/providers/ssh-probe.js';
import { FakeLambdaApi } from '../fakes/lambda-api.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { type SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { cloudAgent, cloudService, type CloudAgent } from '../helpers/cloud-agent.js';

/**
 * The whole service (API, worker, real Lambda plugin) renting from a Lambda fake that answers as
 * the live API was recorded: the edge refuses requests without a product User-Agent, and a
 * terminate of an instance already terminating answers `global/unknown`.
 */
describe('rentals on Lambda as it really answers (API + worker + recorded fake)', function () {
  this.timeout(300_000);
  let lambda: FakeLambdaApi;
  let ctx: TestContext;
  let worker: TestWorker;
  let agent: CloudAgent;

  before(async () => {
    lambda = await FakeLambdaApi.start({ behaviour: 'recorded', bootMs: 100, terminateMs: 1500 });
    ctx = await createTestContext(cloudService({ lambda }, { PRICE_MARKUP_PERCENT: '10' }));
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
    agent = cloudAgent(ctx);
  });

  after(async () => {
    await worker?.stop();
    await ctx?.close();
    await lambda?.close();
  });

  async function rentH100(who: SignedUp) {
    const offers = (await ctx.api.get('/api/v1/offers')).body.data as {
      id: string;
      name: string;
      gpuCount: number;
      provider: string;
    }[];
    const offer = offers.find((o) => o.provider === 'lambda' && /H100/.test(o.name) && o.gpuCount === 1);
    assert.ok(offer, 'a Lambda H100 offer is listed through the edge gate');
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ offerId: offer.id });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data as { rentalId: string; deploymentId: string };
  }

  async function activeWithCredentials(who: SignedUp, deploymentId: string) {
    const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
    assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
    const c = (await ctx.api.post(`/api/v1/deployments/${deploymentId}/credentials/reveal`).set(who.auth)).body.data;
    const target = { host: c.host, port: c.port, user: c.user, privateKey: c.privateKey };
    assert.equal(c.user, 'ubuntu');
    const smi = await sshExec(target, 'nvidia-smi');
    assert.equal(smi.code, 0);
    assert.match(smi.stdout, /H100/);
    return target;
  }

  async function terminated(who: SignedUp, deploymentId: string) {
    assert.equal((await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(who.auth)).status, 202);
    const done = await agent.deployment(who, deploymentId, ['TERMINATED']);
    assert.ok(done.endedAt, 'endedAt is set once destruction is verified');
    return done;
  }

  const labelOf = (deploymentId: string) => lambda.instances().find((i) => i.name.includes(deploymentId))!;

  it('rent, ACTIVE, terminate, TERMINATED with destruction verified; every call passes the edge gate', async () => {
    const who = await agent.fundedAgent();
    const { deploymentId } = await rentH100(who);
    const target = await activeWithCredentials(who, deploymentId);
    const instance = labelOf(deploymentId);
    await terminated(who, deploymentId);
    assert.equal((await sshProbe(target, { timeoutMs: 2000 })).ok, false, 'the key no longer gets in');
    assert.equal(lambda.instances().find((i) => i.id === instance.id)?.status, 'terminated');
    await waitFor(async () => !lambda.sshKeys().some((k) => k.name === instance.name), {
      timeoutMs: 10_000,
      what: 'per-deployment key deleted',
    });
    assert.deepEqual(
      lambda.calls.filter((c) => c.status === 403),
      [],
      'no call was refused by the edge',
    );
  });

  it('a terminate answered global/unknown (the instance was already terminating) still ends the rental with a verified destruction', async () => {
    const who = await agent.fundedAgent();
    const { deploymentId } = await rentH100(who);
    const target = await activeWithCredentials(who, deploymentId);
    const instance = labelOf(deploymentId);
    // Someone terminated it already (the dashboard, or an earlier terminate whose answer was lost):
    // Lambda answers the service's own terminate with global/unknown while it is terminating.
    const callsBefore = lambda.calls.length;
    const outside = await fetch(`${lambda.url}/api/v1/instance-operations/terminate`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${lambda.apiKey}`,
        'Content-Type': 'application/json',
        'User-Agent': 'lambda-dashboard/1.0',
      },
      body: JSON.stringify({ instance_ids: [instance.id] }),
    });
    assert.equal(outside.status, 200);
    assert.equal(lambda.instances().find((i) => i.id === instance.id)?.status, 'terminating');

    await terminated(who, deploymentId);
    const terminates = lambda.calls
      .slice(callsBefore)
      .filter((c) => c.path === '/api/v1/instance-operations/terminate');
    assert.equal(
      terminates[1]?.status,
      500,
      `the service's first terminate met global/unknown: ${JSON.stringify(terminates)}`,
    );
    assert.equal((await sshProbe(target, { timeoutMs: 2000 })).ok, false, 'the key no longer gets in');
    assert.equal(lambda.instances().find((i) => i.id === instance.id)?.status, 'terminated');
    // The plugin settled the refusal by reading the instance, instead of failing the destroy.
    const after = lambda.calls.slice(callsBefore);
    const refused = after.findIndex((c) => c.path === '/api/v1/instance-operations/terminate' && c.status === 500);
    assert.deepEqual(after[refused + 1], { method: 'GET', path: `/api/v1/instances/${instance.id}`, status: 200 });
  });
});
