import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { KeyIssuer1763800010200 } from '../../migrations/1763800010200-KeyIssuer.js';
import { AppError } from '../../src/errors/app-error.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { databaseBefore } from '../helpers/migrated-before.js';

const LIMITS = { maxPerRentalMinor: 700, budgetLimitMinor: 3000, maxConcurrentDeployments: 2 };

/** Names that look like something else on a page or in a chat, or hide part of themselves. */
const HOSTILE: [string, string][] = [
  ['right-to-left override', 'invoice\u202Egpj.exe'],
  ['right-to-left isolate', 'trainer\u2067evil\u2069'],
  ['left-to-right mark', 'ok\u200E'],
  ['zero-width space', 'train\u200Ber'],
  ['zero-width joiner', 'a\u200Db'],
  ['byte order mark inside', 'a\uFEFFb'],
  ['soft hyphen', 'tra\u00ADiner'],
  ['line separator inside', 'line\u2028break'],
  ['paragraph separator inside', 'para\u2029graph'],
  ['C0 control', 'bell\u0007'],
  ['C1 control', 'next\u0085line'],
  ['Hangul filler', 'x\u3164y'],
  ['tag character', 'flag\u{E0041}'],
];

describe('agent and key names', () => {
  let ctx: TestContext;
  let owner: { accountId: string; keyId: string; auth: { Authorization: string } };
  before(async () => {
    ctx = await createTestContext({ env: { AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
    const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
    const { key, token } = await ctx.services.accounts.issueOwnerKey(account.id);
    owner = { accountId: account.id, keyId: key.id, auth: { Authorization: `Bearer ${token}` } };
  });
  after(() => ctx.close());

  const refused = (
    res: { status: number; body: { error?: { code: string; message: string } } },
    field: string,
    what: string,
  ) => {
    assert.equal(res.status, 422, `${what}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error!.code, 'VALIDATION_FAILED', what);
    assert.match(res.body.error!.message, new RegExp(`\\b${field}\\b`), what);
    assert.match(res.body.error!.message, /U\+[0-9A-F]{4}/, what);
  };

  it('refuses bidirectional, zero-width, control and other invisible characters where an agent names itself (422 naming the field)', async () => {
    for (const [what, name] of HOSTILE) {
      refused(await ctx.api.post('/api/v1/agent-authorizations').send({ name }), 'name', what);
      refused(await ctx.api.post('/api/v1/signup').set('Idempotency-Key', randomUUID()).send({ name }), 'name', what);
    }
    const begun = await ctx.api.post('/api/v1/agent-authorizations').send({ name: 'invoice\u202Egpj.exe' });
    assert.match(begun.body.error.message, /U\+202E/);
  });

  it('refuses them where an owner names a key: approval, agent keys, Telegram setup codes', async () => {
    const begun = await ctx.api.post('/api/v1/agent-authorizations').send({ name: 'trainer' });
    const approvalCode = begun.body.data.approvalUrl.split('/').pop();
    for (const [what, name] of HOSTILE) {
      refused(
        await ctx.api
          .post('/api/v1/agent-authorizations/approve')
          .set(owner.auth)
          .send({ approvalCode, ...LIMITS, name }),
        'name',
        what,
      );
      const issued = await ctx.api
        .post('/api/v1/agent-keys')
        .set(owner.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ name, scopes: ['read'], ...LIMITS });
      refused(issued, 'name', what);
      await assert.rejects(
        ctx.services.agents.mintSetupCode({ accountId: owner.accountId, keyId: null }, { ...LIMITS, name }),
        (err: unknown) => err instanceof AppError && err.code === 'VALIDATION_FAILED' && /name/.test(err.message),
        what,
      );
    }
    // Nothing was approved by the refused attempts.
    const ok = await ctx.api
      .post('/api/v1/agent-authorizations/approve')
      .set(owner.auth)
      .send({ approvalCode, ...LIMITS, name: 'trainer ❤️ 🤖' });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });

  it('cleans names stored before the rule, so no page or chat can show one', async function () {
    this.timeout(60_000);
    // A database of its own, migrated up to just before the migration that cleans names.
    const before = await databaseBefore(KeyIssuer1763800010200, 'names');
    const q = before.runner;
    try {
      const accountId = randomUUID();
      const now = new Date();
      await q.query(`INSERT INTO accounts (id, billing_model, created_at) VALUES (?, 'ACCOUNT_BALANCE', ?)`, [
        accountId,
        now,
      ]);
      const key = (id: string, name: string, prefix: string) =>
        q.query(
          `INSERT INTO api_keys (id, account_id, kind, name, prefix, secret_hash, scopes, max_per_rental_minor, budget_limit_minor, max_concurrent_deployments, origin, created_at)
           VALUES (?, ?, 'AGENT', ?, ?, ?, 'read', 1, 1, 1, 'authorization', ?)`,
          [id, accountId, name, prefix, randomBytes(32), now],
        );
      const [spoofed, hidden, plain] = [randomUUID(), randomUUID(), randomUUID()];
      await key(spoofed, 'invoice\u202Egpj.exe', 'AAAAAAA1');
      await key(hidden, '\u200B\u2066', 'AAAAAAA2');
      await key(plain, 'trainer ❤️', 'AAAAAAA3');
      const session = randomUUID();
      await q.query(
        `INSERT INTO agent_authorizations (id, origin, status, setup_code_hash, account_id, approved_by_key_id, name, requested_name, issued_key_id, expires_at, created_at)
         VALUES (?, 'SESSION', 'EXCHANGED', ?, ?, ?, ?, ?, ?, ?, ?)`,
        [session, randomBytes(32), accountId, plain, 'a\u202Eb', '\u2028', spoofed, now, now],
      );

      await new KeyIssuer1763800010200().up(q);

      const names = Object.fromEntries(
        ((await q.query(`SELECT id, name, issued_by_key_id FROM api_keys`)) as { id: string; name: string }[]).map(
          (r) => [r.id, r.name],
        ),
      );
      assert.deepEqual([names[spoofed], names[hidden], names[plain]], ['invoicegpj.exe', 'unnamed key', 'trainer ❤️']);
      const [s] = await q.query(`SELECT name, requested_name FROM agent_authorizations WHERE id = ?`, [session]);
      assert.deepEqual([s.name, s.requested_name], ['ab', null]);
      // The key exchanged for that session now names the key that approved it.
      const [issuer] = await q.query(`SELECT issued_by_key_id FROM api_keys WHERE id = ?`, [spoofed]);
      assert.equal(issuer.issued_by_key_id, plain);
    } finally {
      await before.close();
    }
  });
});
