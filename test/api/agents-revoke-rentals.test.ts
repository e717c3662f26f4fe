import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { credit, makeActive, offerIds, queuedJobs, rent, setStatus } from '../helpers/rentals.js';

const LIMITS = { maxPerRentalMinor: 700, budgetLimitMinor: 3000, maxConcurrentDeployments: 3 };
const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'ok-l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 50,
    maximumDurationSeconds: 86400,
  },
];

/** A key and how to send it: the same shape signup hands out. */
type Holder = SignedUp;

/** Revoking a key from the owner's side: what the answer says about the machines the key started. */
describe('revoking a key that has rentals running', () => {
  let ctx: TestContext;
  let offer: string;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    offer = (await offerIds(ctx))['ok-l4'];
  });
  after(() => ctx.close());

  const holder = (accountId: string, keyId: string, token: string): Holder => ({
    accountId,
    keyId,
    token,
    auth: { Authorization: `Bearer ${token}` },
  });
  async function ownerAccount(): Promise<Holder> {
    const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
    await credit(ctx, account.id, 100_000);
    return anotherOwnerKey(account.id);
  }
  async function anotherOwnerKey(accountId: string): Promise<Holder> {
    const { key, token } = await ctx.services.accounts.issueOwnerKey(accountId);
    return holder(accountId, key.id, token);
  }
  async function issue(by: Holder): Promise<Holder> {
    const res = await ctx.api
      .post('/api/v1/agent-keys')
      .set(by.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ name: 'worker', scopes: ['read', 'rent', 'manage'], ...LIMITS });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return holder(by.accountId, res.body.data.key.id, res.body.data.token);
  }
  async function rentAs(who: Holder): Promise<{ rentalId: string; deploymentId: string }> {
    const res = await rent(ctx, who, { offerId: offer });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data;
  }
  const deployment = (id: string) => ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id });
  const byDeployment = <T extends { deploymentId: string }>(rows: T[]) =>
    [...rows].sort((a, b) => a.deploymentId.localeCompare(b.deploymentId));

  it('lists the agent key’s unfinished rentals and says they keep running; ?terminateRentals=true ends them through the normal path', async () => {
    const owner = await ownerAccount();
    const agent = await issue(owner);
    const running = await rentAs(agent);
    await makeActive(ctx, running.deploymentId);
    const starting = await rentAs(agent);
    const finished = await rentAs(agent);
    await setStatus(ctx, finished.deploymentId, 'TERMINATED', { endedAt: ctx.clock.now() });

    const revoked = await ctx.api.delete(`/api/v1/agent-keys/${agent.keyId}`).set(owner.auth);
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    assert.equal((await ctx.api.get('/api/v1/me').set(agent.auth)).status, 401, 'the key stops at once');
    assert.deepEqual(
      byDeployment(revoked.body.data.liveRentals),
      byDeployment([
        { rentalId: running.rentalId, deploymentId: running.deploymentId, keyId: agent.keyId, status: 'ACTIVE' },
        { rentalId: starting.rentalId, deploymentId: starting.deploymentId, keyId: agent.keyId, status: 'PENDING' },
      ]),
      'the finished rental is not listed',
    );
    assert.equal(revoked.body.data.rentalsTerminated, false);
    assert.match(
      revoked.body.data.rentalsNote,
      /^2 rentals of the key keep running and are charged until terminated: .*POST \/api\/v1\/deployments\/\{deploymentId\}\/terminate.*\?terminateRentals=true/,
    );
    // Nothing was terminated by the plain revocation.
    assert.equal((await deployment(running.deploymentId)).status, 'ACTIVE');
    assert.equal((await deployment(starting.deploymentId)).terminateRequestedAt, null);

    // A repeat with the option terminates them as a terminate call would: TERMINATING, reason USER, the job queued.
    const ended = await ctx.api.delete(`/api/v1/agent-keys/${agent.keyId}?terminateRentals=true`).set(owner.auth);
    assert.equal(ended.status, 200, JSON.stringify(ended.body));
    assert.equal(ended.body.data.revokedAt, revoked.body.data.revokedAt);
    assert.deepEqual(
      ended.body.data.liveRentals.map((r: { deploymentId: string; status: string }) => r.status),
      ['TERMINATING', 'TERMINATING'],
    );
    assert.equal(ended.body.data.rentalsTerminated, true);
    assert.match(ended.body.data.rentalsNote, /^2 rentals of the key terminated with it/);
    for (const r of [running, starting]) {
      const d = await deployment(r.deploymentId);
      assert.deepEqual([d.status, d.terminationReason], ['TERMINATING', 'REQUESTED']);
      assert.deepEqual(
        (await queuedJobs(ctx, r.deploymentId)).filter((j) => j.name === 'rental.terminate'),
        [{ name: 'rental.terminate', deploymentId: r.deploymentId }],
      );
      const view = await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(owner.auth);
      assert.equal(view.body.data.terminationReason, 'USER');
    }
    assert.equal((await deployment(finished.deploymentId)).status, 'TERMINATED');
  });

  it('terminates with the key at once when asked on the first call; a key without rentals says so', async () => {
    const owner = await ownerAccount();
    const agent = await issue(owner);
    const r = await rentAs(agent);
    const res = await ctx.api
      .delete(`/api/v1/agent-keys/${agent.keyId}`)
      .query({ terminateRentals: true })
      .set(owner.auth);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.data.liveRentals, [
      { rentalId: r.rentalId, deploymentId: r.deploymentId, keyId: agent.keyId, status: 'TERMINATING' },
    ]);
    assert.match(res.body.data.rentalsNote, /^1 rental of the key terminated with it/);

    const idle = await issue(owner);
    const quiet = await ctx.api.delete(`/api/v1/agent-keys/${idle.keyId}?terminateRentals=true`).set(owner.auth);
    assert.equal(quiet.status, 200);
    assert.deepEqual(
      [quiet.body.data.liveRentals, quiet.body.data.rentalsTerminated, quiet.body.data.rentalsNote],
      [[], false, 'The key had no unfinished rentals.'],
    );

    const bad = await ctx.api.delete(`/api/v1/agent-keys/${idle.keyId}?terminateRentals=maybe`).set(owner.auth);
    assert.equal(bad.status, 422, JSON.stringify(bad.body));
    assert.equal(bad.body.error.code, 'VALIDATION_FAILED');
    assert.match(bad.body.error.message, /terminateRentals/);
  });

  it('lists the rentals of an owner key and of every key it let in when it is revoked, and ends them on request', async () => {
    const leaked = await ownerAccount();
    const kept = await anotherOwnerKey(leaked.accountId);
    const agent = await issue(leaked);
    const bystander = await issue(kept);
    const own = await rentAs(leaked);
    const agents = await rentAs(agent);
    const unrelated = await rentAs(bystander);

    const res = await ctx.api.delete(`/api/v1/owner-keys/${leaked.keyId}`).set(kept.auth);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.data.revokedAgentKeyIds, [agent.keyId]);
    assert.deepEqual(
      byDeployment(res.body.data.liveRentals),
      byDeployment([
        { rentalId: own.rentalId, deploymentId: own.deploymentId, keyId: leaked.keyId, status: 'PENDING' },
        { rentalId: agents.rentalId, deploymentId: agents.deploymentId, keyId: agent.keyId, status: 'PENDING' },
      ]),
    );
    assert.match(res.body.data.rentalsNote, /keep running and are charged/);

    // The repeat revokes nothing new, still lists the agent key's rental, and terminates on request.
    const again = await ctx.api.delete(`/api/v1/owner-keys/${leaked.keyId}?terminateRentals=true`).set(kept.auth);
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.deepEqual(again.body.data.revokedAgentKeyIds, []);
    assert.deepEqual(
      again.body.data.liveRentals.map((r: { status: string }) => r.status),
      ['TERMINATING', 'TERMINATING'],
    );
    for (const r of [own, agents]) assert.equal((await deployment(r.deploymentId)).status, 'TERMINATING');
    assert.equal(
      (await deployment(unrelated.deploymentId)).status,
      'PENDING',
      'a key it did not let in keeps its rentals',
    );
  });
});
