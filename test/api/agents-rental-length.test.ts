import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { MAX_RENTAL_SECONDS } from '../../src/modules/keys/key-limits.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

const LIMITS = { maxPerRentalMinor: 700, budgetLimitMinor: 3000, maxConcurrentDeployments: 2 };
const EIGHT_HOURS = 8 * 3600;

interface Holder {
  accountId: string;
  keyId: string;
  auth: { Authorization: string };
}

/** A key's longest rental (`maxRentalSeconds`) through the API's ways of making keys. */
describe("a key's longest rental through the API", () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
  });
  after(() => ctx.close());

  /** An owner account with an OWNER key, its longest rental `maxRentalSeconds` when given. */
  async function owner(maxRentalSeconds?: number): Promise<Holder> {
    const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
    const { key, token } =
      maxRentalSeconds === undefined
        ? await ctx.services.accounts.issueOwnerKey(account.id)
        : await ctx.services.store.transaction((r) =>
            ctx.services.keys.create(r.accounts, {
              accountId: account.id,
              kind: 'OWNER',
              name: 'short leases',
              scopes: ['read', 'rent', 'manage'],
              origin: 'test',
              maxPerRentalMinor: 100_000,
              budgetLimitMinor: 100_000,
              maxConcurrentDeployments: 10,
              maxRentalSeconds,
            }),
          );
    return { accountId: account.id, keyId: key.id, auth: { Authorization: `Bearer ${token}` } };
  }

  async function begin(): Promise<{ setupCode: string; approvalCode: string }> {
    const res = await ctx.api.post('/api/v1/agent-authorizations');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { setupCode: res.body.data.setupCode, approvalCode: res.body.data.approvalUrl.split('/').pop() };
  }
  const approve = (by: Holder, approvalCode: string, extra: object) =>
    ctx.api
      .post('/api/v1/agent-authorizations/approve')
      .set(by.auth)
      .send({ approvalCode, ...LIMITS, ...extra });
  const exchange = (setupCode: string) => ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode });
  const issue = (by: Holder, extra: object, idem = randomUUID()) =>
    ctx.api
      .post('/api/v1/agent-keys')
      .set(by.auth)
      .set('Idempotency-Key', idem)
      .send({ name: 'worker', scopes: ['read', 'rent'], ...LIMITS, ...extra });

  function assertRefused(
    res: { status: number; body: { error: { code: string; message: string } } },
    status: number,
    code: string,
  ): void {
    assert.equal(res.status, status, JSON.stringify(res.body));
    assert.equal(res.body.error.code, code);
    assert.match(res.body.error.message, /maxRentalSeconds/);
  }

  it('an approved session carries it onto the key the setup code is exchanged for, shown in /me and the key listing', async () => {
    const o = await owner();
    const s = await begin();
    const approved = await approve(o, s.approvalCode, { maxRentalSeconds: EIGHT_HOURS });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assert.equal(approved.body.data.maxRentalSeconds, EIGHT_HOURS);
    const issued = await exchange(s.setupCode);
    assert.equal(issued.status, 200, JSON.stringify(issued.body));
    assert.equal(issued.body.data.key.maxRentalSeconds, EIGHT_HOURS);
    const me = await ctx.api.get('/api/v1/me').set({ Authorization: `Bearer ${issued.body.data.token}` });
    assert.equal(me.body.data.key.maxRentalSeconds, EIGHT_HOURS);
    const listed = await ctx.api.get('/api/v1/agent-keys').set(o.auth);
    assert.equal(
      listed.body.data.find((k: { id: string }) => k.id === issued.body.data.key.id).maxRentalSeconds,
      EIGHT_HOURS,
    );
  });

  it('leaves keys without one unlimited: absent or null', async () => {
    const o = await owner();
    for (const extra of [{}, { maxRentalSeconds: null }]) {
      const s = await begin();
      const approved = await approve(o, s.approvalCode, extra);
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      assert.equal(approved.body.data.maxRentalSeconds, null);
      assert.equal((await exchange(s.setupCode)).body.data.key.maxRentalSeconds, null);
    }
    const me = await ctx.api.get('/api/v1/me').set(o.auth);
    assert.equal(me.body.data.key.maxRentalSeconds, null);
    const owners = await ctx.api.get('/api/v1/owner-keys').set(o.auth);
    assert.equal(owners.body.data[0].maxRentalSeconds, null);
  });

  it('an owner-issued key carries it; null and absent replay as the same request', async () => {
    const o = await owner();
    const res = await issue(o, { maxRentalSeconds: 3600 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.data.key.maxRentalSeconds, 3600);
    const idem = randomUUID();
    const first = await issue(o, {}, idem);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.body.data.key.maxRentalSeconds, null);
    const replay = await issue(o, { maxRentalSeconds: null }, idem);
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    assert.equal(replay.body.data.key.id, first.body.data.key.id);
    const changed = await issue(o, { maxRentalSeconds: 7200 }, idem);
    assert.equal(changed.status, 409, JSON.stringify(changed.body));
    assert.equal(changed.body.error.code, 'IDEMPOTENCY_CONFLICT');
  });

  it('refuses lengths out of bounds with 422 naming the field, at approval and issue', async () => {
    const o = await owner();
    const s = await begin();
    for (const bad of [MAX_RENTAL_SECONDS.minimum - 1, MAX_RENTAL_SECONDS.maximum + 1, 0, -60, 90.5, 'none', true]) {
      assertRefused(await approve(o, s.approvalCode, { maxRentalSeconds: bad }), 422, 'VALIDATION_FAILED');
      assertRefused(await issue(o, { maxRentalSeconds: bad }), 422, 'VALIDATION_FAILED');
    }
    for (const edge of [MAX_RENTAL_SECONDS.minimum, MAX_RENTAL_SECONDS.maximum]) {
      const res = await issue(o, { maxRentalSeconds: edge });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.data.key.maxRentalSeconds, edge);
    }
    // None of the refused approvals touched the session.
    assert.equal((await exchange(s.setupCode)).body.error.code, 'AGENT_AUTHORIZATION_PENDING');
  });

  it('an owner key with a longest rental hands out none longer, nor keys without one', async () => {
    const o = await owner(EIGHT_HOURS);
    assertRefused(await issue(o, { maxRentalSeconds: EIGHT_HOURS + 60 }), 403, 'KEY_LIMIT_EXCEEDED');
    assertRefused(await issue(o, {}), 403, 'KEY_LIMIT_EXCEEDED');
    const s = await begin();
    assertRefused(await approve(o, s.approvalCode, { maxRentalSeconds: null }), 403, 'KEY_LIMIT_EXCEEDED');
    assert.equal((await issue(o, { maxRentalSeconds: EIGHT_HOURS })).status, 201);
    const ok = await approve(o, s.approvalCode, { maxRentalSeconds: 3600 });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal((await exchange(s.setupCode)).body.data.key.maxRentalSeconds, 3600);
  });

  it('a setup code an owner mints (Telegram) carries it, and refuses one out of bounds naming the field', async () => {
    const o = await owner();
    const ref = { accountId: o.accountId, keyId: null };
    const { setupCode } = await ctx.services.agents.mintSetupCode(ref, { ...LIMITS, maxRentalSeconds: 1800 });
    assert.equal((await exchange(setupCode)).body.data.key.maxRentalSeconds, 1800);
    for (const bad of [59, MAX_RENTAL_SECONDS.maximum + 1, 1.5]) {
      await assert.rejects(
        ctx.services.agents.mintSetupCode(ref, { ...LIMITS, maxRentalSeconds: bad }),
        (err: { status: number; code: string; message: string }) => {
          assert.equal(err.status, 422);
          assert.equal(err.code, 'VALIDATION_FAILED');
          assert.match(err.message, /maxRentalSeconds/);
          return true;
        },
      );
    }
  });
});
