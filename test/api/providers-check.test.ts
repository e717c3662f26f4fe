import assert from 'node:assert/strict';
import { ALL_SCOPES } from '../../src/modules/keys/api-key.entity.js';
import { OWNER_KEY_LIMITS } from '../../src/modules/keys/key-limits.js';
import { PROVIDER_CHECKS_PER_KEY_PER_MINUTE } from '../../src/modules/inventory/provider-checks.service.js';
import { FakeLambdaApi } from '../fakes/lambda-api.js';
import { FakeRunpodApi } from '../fakes/runpod-api.js';
import { FakeVastApi } from '../fakes/vast-api.js';
import { cloudService } from '../helpers/cloud-agent.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';

/** An operator's key: an OWNER key made with admin, as `owner create --admin` makes it. */
async function operatorKey(ctx: TestContext, isAdmin = true): Promise<{ Authorization: string }> {
  const { token } = await ctx.services.accounts.createOwner({
    name: isAdmin ? 'ops' : 'owner without admin',
    scopes: [...ALL_SCOPES],
    isAdmin,
    ...OWNER_KEY_LIMITS,
  });
  return { Authorization: `Bearer ${token}` };
}

describe('GET /api/v1/providers/check', function () {
  this.timeout(120_000);
  let vast: FakeVastApi;
  let runpod: FakeRunpodApi;
  let lambda: FakeLambdaApi;
  let ctx: TestContext;
  const calls = () => vast.calls.length + runpod.calls.length + lambda.calls.length;

  before(async () => {
    [vast, runpod, lambda] = await Promise.all([
      FakeVastApi.start(),
      FakeRunpodApi.start({ behaviour: 'recorded' }),
      FakeLambdaApi.start(),
    ]);
    // Lambda's key is wrong: the report says so, and is still a report.
    ctx = await createTestContext(cloudService({ vast, runpod, lambda }, { LAMBDA_PROVIDER_API_KEY: 'secret_wrong' }));
  });
  after(async () => {
    await ctx?.close();
    await Promise.all([vast?.close(), runpod?.close(), lambda?.close()]);
  });

  it('refuses a request without a key (401) and every key but an operator one (403), calling no cloud', async () => {
    const before = calls();
    const none = await ctx.api.get('/api/v1/providers/check');
    assert.equal(none.status, 401);
    assert.equal(none.body.error.code, 'UNAUTHENTICATED');
    const agent = await signup(ctx);
    const owner = await operatorKey(ctx, false);
    const issued = await ctx.services.accounts.issueOwnerKey(
      (await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 7)).id,
    );
    for (const auth of [agent.auth, owner, { Authorization: `Bearer ${issued.token}` }]) {
      const res = await ctx.api.get('/api/v1/providers/check').set(auth);
      assert.equal(res.status, 403, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'FORBIDDEN');
      assert.match(res.body.error.message, /OWNER key with admin/);
      assert.equal(typeof res.body.error.requestId, 'string');
    }
    assert.equal(calls(), before, 'no cloud was called for a refused key');
  });

  it("answers an operator's key with the report, and serves the same report again without calling the clouds", async () => {
    const auth = await operatorKey(ctx);
    const res = await ctx.api.get('/api/v1/providers/check').set(auth);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.meta.apiVersion, 'v1');
    const report = res.body.data;
    assert.deepEqual(
      report.providers.map((p: { id: string; usable: boolean }) => [p.id, p.usable]),
      [
        ['vast', true],
        ['runpod', true],
        ['lambda', false],
      ],
    );
    assert.equal(report.usable, false);
    assert.equal(report.problems.length, 1);
    assert.match(
      report.problems[0],
      /^lambda: the API key was refused \(HTTP 401 global\/invalid-api-key\): set LAMBDA_PROVIDER_API_KEY/,
    );
    const v = report.providers[0].check;
    assert.equal(v.credentials.accepted, true);
    assert.equal(v.balance.amountMinor, 2500);
    assert.ok(v.offers.parsed > 0);
    assert.ok(
      !JSON.stringify(report).includes(vast.apiKey),
      "Vast's current-user answer carries the key; the report does not",
    );
    // Read-only: GETs, and Vast's offer search.
    assert.deepEqual(
      [
        ...vast.calls.map((c) => `${c.method} ${c.path}`),
        ...runpod.calls.map((c) => c.method),
        ...lambda.calls.map((c) => c.method),
      ].filter((c) => c !== 'GET' && !/^GET |^POST \/api\/v0\/bundles\/$/.test(c)),
      [],
    );

    const before = calls();
    const again = await ctx.api.get('/api/v1/providers/check').set(auth);
    assert.equal(again.status, 200);
    assert.equal(again.body.data.checkedAt, report.checkedAt, 'the same run');
    assert.equal(calls(), before, 'the clouds were not called again');
  });

  it("limits each operator's key to its checks a minute (429 with Retry-After), another key is still served", async () => {
    const auth = await operatorKey(ctx);
    for (let i = 0; i < PROVIDER_CHECKS_PER_KEY_PER_MINUTE; i++)
      assert.equal((await ctx.api.get('/api/v1/providers/check').set(auth)).status, 200);
    const limited = await ctx.api.get('/api/v1/providers/check').set(auth);
    assert.equal(limited.status, 429, JSON.stringify(limited.body));
    assert.equal(limited.body.error.code, 'RATE_LIMITED');
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.equal((await ctx.api.get('/api/v1/providers/check').set(await operatorKey(ctx))).status, 200);
  });
});
