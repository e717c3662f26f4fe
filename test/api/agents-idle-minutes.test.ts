import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createTestContext, type TestContext } from '../helpers/context.js';

const LIMITS = { maxPerRentalMinor: 700, budgetLimitMinor: 3000, maxConcurrentDeployments: 2 };

/** A key's idle minutes (`idleTerminateMinutes`): set by owners where they set an agent key's limits, shown on the key. */
describe("a key's idle minutes through the API", () => {
  let ctx: TestContext;
  let owner: { Authorization: string };
  before(async () => {
    ctx = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
    const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
    owner = { Authorization: `Bearer ${(await ctx.services.accounts.issueOwnerKey(account.id)).token}` };
  });
  after(() => ctx.close());

  const issue = (extra: object) =>
    ctx.api
      .post('/api/v1/agent-keys')
      .set(owner)
      .set('Idempotency-Key', randomUUID())
      .send({ name: 'worker', scopes: ['read', 'rent'], ...LIMITS, ...extra });

  it('is given to an owner-issued key, shown on it, and absent means never', async () => {
    const res = await issue({ idleTerminateMinutes: 30 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.data.key.idleTerminateMinutes, 30);
    const listed = (await ctx.api.get('/api/v1/agent-keys').set(owner)).body.data.find(
      (k: { id: string }) => k.id === res.body.data.key.id,
    );
    assert.equal(listed.idleTerminateMinutes, 30);
    const me = (await ctx.api.get('/api/v1/me').set({ Authorization: `Bearer ${res.body.data.token}` })).body.data;
    assert.equal(JSON.stringify(me).includes('"idleTerminateMinutes":30'), true, 'the agent sees its own setting');
    const plain = await issue({});
    assert.equal(plain.status, 201, JSON.stringify(plain.body));
    assert.equal(plain.body.data.key.idleTerminateMinutes, null);
  });

  it('refuses minutes outside 1 to 1440', async () => {
    for (const v of [0, 1441, 1.5]) {
      const res = await issue({ idleTerminateMinutes: v });
      assert.equal(res.status, 422, `${v}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.error.message, /idleTerminateMinutes/);
    }
  });

  it('travels from an approval to the key the agent exchanges its setup code for', async () => {
    const begun = await ctx.api.post('/api/v1/agent-authorizations');
    assert.equal(begun.status, 200, JSON.stringify(begun.body));
    const approvalCode = begun.body.data.approvalUrl.split('/').pop();
    const approved = await ctx.api
      .post('/api/v1/agent-authorizations/approve')
      .set(owner)
      .send({ approvalCode, ...LIMITS, idleTerminateMinutes: 15 });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assert.equal(approved.body.data.idleTerminateMinutes, 15);
    const exchanged = await ctx.api
      .post('/api/v1/agent-setups/exchange')
      .send({ setupCode: begun.body.data.setupCode });
    assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
    assert.equal(exchanged.body.data.key.idleTerminateMinutes, 15);
  });

  it('travels on a setup code an owner mints', async () => {
    const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 43);
    const { setupCode } = await ctx.services.agents.mintSetupCode(
      { accountId: account.id, keyId: null },
      { ...LIMITS, idleTerminateMinutes: 5 },
    );
    const exchanged = await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode });
    assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
    assert.equal(exchanged.body.data.key.idleTerminateMinutes, 5);
    await assert.rejects(
      ctx.services.agents.mintSetupCode({ accountId: account.id, keyId: null }, { ...LIMITS, idleTerminateMinutes: 0 }),
      /idleTerminateMinutes/,
    );
  });
});
