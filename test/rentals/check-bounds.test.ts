import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { lifecycleDepsOf } from '../../src/container.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { CapacityWait } from '../../src/modules/rentals/lifecycle/capacity-wait.js';
import { CheckSlots } from '../../src/modules/rentals/lifecycle/check-slots.js';
import { Expiring } from '../../src/modules/rentals/lifecycle/expiring.js';
import { MachineChecker } from '../../src/modules/rentals/lifecycle/machine-check.js';
import { DEFAULT_TIMING, type LifecycleTiming } from '../../src/modules/rentals/lifecycle/lifecycle-deps.js';
import { Provisioning } from '../../src/modules/rentals/lifecycle/provisioning.js';
import { Reversal } from '../../src/modules/rentals/lifecycle/reversal.js';
import { createProviderRegistry } from '../../src/providers/provider-registry.js';
import { fingerprintOfKey, sshExec } from '../../src/providers/ssh-probe.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { HostileCloud, HostileSshServer } from '../helpers/hostile-ssh.js';
import { startTestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { account, offerIds, queuedJobs, rentOk, setStatus } from '../helpers/rentals.js';
import type { SignedUp } from '../helpers/factories.js';

const LOCAL: LocalInventoryOffer[] = [
  {
    key: 'honest-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 100,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];
const HOSTILE = ['hang-h100', 'flood-h100', 'impostor-h100', 'answer-h100', 'later-h100'];
const USABLE = 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n__gpr_smi_exit=0\n__gpr_started=0\n';

/**
 * Provisioning against machines that hold or flood the ACTIVE check (findings 1, 2, 18): a check
 * ends within its bounds, the provisioning bound holds, one account cannot fill a worker's
 * checks, and host keys are pinned.
 */
describe("provisioning: checks a renter's machine cannot hold", function () {
  this.timeout(120_000);
  let ctx: TestContext;
  let cloud: HostileCloud;
  const servers: Record<string, HostileSshServer> = {};
  const logs: string[] = [];
  const mine: string[] = [];

  before(async () => {
    servers.hang = await HostileSshServer.start('hang');
    servers.flood = await HostileSshServer.start('flood');
    servers.impostor = await HostileSshServer.start('answer', { stdout: USABLE });
    servers.answer = await HostileSshServer.start('answer', { stdout: USABLE });
    cloud = new HostileCloud(
      {
        'hang-h100': { server: servers.hang },
        'flood-h100': { server: servers.flood },
        // The cloud says which key its machine has; whoever answers at the address shows another.
        'impostor-h100': {
          server: servers.impostor,
          reportedHostKey: fingerprintOfKey(generateDeploymentKeyPair('the-real-one').publicKey),
        },
        'answer-h100': { server: servers.answer },
      },
      HOSTILE,
    );
    ctx = await createTestContext({
      offers: LOCAL,
      env: { RENTAL_POLL_MS: '50' },
      logTo: (line) => void logs.push(line),
      async registry(configs, deps) {
        const registry = await createProviderRegistry(configs, deps);
        registry.register({ id: 'hostile', description: 'machines that misbehave', markupPercent: 0, provider: cloud });
        return registry;
      },
    });
  });
  after(async () => {
    await Promise.all(Object.values(servers).map((s) => s.close()));
    // Nothing of this file's is left for another file's worker, which has no hostile cloud.
    if (mine.length) await ctx.services.ds.query(`DELETE FROM agenda_jobs WHERE unique_key IN (?)`, [mine]);
    for (const id of mine) {
      const d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
      if (d.status === 'ACTIVE' || d.status === 'PROVISIONING' || d.status === 'PENDING') {
        if (d.providerId === 'local' && d.instanceId) await ctx.services.providers.get('local').destroy(d.instanceId);
        await setStatus(ctx, id, 'FAILED');
      }
    }
    await ctx.close();
  });

  /** Rents `offerKey` for `who` (offers read again first: another file's refresh may have retired the hostile cloud's). */
  async function rent(who: SignedUp, offerKey: string): Promise<string> {
    await ctx.services.inventory.refresh();
    ctx.services.inventory.invalidate();
    const { deploymentId } = await rentOk(ctx, who, { offerId: (await offerIds(ctx))[offerKey] });
    mine.push(deploymentId);
    return deploymentId;
  }
  const dep = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const order = async (id: string) =>
    ctx.services.ds.getRepository(Order).findOneByOrFail({ id: (await dep(id)).orderId });

  /** A provisioning of its own, driven by hand (no worker), with short check bounds. */
  function provisioning(timing: Partial<LifecycleTiming> = {}, slots = new CheckSlots(), commandTimeoutMs = 500) {
    const deps = lifecycleDepsOf(ctx.services);
    const t = { ...DEFAULT_TIMING, pollMs: 50, ...timing };
    const reversal = new Reversal(deps);
    return new Provisioning(
      deps,
      t,
      reversal,
      new CapacityWait(deps, t, reversal),
      new Expiring(deps),
      new MachineChecker(deps, t.sshTimeoutMs, slots, { commandTimeoutMs }),
    );
  }

  it("brings another account's rental to ACTIVE in its normal time while eight machines of one account hang their checks", async () => {
    const a = await account(ctx, { creditsMinor: 1_000_000 });
    const b = await account(ctx, { creditsMinor: 1_000_000 });
    const worker = await startTestWorker(ctx, { processEveryMs: 50 });
    try {
      for (let i = 0; i < 8; i++) await rent(a, 'hang-h100');
      await waitFor(async () => servers.hang.running >= 2, { timeoutMs: 30_000, what: "A's checks to hang" });
      let most = 0;
      const honest = await rent(b, 'honest-h100');
      await waitFor(
        async () => {
          most = Math.max(most, servers.hang.running);
          ctx.clock.advance(200);
          return (await dep(honest)).status === 'ACTIVE';
        },
        { timeoutMs: 30_000, what: "B's rental ACTIVE" },
      );
      assert.equal(most, 2, "A's machines held two of the worker's checks, never more");
      const hung = await Promise.all((await Promise.all(mine.slice(0, 8).map(dep))).map((d) => d.status));
      assert.deepEqual([...new Set(hung)], ['PROVISIONING'], "A's rentals are not ACTIVE");
    } finally {
      // The hanging machines go away (again for any check begun meanwhile) until the worker has drained.
      const dropping = setInterval(() => servers.hang.dropConnections(), 50);
      try {
        await worker.stop();
      } finally {
        clearInterval(dropping);
      }
      servers.hang.dropConnections();
    }
  });

  it('gives each account only its share of checks at once: the rest look again later instead of waiting', async () => {
    const a = await account(ctx, { creditsMinor: 1_000_000 });
    const ids = [await rent(a, 'hang-h100'), await rent(a, 'hang-h100'), await rent(a, 'hang-h100')];
    // Checks that hold until the machine goes away.
    const p = provisioning({}, new CheckSlots({ perAccount: 2 }), 60_000);
    const execs = servers.hang.execs;
    const running = servers.hang.running;
    const runs = ids.map((id) => p.provision(id));
    // One run ends without a check, while the other two hold theirs.
    await Promise.race(runs);
    await waitFor(async () => servers.hang.running - running === 2, {
      timeoutMs: 30_000,
      what: 'two checks of the account to hang',
    });
    assert.equal(servers.hang.execs - execs, 2);
    servers.hang.dropConnections();
    await Promise.all(runs);
    assert.equal(servers.hang.execs - execs, 2, 'the third check never started');
    for (const id of ids)
      assert.deepEqual(
        (await queuedJobs(ctx, id)).map((j) => j.name),
        ['rental.provision'],
        'each looks again',
      );
    for (const id of ids) assert.equal((await dep(id)).status, 'PROVISIONING');
  });

  it('judges the provisioning bound with the time after a check, and starts no check past it', async () => {
    const who = await account(ctx, { creditsMinor: 1_000_000 });
    const p = provisioning({ activeBoundMs: 60_000 });
    const held = await rent(who, 'hang-h100');
    // While the check hangs the bound passes; the check is cut at its own bound and the rental fails at once.
    const started = servers.hang.nextExec().then(() => ctx.clock.advance(61_000));
    await p.provision(held);
    await started;
    assert.equal((await dep(held)).status, 'FAILED');
    assert.equal((await order(held)).failureCode, 'PROVISIONING_TIMEOUT');

    // A machine that answers SSH only once the bound has passed is never checked.
    const late = await rent(who, 'later-h100');
    await p.provision(late);
    assert.equal((await dep(late)).status, 'PROVISIONING', 'still booting');
    ctx.clock.advance(61_000);
    cloud.routes['later-h100'] = { server: servers.answer };
    const connections = servers.answer.connections;
    await p.provision(late);
    assert.equal(servers.answer.connections, connections, 'no check started past the bound');
    assert.equal((await dep(late)).status, 'FAILED');
    assert.equal((await order(late)).failureCode, 'PROVISIONING_TIMEOUT');
  });

  it('survives a machine that floods its check, and does not take it for usable', async () => {
    const who = await account(ctx, { creditsMinor: 1_000_000 });
    const id = await rent(who, 'flood-h100');
    const p = provisioning();
    await p.provision(id);
    await p.provision(id);
    const d = await dep(id);
    assert.equal(d.status, 'PROVISIONING');
    assert.equal(d.phase, 'checking_gpus');
    assert.ok(servers.flood.bytesSent < 16 * 1024 * 1024, `the machine got ${servers.flood.bytesSent} bytes out`);
  });

  describe('host keys', () => {
    it("pins the host key the local provider reports before the first login, and the rental's machine shows it", async () => {
      const who = await account(ctx, { creditsMinor: 1_000_000 });
      const id = await rent(who, 'honest-h100');
      const p = provisioning();
      await waitFor(
        async () => {
          ctx.clock.advance(200);
          await p.provision(id);
          return (await dep(id)).status === 'ACTIVE';
        },
        { timeoutMs: 30_000, what: 'ACTIVE' },
      );
      const d = await dep(id);
      const info = await ctx.services.providers.get('local').get(d.instanceId!);
      assert.ok(info.sshHostKey, "the local provider reports its machine's host key");
      assert.equal(d.sshHostKey, info.sshHostKey);
      const c = (await ctx.api.post(`/api/v1/deployments/${id}/credentials/reveal`).set(who.auth)).body.data;
      const shown = await sshExec({ host: c.host, port: c.port, user: c.user, privateKey: c.privateKey }, 'true');
      assert.equal(shown.hostKey, d.sshHostKey, 'what the machine shows is what was pinned');
    });

    it('pins the key of the first login that gets in when the cloud reports none', async () => {
      const who = await account(ctx, { creditsMinor: 1_000_000 });
      const id = await rent(who, 'answer-h100');
      await provisioning().provision(id);
      const d = await dep(id);
      assert.equal(d.status, 'ACTIVE');
      assert.equal(d.sshHostKey, servers.answer.hostKeyFingerprint);
    });

    it('never takes a machine showing another key than the cloud reported for usable, and says so once', async () => {
      const who = await account(ctx, { creditsMinor: 1_000_000 });
      const id = await rent(who, 'impostor-h100');
      const p = provisioning();
      for (let i = 0; i < 3; i++) await p.provision(id);
      const d = await dep(id);
      assert.equal(d.status, 'PROVISIONING');
      assert.equal(d.phase, 'waiting_for_ssh');
      assert.equal(d.sshHostKey, cloud.routes['impostor-h100']!.reportedHostKey, 'the reported key stays pinned');
      assert.equal(servers.impostor.execs, 0, 'no command reached the other machine');
      const lines = logs.filter((l) => l.includes(id) && l.includes('another host key'));
      assert.equal(lines.length, 1, 'logged once');
      assert.ok(
        lines[0].includes(servers.impostor.hostKeyFingerprint) && lines[0].includes(d.sshHostKey!),
        'with both fingerprints',
      );
    });
  });
});
