import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { PRODUCT_USER_AGENT } from '../../src/providers/kit/user-agent.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec } from '../../src/providers/ssh-probe.js';
import { FakeRunpodApi } from '../fakes/runpod-api.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { type SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { cloudAgent, cloudService, type CloudAgent } from '../helpers/cloud-agent.js';

interface OfferView {
  id: string;
  name: string;
  gpuCount: number;
  provider: string;
}

const H100 = 'NVIDIA H100 80GB HBM3';
const RTX4090 = 'NVIDIA GeForce RTX 4090';

/**
 * The whole service renting RunPod pods as an agent would, against the fake answering as the live
 * RunPod API was recorded: the User-Agent gate at the edge, lists paged by cursor, pods without
 * `ssh` until their endpoint exists, and GeForce hosts whose old driver cannot start a newer image.
 */
describe('rentals on RunPod as it really answers (API + worker + recorded fake)', function () {
  this.timeout(300_000);
  let runpod: FakeRunpodApi;
  let ctx: TestContext;
  let worker: TestWorker;
  let agent: CloudAgent;

  before(async () => {
    runpod = await FakeRunpodApi.start({ behaviour: 'recorded', bootMs: 200, directSshDelayMs: 100 });
    ctx = await createTestContext(cloudService({ runpod }, { PRICE_MARKUP_PERCENT: '10' }));
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
    agent = cloudAgent(ctx);
  });

  after(async () => {
    await worker?.stop();
    await ctx?.close();
    await runpod?.close();
  });

  /** The one-GPU RunPod offer whose (catalog-normalised) name matches. */
  async function offer(name: RegExp): Promise<OfferView> {
    const res = await ctx.api.get('/api/v1/offers');
    assert.equal(res.status, 200);
    const hit = (res.body.data as OfferView[]).find(
      (o) => o.provider === 'runpod' && name.test(o.name) && o.gpuCount === 1,
    );
    assert.ok(hit, `a RunPod ${name} offer is listed`);
    return hit;
  }

  /** RunPod's API as another client of the same account sees it (with a User-Agent of its own). */
  const direct = (method: string, path: string, body?: unknown) =>
    fetch(`${runpod.url}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${runpod.apiKey}`,
        'User-Agent': 'other-tool/2.0',
        ...(body ? { 'Content-Type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });

  /** Pods of another tool on the same account, created first so that ours land past page 1. */
  async function bystanders(n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await direct('POST', '/v2/pods', {
        name: `other-tool-${randomUUID().slice(0, 8)}`,
        image: 'runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04',
        gpu: { id: H100, count: 1 },
        ports: ['22/tcp'],
        env: { PUBLIC_KEY: generateDeploymentKeyPair('other').publicKey },
      });
      assert.equal(res.status, 201);
      ids.push(((await res.json()) as { id: string }).id);
    }
    return ids;
  }

  /** Names of the pods on the first page of `GET /v2/pods`. */
  async function firstPage(): Promise<string[]> {
    const page = (await (await direct('GET', '/v2/pods')).json()) as {
      pods: { name: string }[];
      pagination: { nextCursor: string | null };
    };
    assert.ok(page.pagination.nextCursor, 'the list has a second page');
    return page.pods.map((p) => p.name);
  }

  it('lists RunPod offers through the User-Agent gate, and /providers reports no error', async () => {
    // Every call the service made so far, the catalog reads included, carried the product's User-Agent.
    const ours = runpod.calls.slice();
    assert.ok(ours.some((c) => c.path === '/v2/catalog/gpus'));
    assert.deepEqual([...new Set(ours.map((c) => c.userAgent))], [PRODUCT_USER_AGENT]);
    const blocked = await fetch(`${runpod.url}/v2/catalog/gpus`, {
      headers: { Authorization: `Bearer ${runpod.apiKey}` },
    });
    assert.equal(blocked.status, 403, "a runtime's default User-Agent is refused at the edge");
    await offer(/H100/);
    const status = (await ctx.api.get('/api/v1/providers')).body.data as {
      id: string;
      lastErrorClass: string | null;
      offerCount: number;
    }[];
    const rp = status.find((p) => p.id === 'runpod')!;
    assert.equal(rp.lastErrorClass, null);
    assert.ok(rp.offerCount > 0);
  });

  it("a GeForce rental becomes ACTIVE: the create carries the image's CUDA floor, so the pod lands on a driver that can start it", async () => {
    const who = await agent.fundedAgent();
    const { deploymentId } = await agent.rent(who, { offerId: (await offer(/4090/)).id });
    const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
    assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
    const mine = runpod.calls.find(
      (c) => c.method === 'POST' && (c.body as { name?: string }).name?.includes(deploymentId),
    );
    assert.deepEqual((mine?.body as { gpu: unknown }).gpu, { id: RTX4090, count: 1, minCudaVersion: '12.4' });

    const c = (await ctx.api.post(`/api/v1/deployments/${deploymentId}/credentials/reveal`).set(who.auth)).body.data;
    const smi = await sshExec({ host: c.host, port: c.port, user: c.user, privateKey: c.privateKey }, 'nvidia-smi');
    assert.match(smi.stdout, /4090/);
    await agent.terminate(who, deploymentId);
    assert.ok(!runpod.instances().some((p) => p.name.includes(deploymentId)), 'the pod is deleted');
  });

  it('adopts the pod of a create whose answer was lost when it lands on the second page of the list: exactly one pod', async () => {
    const others = await bystanders(2);
    const before = runpod.calls.length;
    runpod.hangCreatesAfterCreating(true);
    let deploymentId: string;
    let who: SignedUp;
    try {
      who = await agent.fundedAgent();
      ({ deploymentId } = await agent.rent(who, { offerId: (await offer(/H100/)).id }));
      const active = await agent.deployment(who, deploymentId, ['ACTIVE', 'FAILED']);
      assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
    } finally {
      runpod.hangCreatesAfterCreating(false);
    }
    assert.deepEqual(await agent.attempts(deploymentId), ['runpod:ADOPTED']);
    const mine = runpod.instances().filter((p) => p.name.includes(deploymentId));
    assert.equal(mine.length, 1, JSON.stringify(runpod.instances()));
    assert.ok(!(await firstPage()).includes(mine[0].name), 'the adopted pod was on page 2');
    const posts = runpod.calls.slice(before).filter((c) => c.method === 'POST' && c.path === '/v2/pods');
    assert.equal(posts.length, 1, 'one create call');
    assert.ok(
      runpod.calls.slice(before).some((c) => c.method === 'GET' && c.query.includes('cursor=')),
      'the lookup followed the cursor',
    );

    await agent.terminate(who, deploymentId);
    assert.equal(runpod.instances().filter((p) => p.name.includes(deploymentId)).length, 0);
    assert.deepEqual(
      others.filter((id) => runpod.instances().some((p) => p.id === id)),
      others,
      "another tool's pods are never touched",
    );
  });

  it('the reconciler destroys an orphan of ours on the second page of the list', async () => {
    await bystanders(2);
    const provider = ctx.services.providers.get('runpod');
    const label = `gpr-${randomUUID()}-1`;
    const made = await provider.create(
      label,
      { id: randomUUID(), key: `1x:${H100}`, name: H100, gpuCount: 1 },
      generateDeploymentKeyPair('orphan').publicKey,
    );
    assert.equal(made.kind, 'created', JSON.stringify(made));
    assert.ok(!(await firstPage()).includes(label), 'the orphan is past page 1');
    await ctx.services.jobs.now('rental.reconcile', {});
    await waitFor(async () => !runpod.instances().some((p) => p.name === label), { what: 'orphan destroyed' });
  });
});
