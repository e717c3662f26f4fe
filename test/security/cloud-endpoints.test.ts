import assert from 'node:assert/strict';
import { createProviderRegistry } from '../../src/providers/provider-registry.js';
import { sshEndpointProblem } from '../../src/providers/ssh-endpoint.js';
import { createRentalLifecycle } from '../../src/modules/rentals/lifecycle/rental-lifecycle.js';
import { lifecycleDepsOf } from '../../src/container.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, offerIds, rentOk } from '../helpers/rentals.js';

const HOSTILE = [
  { host: '127.0.0.1', port: 22, user: '-oProxyCommand=touch /tmp/pwned' },
  { host: '-oProxyCommand=sh', port: 22, user: 'root' },
  { host: 'a b', port: 22, user: 'root' },
  { host: 'evil@host', port: 22, user: 'root' },
  { host: '127.0.0.1', port: 0, user: 'root' },
  { host: '127.0.0.1', port: 70000, user: 'root' },
  { host: '127.0.0.1', port: 22, user: 'root\nHostName x' },
];

describe('SSH endpoints reported by clouds', () => {
  it('accepts what clouds really hand out and refuses what an ssh client could read as an option', () => {
    for (const ok of [
      { host: '203.0.113.9', port: 22, user: 'root' },
      { host: '2001:db8::9', port: 40022, user: 'ubuntu' },
      { host: 'ssh.runpod.io', port: 22, user: 'k6lqo3hvzzwb2l-644114f1' },
      { host: 'ssh5.vast.ai', port: 31744, user: 'root' },
    ]) {
      assert.equal(sshEndpointProblem(ok), undefined, JSON.stringify(ok));
    }
    for (const bad of HOSTILE) assert.ok(sshEndpointProblem(bad), JSON.stringify(bad));
  });

  describe('a cloud that reports a hostile endpoint', function () {
    this.timeout(30_000);
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext({
        registry: async (configs, deps) => {
          const registry = await createProviderRegistry(configs, deps);
          // The local machine answers on its real endpoint; the "cloud" reports another user for it.
          const local = registry.get('local');
          const get = local.get.bind(local);
          local.get = async (id) => {
            const info = await get(id);
            return info.ssh ? { ...info, ssh: { ...info.ssh, user: HOSTILE[0].user } } : info;
          };
          return registry;
        },
      });
    });
    after(() => ctx.close());

    it('never becomes ACTIVE with it, never stores it, and fails at the provisioning bound', async () => {
      const ids = await offerIds(ctx);
      const who = await account(ctx, { creditsMinor: 5000 });
      const r = await rentOk(ctx, who, { offerId: Object.values(ids)[0] });
      const life = createRentalLifecycle(lifecycleDepsOf(ctx.services), { activeBoundMs: 60_000, sshTimeoutMs: 1500 });
      const dep = () => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: r.deploymentId });
      for (let i = 0; i < 4; i++) await life.provision(r.deploymentId);
      assert.equal((await dep()).status, 'PROVISIONING');
      assert.equal((await dep()).sshUser, null);
      ctx.clock.advance(61_000);
      await life.provision(r.deploymentId);
      const d = await dep();
      assert.equal(d.status, 'FAILED');
      assert.notEqual(d.sshUser, HOSTILE[0].user);
      const view = await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(who.auth);
      assert.ok(!JSON.stringify(view.body).includes('ProxyCommand'));
    });
  });
});
