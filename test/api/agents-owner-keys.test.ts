import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { runOwnerCommand } from '../../src/cli/owner-command.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { credit, offerIds, rent } from '../helpers/rentals.js';

const LIMITS = { maxPerRentalMinor: 700, budgetLimitMinor: 3000, maxConcurrentDeployments: 2 };
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

const holder = (accountId: string, keyId: string, token: string): Holder => ({
  accountId,
  keyId,
  token,
  auth: { Authorization: `Bearer ${token}` },
});

describe('revoking an owner key', () => {
  let ctx: TestContext;
  let offer: string;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
    offer = (await offerIds(ctx))['ok-l4'];
  });
  after(() => ctx.close());

  async function ownerAccount(): Promise<Holder> {
    const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
    await credit(ctx, account.id, 100_000);
    return anotherOwnerKey(account.id);
  }
  async function anotherOwnerKey(accountId: string): Promise<Holder> {
    const { key, token } = await ctx.services.accounts.issueOwnerKey(accountId);
    return holder(accountId, key.id, token);
  }
  async function issue(by: Holder, name = 'issued'): Promise<Holder> {
    const res = await ctx.api
      .post('/api/v1/agent-keys')
      .set(by.auth)
      .set('Idempotency-Key', randomUUID())
      .send({ name, scopes: ['read', 'rent'], ...LIMITS });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return holder(by.accountId, res.body.data.key.id, res.body.data.token);
  }
  /** An authorization session approved by `by`; exchanged when `exchanged`. */
  async function approved(
    by: Holder,
    exchanged: boolean,
  ): Promise<{ setupCode: string; authorizationId: string; agent: Holder | null }> {
    const begun = await ctx.api.post('/api/v1/agent-authorizations').send({ name: 'session agent' });
    const { setupCode, approvalUrl, authorizationId } = begun.body.data;
    const ok = await ctx.api
      .post('/api/v1/agent-authorizations/approve')
      .set(by.auth)
      .send({ approvalCode: approvalUrl.split('/').pop(), ...LIMITS });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    if (!exchanged) return { setupCode, authorizationId, agent: null };
    const res = await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { setupCode, authorizationId, agent: holder(by.accountId, res.body.data.key.id, res.body.data.token) };
  }
  const me = (who: Holder) => ctx.api.get('/api/v1/me').set(who.auth);
  const revoke = (by: Holder, keyId: string) => ctx.api.delete(`/api/v1/owner-keys/${keyId}`).set(by.auth);

  it('revokes the key, the agent keys it issued, the keys of sessions it approved and its unexchanged sessions, in every process at once', async () => {
    const leaked = await ownerAccount();
    const kept = await anotherOwnerKey(leaked.accountId);
    const direct = await issue(leaked);
    const viaSession = await approved(leaked, true);
    const pending = await approved(leaked, false);
    const unrelated = await issue(kept);
    // Each agent rents once, so this process holds its key for admission (read in the last minute).
    for (const agent of [direct, viaSession.agent!])
      assert.equal((await rent(ctx, agent, { offerId: offer })).status, 201);

    // The revocation runs in another process of the service: its own memory, the same database.
    const other = await createTestContext({ offers: OFFERS });
    let res;
    try {
      res = await other.api.delete(`/api/v1/owner-keys/${leaked.keyId}`).set(kept.auth);
    } finally {
      await other.close();
    }
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.id, leaked.keyId);
    assert.ok(res.body.data.revokedAt);
    assert.deepEqual([...res.body.data.revokedAgentKeyIds].sort(), [direct.keyId, viaSession.agent!.keyId].sort());
    assert.deepEqual(res.body.data.revokedAuthorizationIds, [pending.authorizationId]);

    for (const gone of [leaked, direct, viaSession.agent!]) {
      const r = await me(gone);
      assert.equal(r.status, 401, JSON.stringify(r.body));
      assert.equal(r.body.error.code, 'UNAUTHENTICATED');
    }
    for (const agent of [direct, viaSession.agent!]) {
      const r = await rent(ctx, agent, { offerId: offer });
      assert.equal(r.status, 401, 'admission re-reads the revocation the other process wrote');
    }
    const exchange = await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: pending.setupCode });
    assert.equal(exchange.status, 409, JSON.stringify(exchange.body));
    assert.equal(exchange.body.error.code, 'AGENT_SETUP_INVALID');
    // Keys it did not let in are untouched.
    for (const alive of [kept, unrelated]) assert.equal((await me(alive)).status, 200);
    // Running rentals keep running.
    const rentals = await ctx.services.ds.getRepository(Deployment).findBy({ keyId: direct.keyId });
    assert.ok(rentals.length === 1 && rentals[0].status === 'PENDING' && rentals[0].terminateRequestedAt === null);

    // Repeatable; the revocation time stays the first one.
    const again = await revoke(kept, leaked.keyId);
    assert.equal(again.status, 200);
    assert.equal(again.body.data.revokedAt, res.body.data.revokedAt);
    assert.deepEqual(again.body.data.revokedAgentKeyIds, []);
  });

  it('lists the account’s owner keys; needs an owner key of the same account with manage to revoke', async () => {
    const o = await ownerAccount();
    const second = await anotherOwnerKey(o.accountId);
    const agent = await issue(o);
    const stranger = await ownerAccount();
    const { key: narrowKey, token } = await ctx.services.store.transaction((r) =>
      ctx.services.keys.create(r.accounts, {
        accountId: o.accountId,
        kind: 'OWNER',
        name: 'read only',
        scopes: ['read'],
        origin: 'test',
        ...LIMITS,
      }),
    );
    const readOnly = holder(o.accountId, narrowKey.id, token);

    const listed = await ctx.api.get('/api/v1/owner-keys').set(o.auth);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.data.map((k: { id: string }) => k.id).sort(),
      [o.keyId, second.keyId, readOnly.keyId].sort(),
    );
    assert.ok(
      listed.body.data.every((k: { kind: string; token?: string }) => k.kind === 'OWNER' && k.token === undefined),
    );
    assert.equal((await ctx.api.get('/api/v1/owner-keys').set(agent.auth)).status, 403);

    const byAgent = await revoke(agent, second.keyId);
    assert.equal(byAgent.status, 403);
    const noManage = await revoke(readOnly, second.keyId);
    assert.equal(noManage.status, 403);
    assert.equal(noManage.body.error.code, 'FORBIDDEN');
    for (const id of [stranger.keyId, agent.keyId, randomUUID(), 'not-a-key']) {
      const r = await revoke(o, id);
      assert.equal(r.status, 404, `${id}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, 'NOT_FOUND');
    }
    for (const alive of [second, stranger, agent]) assert.equal((await me(alive)).status, 200);

    // A key may revoke itself (it leaked); its next call is the uniform 401.
    assert.equal((await revoke(second, second.keyId)).status, 200);
    assert.equal((await me(second)).status, 401);
    const after = await ctx.api.get('/api/v1/owner-keys').set(o.auth);
    assert.ok(after.body.data.find((k: { id: string; revokedAt: string | null }) => k.id === second.keyId).revokedAt);
  });

  it('leaves nothing it issued or approved alive when issuing, approving and exchanging race the revocation', async function () {
    this.timeout(60_000);
    const o = await ownerAccount();
    const sessions = await Promise.all(Array.from({ length: 6 }, () => approved(o, false)));
    const fresh = await Promise.all(
      Array.from(
        { length: 6 },
        async () =>
          (await ctx.api.post('/api/v1/agent-authorizations').send({})).body.data as {
            setupCode: string;
            approvalUrl: string;
          },
      ),
    );
    const racing = [
      ...Array.from({ length: 8 }, () =>
        ctx.api
          .post('/api/v1/agent-keys')
          .set(o.auth)
          .set('Idempotency-Key', randomUUID())
          .send({ name: 'racer', scopes: ['read'], ...LIMITS }),
      ),
      ...sessions.map((s) => ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: s.setupCode })),
      ...fresh.map((s) =>
        ctx.api
          .post('/api/v1/agent-authorizations/approve')
          .set(o.auth)
          .send({ approvalCode: s.approvalUrl.split('/').pop(), ...LIMITS }),
      ),
    ];
    const [revoked, ...results] = await Promise.all([
      ctx.services.agentKeys.revokeOwnerKey(o.accountId, o.keyId),
      ...racing,
    ]);
    assert.ok(revoked.revokedAt);
    assert.ok(
      results.every((r) => r.status < 500),
      results.map((r) => r.status).join(),
    );
    const alive: unknown[] = await ctx.services.ds.query(
      `SELECT id FROM api_keys WHERE issued_by_key_id = ? AND revoked_at IS NULL`,
      [o.keyId],
    );
    assert.deepEqual(alive, []);
    const exchangeable: unknown[] = await ctx.services.ds.query(
      `SELECT id FROM agent_authorizations WHERE approved_by_key_id = ? AND status = 'APPROVED'`,
      [o.keyId],
    );
    assert.deepEqual(exchangeable, []);
    // Whatever was exchanged or issued in the race is refused now.
    for (const r of results.filter((x) => x.status === 200 || x.status === 201)) {
      if (r.body.data?.token)
        assert.equal((await ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${r.body.data.token}`)).status, 401);
    }
  });

  it('works from the operator command: owner keys and owner revoke-key', async () => {
    const o = await ownerAccount();
    const agent = await issue(o);
    const run = async (args: string[]) => {
      let out = '';
      let err = '';
      const status = await runOwnerCommand(args, ctx.config, { out: (t) => (out += t), err: (t) => (err += t) });
      return { status, out, err };
    };
    const listed = await run(['keys', '--account', o.accountId, '--json']);
    assert.equal(listed.status, 0, listed.err);
    assert.deepEqual(
      JSON.parse(listed.out).map((k: { id: string }) => k.id),
      [o.keyId],
    );

    const revoked = await run(['revoke-key', '--key', o.keyId]);
    assert.equal(revoked.status, 0, revoked.err);
    assert.match(revoked.out, new RegExp(`OWNER key ${o.keyId} .* revoked at`));
    assert.match(revoked.out, /1 agent key\(s\)/);
    for (const gone of [o, agent]) assert.equal((await me(gone)).status, 401);

    assert.equal((await run(['revoke-key', '--key', agent.keyId])).status, 1, 'an agent key is not an owner key');
    const bad = await run(['revoke-key']);
    assert.equal(bad.status, 2);
    assert.match(bad.err, /--key is required[\s\S]*Usage: owner create --name/);
  });
});
