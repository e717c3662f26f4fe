import assert from 'node:assert/strict';
import { verifyReceipt } from '../../clients/sdk/src/receipts.js';
import { FakeLambdaApi } from '../fakes/lambda-api.js';
import { FakeRunpodApi } from '../fakes/runpod-api.js';
import { FakeVastApi } from '../fakes/vast-api.js';
import { driveCanary } from '../helpers/canary.js';
import { cloudService } from '../helpers/cloud-agent.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';

/**
 * The canary on each cloud's faithful fake, through the real plugins, the rental path and the
 * worker's jobs: each fake's machine is a real SSH endpoint on loopback that lets in only the key
 * the cloud delivered and answers nvidia-smi.
 */
describe('owner providers canary on Vast.ai, RunPod and Lambda (rental path + worker + cloud fakes)', function () {
  this.timeout(180_000);
  let vast: FakeVastApi;
  let runpod: FakeRunpodApi;
  let lambda: FakeLambdaApi;
  let ctx: TestContext;
  let worker: TestWorker;

  before(async () => {
    vast = await FakeVastApi.start({ bootMs: 100 });
    runpod = await FakeRunpodApi.start({ bootMs: 200, directSshDelayMs: 100 });
    lambda = await FakeLambdaApi.start({ bootMs: 100 });
    ctx = await createTestContext(cloudService({ vast, runpod, lambda }));
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
  });

  after(async () => {
    await worker?.stop();
    await ctx?.close();
    await Promise.all([vast?.close(), runpod?.close(), lambda?.close()]);
  });

  /** What each fake still holds of the rental's deployment: instances not yet destroyed (and Lambda's keys). */
  const leftIn: Record<string, (deploymentId: string) => unknown[]> = {
    vast: (id) => vast.instances().filter((i) => i.label?.includes(id)),
    runpod: (id) => runpod.instances().filter((p) => p.name.includes(id)),
    lambda: (id) => [
      ...lambda.instances().filter((i) => i.name.includes(id) && i.status !== 'terminated'),
      ...lambda.sshKeys().filter((k) => k.name.includes(id)),
    ],
  };

  for (const provider of ['vast', 'runpod', 'lambda']) {
    it(`${provider}: reaches ACTIVE, lists the H100 over SSH with the rental key, ends TERMINATED within its cap, and the fake keeps no instance`, async () => {
      const { report, said } = await driveCanary(ctx, { options: { provider, gpu: 'H100', maxSpendMinor: 500 } });
      assert.equal(report.ok, true, JSON.stringify(report, null, 2));
      assert.equal(report.provider, provider);
      assert.match(report.offer?.name ?? '', /H100/);
      const phases = said.map((p) => p.phase);
      for (const p of ['offer_chosen', 'created', 'ACTIVE', 'nvidia_smi', 'TERMINATED'])
        assert.ok(phases.includes(p), `phase ${p} in ${phases.join(', ')}`);
      assert.equal(report.gpus.length, report.offer!.gpuCount);
      for (const g of report.gpus) assert.match(g, /^GPU \d+: .*H100/);
      assert.equal(report.status, 'TERMINATED');
      assert.equal(report.destructionVerified, true);
      assert.ok(report.endedAt);
      assert.ok(report.costMinor !== null && report.costMinor >= 0 && report.costMinor <= 500, `${report.costMinor}`);
      const [sum] = await ctx.services.ds.query(
        `SELECT COALESCE(SUM(amount_minor), 0) AS s FROM ledger_entries WHERE rental_id = ?`,
        [report.rentalId],
      );
      assert.equal(report.costMinor, 0 - Number(sum.s), 'the cost is what the ledger holds for the rental');
      const [d] = await ctx.services.ds.query(`SELECT provider_id, spend_cap_minor FROM deployments WHERE id = ?`, [
        report.deploymentId,
      ]);
      assert.deepEqual([d.provider_id, Number(d.spend_cap_minor)], [provider, 500]);
      assert.deepEqual(leftIn[provider](report.deploymentId!), [], `${provider} keeps nothing of the rental`);
      assert.equal(report.receipt?.receipt.providerId, provider);
      assert.equal(verifyReceipt(report.receipt, await ctx.services.receipts.keySet()).valid, true);
    });
  }
});
