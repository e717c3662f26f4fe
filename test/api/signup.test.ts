import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

describe('POST /api/v1/signup', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  const post = (key: string | undefined, body?: object, c: TestContext = ctx) => {
    const req = c.api.post('/api/v1/signup');
    if (key !== undefined) req.set('Idempotency-Key', key);
    return body === undefined ? req : req.send(body);
  };

  it('creates a zero-balance account with an AGENT key of every scope and the defaults', async () => {
    const res = await post(randomUUID());
    assert.equal(res.status, 201);
    const { account, token } = res.body.data;
    assert.match(token, /^gpr_[A-Za-z0-9]{8}\.[A-Za-z0-9_-]{43}$/);
    assert.equal(account.key.kind, 'AGENT');
    assert.deepEqual(account.key.scopes, ['read', 'rent', 'manage', 'billing']);
    assert.equal(account.key.maxPerRentalMinor, 500);
    assert.equal(account.key.budgetLimitMinor, 50000);
    assert.equal(account.key.maxConcurrentDeployments, 1);
    assert.equal(account.balance.creditsMinor, 0);
    assert.equal(account.billing.model, 'ACCOUNT_BALANCE');
    assert.equal(account.billing.budgetRequired, false);
    const entries: { n: number }[] = await ctx.services.ds.query(
      'SELECT COUNT(*) AS n FROM ledger_entries WHERE account_id = ?',
      [account.user.id],
    );
    assert.equal(Number(entries[0].n), 0, 'no free credits');
  });

  it('takes the limits from the body', async () => {
    const res = await post(randomUUID(), {
      maxPerRentalMinor: 2500,
      budgetLimitMinor: 10000,
      maxConcurrentDeployments: 3,
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.data.account.key.maxPerRentalMinor, 2500);
    assert.equal(res.body.data.account.key.budgetLimitMinor, 10000);
    assert.equal(res.body.data.account.key.maxConcurrentDeployments, 3);
  });

  it('always creates a new account', async () => {
    const a = await post(randomUUID(), {});
    const b = await post(randomUUID(), {});
    assert.notEqual(a.body.data.account.user.id, b.body.data.account.user.id);
  });

  for (const [name, body, field] of [
    ['per-rental cap under 500', { maxPerRentalMinor: 499 }, 'maxPerRentalMinor'],
    ['budget under 500', { budgetLimitMinor: 1 }, 'budgetLimitMinor'],
    ['zero concurrency', { maxConcurrentDeployments: 0 }, 'maxConcurrentDeployments'],
    ['fractional cents', { maxPerRentalMinor: 600.5 }, 'maxPerRentalMinor'],
    ['a budget beyond exact integers', { budgetLimitMinor: 2 ** 53 + 1 }, 'budgetLimitMinor'],
    ['a budget over the ceiling', { budgetLimitMinor: 1_000_000_001 }, 'budgetLimitMinor'],
    ['concurrency beyond a 32-bit column', { maxConcurrentDeployments: 2147483648 }, 'maxConcurrentDeployments'],
  ] as const) {
    it(`rejects ${name} with 422 naming ${field}`, async () => {
      const res = await post(randomUUID(), body);
      assert.equal(res.status, 422);
      assert.equal(res.body.error.code, 'VALIDATION_FAILED');
      assert.match(res.body.error.message, new RegExp(field));
    });
  }

  it('requires a UUID Idempotency-Key (400 INVALID_REQUEST)', async () => {
    for (const key of [undefined, '', 'not-a-uuid', 'x'.repeat(36)]) {
      const res = await post(key, {});
      assert.equal(res.status, 400, `key ${key}`);
      assert.equal(res.body.error.code, 'INVALID_REQUEST');
    }
  });

  it('answers a repeated key with 409 SIGNUP_ALREADY_COMPLETED and no secret', async () => {
    const key = randomUUID();
    const first = await post(key, { maxPerRentalMinor: 700 });
    assert.equal(first.status, 201);
    const again = await post(key, { maxPerRentalMinor: 700 });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'SIGNUP_ALREADY_COMPLETED');
    assert.doesNotMatch(JSON.stringify(again.body), /gpr_/);
    assert.match(
      again.body.error.message,
      /If you kept the token, use it \(GET \/api\/v1\/me.*If it is lost, sign up again with a new Idempotency-Key .*or ask the account owner for a setup code/,
    );
  });

  it('refuses a signup carrying a working key of an existing account (it would make a second, empty one), and ignores one that does not authenticate', async () => {
    const first = await post(randomUUID(), {});
    assert.equal(first.status, 201);
    const token: string = first.body.data.token;
    const accounts = () => ctx.services.ds.getRepository(Account).count();
    const before = await accounts();
    const withKey = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Authorization', `Bearer ${token}`)
      .send({});
    assert.equal(withKey.status, 409, withKey.text);
    assert.equal(withKey.body.error.code, 'SIGNUP_ALREADY_COMPLETED');
    assert.match(
      withKey.body.error.message,
      new RegExp(
        `carries the API key gpr_${first.body.data.account.key.prefix} of an existing account; a signup would make a second, empty account.*without the Authorization header`,
      ),
    );
    assert.doesNotMatch(withKey.text, new RegExp(token.split('.')[1]), 'the secret is not repeated');
    assert.equal(await accounts(), before, 'no account was made');
    const unknown = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Authorization', `Bearer gpr_AAAAAAAA.${'B'.repeat(43)}`)
      .send({});
    assert.equal(unknown.status, 201, 'a key that does not authenticate is no account to keep');
  });

  it('tells a caller with a refused key that a revoked key needs the owner, not a signup', async () => {
    const res = await ctx.api.get('/api/v1/me').set('Authorization', `Bearer gpr_AAAAAAAA.${'B'.repeat(43)}`);
    assert.equal(res.status, 401);
    assert.match(
      res.body.error.message,
      /A key that worked before and now gets this was revoked: ask the account owner for a new key or a setup code \(signing up instead makes a new, unfunded account/,
    );
  });

  it('answers the same key with a changed body with 409 IDEMPOTENCY_CONFLICT', async () => {
    const key = randomUUID();
    assert.equal((await post(key, { maxPerRentalMinor: 700 })).status, 201);
    const changed = await post(key, { maxPerRentalMinor: 800 });
    assert.equal(changed.status, 409);
    assert.equal(changed.body.error.code, 'IDEMPOTENCY_CONFLICT');
    assert.match(
      changed.body.error.message,
      /nothing was done\. A new request needs a new Idempotency-Key; to retry the first request, send it again with its body unchanged\./,
    );
  });

  it('treats an omitted field and its default as the same request', async () => {
    const key = randomUUID();
    assert.equal((await post(key, {})).status, 201);
    assert.equal((await post(key, { maxPerRentalMinor: 500 })).body.error.code, 'SIGNUP_ALREADY_COMPLETED');
  });

  it('creates exactly one account for 12 concurrent requests with one key', async () => {
    const key = randomUUID();
    const before = await ctx.services.ds.getRepository(Account).count();
    const results = await Promise.all(Array.from({ length: 12 }, () => post(key, { budgetLimitMinor: 900 })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [201, ...Array(11).fill(409)]);
    assert.ok(results.filter((r) => r.status === 409).every((r) => r.body.error.code === 'SIGNUP_ALREADY_COMPLETED'));
    assert.equal(await ctx.services.ds.getRepository(Account).count(), before + 1);
    const keys = await ctx.services.ds.getRepository(ApiKey).countBy({ budgetLimitMinor: 900 });
    assert.equal(keys, 1);
  });

  it('limits signups per minute across processes, counted in MySQL, with Retry-After', async () => {
    // A minute of our own, far from the real clock, so other tests' signups do not count.
    const limited = await createTestContext({ env: { SIGNUP_RATE_PER_MINUTE: '3' } });
    const minute = Date.UTC(2031, 0, 1, 0, Math.floor(Math.random() * 100_000));
    limited.clock.set(new Date(minute + 15_000));
    const other = await createTestContext({ env: { SIGNUP_RATE_PER_MINUTE: '3' } });
    other.clock.set(new Date(minute + 20_000));
    // Two app instances share the counter, as two api processes would.
    const results = [];
    for (const c of [limited, other, limited, other]) results.push(await post(randomUUID(), {}, c));
    assert.deepEqual(
      results.map((r) => r.status),
      [201, 201, 201, 429],
    );
    const rejected = results[3];
    assert.equal(rejected.body.error.code, 'RATE_LIMITED');
    assert.equal(rejected.headers['retry-after'], '40');
    limited.clock.set(new Date(minute + 61_000));
    assert.equal((await post(randomUUID(), {}, limited)).status, 201, 'the next window admits again');
    await limited.close();
    await other.close();
  });

  it('is switched off by AGENT_V1_ENABLED=false (503 AGENTS_DISABLED)', async () => {
    const off = await createTestContext({ env: { AGENT_V1_ENABLED: 'false' } });
    const res = await post(randomUUID(), {}, off);
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, 'AGENTS_DISABLED');
    await off.close();
  });

  it('persists DEFAULT_BILLING_MODEL=LEGACY_PREPAID per account, which then requires a budget', async () => {
    const legacy = await createTestContext({ env: { DEFAULT_BILLING_MODEL: 'LEGACY_PREPAID' } });
    const res = await post(randomUUID(), {}, legacy);
    assert.equal(res.status, 201);
    assert.equal(res.body.data.account.billing.model, 'LEGACY_PREPAID');
    assert.equal(res.body.data.account.billing.budgetRequired, true);
    const row = await legacy.services.ds.getRepository(Account).findOneByOrFail({ id: res.body.data.account.user.id });
    assert.equal(row.billingModel, 'LEGACY_PREPAID');
    // The persisted model stays when the service default changes.
    const me = await ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${res.body.data.token}`);
    assert.equal(me.body.data.billing.model, 'LEGACY_PREPAID');
    await legacy.close();
  });
});
