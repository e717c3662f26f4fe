import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { CHECKS_PER_ACCOUNT } from '../../src/modules/rentals/lifecycle/check-slots.js';
import { SWEEP_WAIT_MS } from '../../src/modules/rentals/lifecycle/idle.js';
import { fingerprintOfKey } from '../../src/providers/ssh-probe.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { HostileSshServer } from '../helpers/hostile-ssh.js';
import { account, discardQueuedRentalJobs, makeActive, offerIds, rentOk, setStatus } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'fair-h100',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 100,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

/**
 * The idle sweep against machines that never answer (finding 4): one account's hanging machines
 * hold only their own share of the sweep, and another account's idle rental is warned on time.
 */
describe("idle sweep: one account's hanging machines", function () {
  this.timeout(120_000);
  let ctx: TestContext;
  let hanging: HostileSshServer;
  let idle: HostileSshServer;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    hanging = await HostileSshServer.start('hang');
    // An honest machine whose two GPUs do nothing.
    idle = await HostileSshServer.start('answer', { stdout: '0\n0\n' });
  });
  /** Every rental this file made, ended when it is done: the next file in this worker's database sweeps only its own. */
  const made: string[] = [];
  after(async () => {
    for (const id of made) await setStatus(ctx, id, 'TERMINATED', { endedAt: ctx.clock.now() });
    await Promise.all([hanging.close(), idle.close()]);
    await ctx.close();
  });

  /** `n` ACTIVE rentals of one new account whose key ends idle machines after a minute, all at `server`. */
  async function rentals(n: number, server: HostileSshServer): Promise<string[]> {
    const who = await account(ctx, { creditsMinor: 1_000_000 });
    await ctx.services.ds.getRepository(ApiKey).update({ id: who.keyId }, { idleTerminateMinutes: 1 });
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const { deploymentId } = await rentOk(ctx, who, { offerId: (await offerIds(ctx))['fair-h100'] });
      await makeActive(ctx, deploymentId, { host: '127.0.0.1', port: server.port, user: 'root' });
      ids.push(deploymentId);
      made.push(deploymentId);
    }
    await discardQueuedRentalJobs(ctx);
    return ids;
  }

  const warnings = async (id: string) =>
    Number(
      (
        await ctx.services.ds.query(
          `SELECT COUNT(*) AS n FROM events WHERE rental_id = (SELECT order_id FROM deployments WHERE id = ?) AND type = 'rental.idle_warning'`,
          [id],
        )
      )[0].n,
    );

  it("warns another account's idle rental in its normal time while eight machines of one account never answer", async () => {
    const a = await rentals(8, hanging);
    const [b] = await rentals(1, idle);
    const sweep = async (advanceMs: number) => {
      ctx.clock.advance(advanceMs);
      return ctx.services.lifecycle.watchIdle();
    };

    // The first sweep starts B's sample and A's share; it waits for A's hanging ones only up to its own wait.
    const t0 = Date.now();
    const first = await sweep(0);
    assert.ok(first.includes(b), 'B sampled in the first sweep');
    assert.equal(
      first.filter((id) => a.includes(id)).length,
      CHECKS_PER_ACCOUNT,
      'A holds only its share of the samples',
    );
    assert.ok(Date.now() - t0 < SWEEP_WAIT_MS + 10_000, 'the sweep returned without waiting out the hanging samples');
    assert.equal(hanging.running, CHECKS_PER_ACCOUNT);

    // Samples 15 s apart: B is warned once its idle samples span a whole minute, as if A were not there.
    for (let i = 0; i < 3; i++) {
      const later = await sweep(15_000);
      assert.deepEqual(later, [b], "A's samples in flight are skipped, and A may not start more");
      assert.equal(await warnings(b), 0, 'no warning before a whole window');
    }
    await sweep(15_000);
    assert.equal(await warnings(b), 1, 'B warned after its window, in its normal time');
    assert.equal(hanging.execs, CHECKS_PER_ACCOUNT, 'no sample of A was started twice or awaited again');
    for (const id of a) assert.equal(await warnings(id), 0, 'a machine that does not answer is never called idle');
  });

  it('refuses a sample from a server showing another host key than the pinned one', async () => {
    // Another machine, idle too, has taken the address.
    const impostor = await HostileSshServer.start('answer', { stdout: '0\n0\n' });
    try {
      const [c] = await rentals(1, impostor);
      const pinned = fingerprintOfKey(generateDeploymentKeyPair('the-real-machine').publicKey);
      await ctx.services.ds.getRepository(Deployment).update({ id: c }, { sshHostKey: pinned });
      for (let i = 0; i < 6; i++) {
        ctx.clock.advance(15_000);
        await ctx.services.lifecycle.watchIdle();
      }
      assert.ok(impostor.connections >= 5, 'the rental was sampled at its pace');
      assert.equal(impostor.execs, 0, 'no command was sent to the other machine');
      assert.equal(await warnings(c), 0, 'what another machine would say never counts as idle');
      assert.equal(
        (await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: c })).sshHostKey,
        pinned,
        'the pin stays',
      );
    } finally {
      await impostor.close();
    }
  });

  it('pins the host key of a rental that had none at its first sample', async () => {
    const [d] = await rentals(1, idle);
    ctx.clock.advance(15_000);
    await ctx.services.lifecycle.watchIdle();
    assert.equal(
      (await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: d })).sshHostKey,
      idle.hostKeyFingerprint,
    );
  });
});
