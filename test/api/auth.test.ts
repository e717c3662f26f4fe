import assert from 'node:assert/strict';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { sha256 } from '../../src/modules/keys/tokens.js';

describe('authentication', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  const strip = (body: { error: { requestId: string } }) =>
    JSON.stringify({ ...body, error: { ...body.error, requestId: '' } });

  it('gives a byte-identical 401 body for absent, malformed, unknown, wrong-secret and revoked tokens', async () => {
    const a = await signup(ctx);
    const revoked = await signup(ctx);
    await ctx.services.keys.revoke(revoked.accountId, revoked.keyId);
    const [prefix] = a.token.slice(4).split('.');
    const cases: (string | undefined)[] = [
      undefined,
      'Basic dXNlcjpwYXNz',
      'Bearer',
      'Bearer not-a-token',
      `Bearer gpr_ZZZZZZZZ.${'A'.repeat(43)}`,
      `Bearer gpr_${prefix}.${'B'.repeat(43)}`,
      `Bearer ${revoked.token}`,
    ];
    const bodies = new Set<string>();
    for (const header of cases) {
      const req = ctx.api.get('/api/v1/me');
      if (header) req.set('Authorization', header);
      const res = await req;
      assert.equal(res.status, 401, `header ${header}`);
      assert.equal(res.body.error.code, 'UNAUTHENTICATED');
      bodies.add(strip(res.body));
    }
    assert.equal(bodies.size, 1);
    const ok = await ctx.api.get('/api/v1/me').set(a.auth);
    assert.equal(ok.status, 200);
  });

  it('stores only the SHA-256 of the secret', async () => {
    const a = await signup(ctx);
    const key = await ctx.services.ds.getRepository(ApiKey).findOneByOrFail({ id: a.keyId });
    const [prefix, secret] = a.token.slice(4).split('.');
    assert.match(a.token, /^gpr_[A-Za-z0-9]{8}\.[A-Za-z0-9_-]{43}$/);
    assert.equal(key.prefix, prefix);
    assert.deepEqual(key.secretHash, sha256(secret));
    const raw: { n: number }[] = await ctx.services.ds.query(
      'SELECT COUNT(*) AS n FROM api_keys WHERE id = ? AND (name LIKE ? OR scopes LIKE ?)',
      [a.keyId, `%${secret}%`, `%${secret}%`],
    );
    assert.equal(Number(raw[0].n), 0);
  });

  it('checks scopes per route: a key without read gets 403 FORBIDDEN', async () => {
    const a = await signup(ctx);
    await ctx.services.ds.getRepository(ApiKey).update({ id: a.keyId }, { scopes: ['rent'] });
    const res = await ctx.api.get('/api/v1/me').set(a.auth);
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'FORBIDDEN');
    assert.match(res.body.error.message, /read/);
  });
});
