import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sshExec, type SshTarget } from '../../src/providers/ssh-probe.js';
import { FakeLambdaApi } from '../fakes/lambda-api.js';
import { FakeRunpodApi } from '../fakes/runpod-api.js';
import { FakeVastApi } from '../fakes/vast-api.js';
import { cloudAgent, cloudService, type CloudAgent } from '../helpers/cloud-agent.js';
import { assertSecretsNowhere } from '../helpers/secrets.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { startTestWorker, type TestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';

interface OfferView {
  id: string;
  name: string;
  gpuCount: number;
  provider: string;
  capabilities: { customImage: boolean; startupScript: boolean; ports: number; maxDiskGb: number | null };
}

type Endpoint = { port: number; url: string };

const SECRET = `s3cret-${randomUUID()}`;
const SCRIPT_MARK = `script-text-${randomUUID()}`;
const IMAGE = 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime';

/**
 * A startup script that proves it ran with the rental's variables (a file naming the length of
 * GREETING, never its value) and, given a port, serves `hello <that length>` on it.
 */
function script(port: number | null): string {
  return [
    '#!/bin/sh',
    `# ${SCRIPT_MARK}`,
    'printf "ran with %s\\n" "${#GREETING}" > "$HOME/script-ran"',
    ...(port === null
      ? []
      : [
          `exec ${process.execPath} -e "require('http').createServer((q, r) => r.end('hello ' + process.env.GREETING.length)).listen(${port})"`,
        ]),
    '',
  ].join('\n');
}

const machine = (port: number | null, extra: object = {}) => ({
  env: { GREETING: SECRET, MODEL_ID: 'tiny' },
  startupScript: script(port),
  ...(port === null ? {} : { ports: [port] }),
  ...extra,
});

/**
 * From outside, on the cloud fakes: a rental with an image, variables, a startup script and a port
 * becomes ACTIVE with the variable in its shell, the script's effect in its home and the port
 * served (Lambda takes no image and no ports: those are refused there, and variables with a
 * script still make a usable machine). The whole service runs: API, worker, the real plugins.
 */
describe('machine settings on Vast.ai, RunPod and Lambda (API + worker + cloud fakes)', function () {
  this.timeout(300_000);
  let vast: FakeVastApi;
  let runpod: FakeRunpodApi;
  let lambda: FakeLambdaApi;
  let ctx: TestContext;
  let worker: TestWorker;
  let agent: CloudAgent;
  const logs: string[] = [];

  before(async () => {
    vast = await FakeVastApi.start({ bootMs: 100 });
    runpod = await FakeRunpodApi.start({ bootMs: 200, directSshDelayMs: 100 });
    lambda = await FakeLambdaApi.start({ bootMs: 100 });
    ctx = await createTestContext({ ...cloudService({ vast, runpod, lambda }), logTo: (l) => logs.push(l) });
    worker = await startTestWorker(ctx, { processEveryMs: 50 });
    agent = cloudAgent(ctx);
  });

  after(async () => {
    await worker?.stop();
    await ctx?.close();
    await Promise.all([vast?.close(), runpod?.close(), lambda?.close()]);
  });

  async function offer(provider: string): Promise<OfferView> {
    const all: OfferView[] = (await ctx.api.get('/api/v1/offers')).body.data;
    const found = all.find((o) => o.provider === provider && /H100/.test(o.name) && o.gpuCount === 1);
    assert.ok(found, `a 1x H100 offer of ${provider}`);
    return found;
  }

  const rentRaw = (who: SignedUp, body: object) =>
    ctx.api.post('/api/v1/rentals').set(who.auth).set('Idempotency-Key', randomUUID()).send(body);

  /** Rents `offerId` with `settings` and waits until the rental is ACTIVE; what every read said on the way, for the secrets check. */
  async function rentActive(who: SignedUp, offerId: string, settings: object) {
    const res = await rentRaw(who, { offerId, machine: settings });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { rentalId, deploymentId } = res.body.data as { rentalId: string; deploymentId: string };
    const reads: unknown[] = [res.body];
    let active: Record<string, unknown> = {};
    await waitFor(
      async () => {
        ctx.clock.advance(200);
        const read = await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth);
        reads.push(read.body);
        active = read.body.data;
        return active.status === 'ACTIVE' || active.status === 'FAILED';
      },
      { timeoutMs: 30_000, what: `rental ${rentalId} ACTIVE` },
    );
    assert.equal(active.status, 'ACTIVE', JSON.stringify(active));
    return { rentalId, deploymentId, active, reads, ssh: await agent.sshTarget(who, deploymentId) };
  }

  /** The variable in a login shell (and, where the cloud's boot promises it, in a plain command), and the script's effect. */
  async function assertSettingsApplied(ssh: SshTarget, plainCommands: boolean) {
    assert.equal(
      (await sshExec(ssh, `sh -lc 'printf "%s\\n" "$GREETING"'`)).stdout,
      `${SECRET}\n`,
      'the variable is in a login shell',
    );
    if (plainCommands)
      assert.equal(
        (await sshExec(ssh, 'printf "%s\\n" "$GREETING"')).stdout,
        `${SECRET}\n`,
        'the variable is in a command given to ssh',
      );
    assert.equal(
      (await sshExec(ssh, 'cat "$HOME/script-ran"')).stdout,
      `ran with ${SECRET.length}\n`,
      'the script ran with the variables before ACTIVE',
    );
  }

  /** What a GET of `url` answers, once it answers 200. */
  async function answer(get: () => Promise<string | undefined>): Promise<string> {
    return waitFor(
      async () => {
        try {
          return await get();
        } catch {
          return undefined;
        }
      },
      // The machine's server starts with its startup script, after the rental is ACTIVE: on a loaded
      // machine (another suite beside this one) that has taken over 10 s.
      { timeoutMs: 30_000, what: 'the port answers' },
    );
  }

  /** Neither the variable's value nor the script's text is in any read, log line or row. */
  async function assertNoSecrets(who: SignedUp, deploymentId: string, reads: unknown[]) {
    reads.push(
      (await ctx.api.get('/api/v1/rentals').set(who.auth)).body,
      (await ctx.api.get(`/api/v1/deployments/${deploymentId}`).set(who.auth)).body,
    );
    await assertSecretsNowhere(ctx, [SECRET, SCRIPT_MARK], { reads, logs });
  }

  it('RunPod: the image, variables, startup script and a port behind its proxy; the port served in the machine', async () => {
    const o = await offer('runpod');
    assert.deepEqual(
      [o.capabilities.customImage, o.capabilities.startupScript, o.capabilities.ports >= 1],
      [true, true, true],
    );
    const who = await agent.fundedAgent();
    const { deploymentId, active, reads, ssh } = await rentActive(who, o.id, machine(8000, { image: IMAGE }));
    const pod = runpod.instances().find((p) => p.name.includes(deploymentId));
    assert.ok(pod, "the pod is RunPod's");
    assert.equal(pod.image, IMAGE);
    assert.deepEqual(active.endpoints, [{ port: 8000, url: `https://${pod.id}-8000.proxy.runpod.net` }]);

    await assertSettingsApplied(ssh, true);
    // The proxy's address cannot be reached from here; the port is served inside the machine.
    const served = await answer(async () => {
      const r = await sshExec(ssh, 'curl -fsS http://127.0.0.1:8000/');
      return r.code === 0 ? r.stdout : undefined;
    });
    assert.equal(served, `hello ${SECRET.length}`);
    await assertNoSecrets(who, deploymentId, reads);
    await agent.terminate(who, deploymentId);
  });

  it("Vast.ai: the image, variables, startup script and a port that answers at the instance's public address", async () => {
    const o = await offer('vast');
    assert.deepEqual(
      [o.capabilities.customImage, o.capabilities.startupScript, o.capabilities.ports >= 1],
      [true, true, true],
    );
    const who = await agent.fundedAgent();
    const { deploymentId, active, reads, ssh } = await rentActive(who, o.id, machine(8001, { image: IMAGE }));
    const inst = vast.instances().find((i) => i.label?.includes(deploymentId));
    assert.ok(inst, "the instance is Vast's");
    assert.equal(vast.createBodyOf(inst.id)?.image, IMAGE);

    // Vast's SSH commands read the variables from /etc/environment, which the fake's home-rooted
    // machine does not have; a login shell reads them from the user's profile.
    await assertSettingsApplied(ssh, false);
    const endpoints = active.endpoints as Endpoint[];
    assert.equal(endpoints.length, 1);
    assert.equal(endpoints[0].port, 8001);
    assert.match(endpoints[0].url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const served = await answer(async () => {
      const r = await fetch(endpoints[0].url);
      return r.status === 200 ? r.text() : undefined;
    });
    assert.equal(served, `hello ${SECRET.length}`);
    await assertNoSecrets(who, deploymentId, reads);
    await agent.terminate(who, deploymentId);
  });

  it('Lambda: variables and a startup script make a usable machine', async () => {
    const o = await offer('lambda');
    assert.deepEqual(o.capabilities, { customImage: false, startupScript: true, ports: 0, maxDiskGb: null });
    const who = await agent.fundedAgent();
    const { deploymentId, active, reads, ssh } = await rentActive(who, o.id, machine(null));
    assert.equal(ssh.user, 'ubuntu');
    assert.ok(!active.endpoints || (active.endpoints as Endpoint[]).length === 0, JSON.stringify(active.endpoints));
    await assertSettingsApplied(ssh, true);
    await assertNoSecrets(who, deploymentId, reads);
    await agent.terminate(who, deploymentId);
  });

  it('Lambda: an image, ports or a disk are refused, naming the setting, before anything is launched', async () => {
    const o = await offer('lambda');
    const who = await agent.fundedAgent();
    const launches = lambda.launches.length;
    for (const [settings, setting] of [
      [{ image: IMAGE }, 'machine.image'],
      [{ ports: [8000] }, 'machine.ports'],
      [{ diskGb: 100 }, 'machine.diskGb'],
      [machine(8000), 'machine.ports'],
    ] as const) {
      const res = await rentRaw(who, { offerId: o.id, machine: settings });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.ok(res.body.error.message.includes(setting), res.body.error.message);
      assert.ok(
        !JSON.stringify(res.body).includes(SECRET) && !JSON.stringify(res.body).includes(SCRIPT_MARK),
        'the refusal quotes no secret',
      );
    }
    assert.equal(lambda.launches.length, launches, 'nothing launched');
  });
});
