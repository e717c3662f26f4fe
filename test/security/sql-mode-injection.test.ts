import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2/promise';
import type { DataSource } from 'typeorm';
import { createDatabaseIfMissing, createDataSource, migrate, SESSION_SQL_MODE } from '../../src/db/data-source.js';
import { entities } from '../../src/entities.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';
import { startPrivateMariaDb, type PrivateMariaDb } from '../helpers/private-mariadb.js';

// One quote leaves the key's string under NO_BACKSLASH_ESCAPES (mysql2 sends it as \', and the
// server reads that backslash as a character); the rest completes the INSERT of the idempotency
// claim, credits the account, commits, and comments out the statement's tail.
const PAYLOAD = "x', 0x68, NULL, NOW()); UPDATE accounts SET balance_minor = 9000000; COMMIT; #";

describe('SQL under a server whose sql_mode holds NO_BACKSLASH_ESCAPES', function () {
  this.timeout(90_000);
  let server: PrivateMariaDb;
  let url: string;
  let ds: DataSource;
  let ctx: TestContext;

  before(async () => {
    server = await startPrivateMariaDb(['--sql-mode=NO_BACKSLASH_ESCAPES']);
    url = `${server.url}gpu_rental_nbe_${Date.now().toString(36)}`;
    await createDatabaseIfMissing(url);
    ds = createDataSource(url, 4, entities);
    await ds.initialize();
    await migrate(ds);
    ctx = await createTestContext({ database: { ds, url } });
  });
  after(async () => {
    await ctx?.close();
    if (ds?.isInitialized) await ds.destroy();
    await server?.stop();
  });

  it('is a real attack for a client that formats values without pinning the session mode', async () => {
    const conn = await mysql.createConnection({ uri: url, multipleStatements: true });
    try {
      const [[mode]] = (await conn.query('SELECT @@SESSION.sql_mode AS m')) as unknown as [[{ m: string }]];
      assert.match(mode.m, /NO_BACKSLASH_ESCAPES/);
      await conn.query(
        `INSERT INTO accounts (id, billing_model, balance_minor, frozen, created_at) VALUES (?, 'ACCOUNT_BALANCE', 0, 0, NOW())`,
        ['victim'],
      );
      const statement = conn.format(
        'INSERT IGNORE INTO idempotency_records (scope, idem_key, request_hash, resource_id, created_at) VALUES (?, ?, ?, ?, ?)',
        ['probe', PAYLOAD, 'h', null, new Date()],
      );
      await conn.query(`${statement};\nSELECT 1`);
      const [[victim]] = (await conn.query(`SELECT balance_minor FROM accounts WHERE id = 'victim'`)) as unknown as [
        [{ balance_minor: number }],
      ];
      assert.equal(Number(victim.balance_minor), 9000000, 'the payload ran its own UPDATE');
      await conn.query(`DELETE FROM accounts WHERE id = 'victim'`);
      await conn.query(`DELETE FROM idempotency_records WHERE scope = 'probe'`);
    } finally {
      await conn.end();
    }
  });

  it("pins every connection of the service's pool to a mode where mysql2's escaping holds", async () => {
    const modes = await Promise.all(Array.from({ length: 4 }, () => ds.query('SELECT @@SESSION.sql_mode AS m')));
    for (const [row] of modes) assert.equal(row.m, SESSION_SQL_MODE);
  });

  it('a rental Idempotency-Key carrying the payload is stored as a value and changes nothing else', async () => {
    const who = await signup(ctx);
    const offers = await ctx.api.get('/api/v1/offers');
    const res = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', PAYLOAD)
      .send({ offerId: offers.body.data[0].id });
    assert.ok(res.status < 500, JSON.stringify(res.body));
    const [acct] = await ds.query('SELECT balance_minor FROM accounts WHERE id = ?', [who.accountId]);
    assert.equal(Number(acct.balance_minor), 0, 'no credit appeared');
    const [{ n }] = await ds.query(`SELECT COUNT(*) AS n FROM accounts WHERE balance_minor <> 0`);
    assert.equal(Number(n), 0);
    // The same key again is a plain replay or the same refusal: the value round-trips intact.
    const again = await ctx.api
      .post('/api/v1/rentals')
      .set(who.auth)
      .set('Idempotency-Key', PAYLOAD)
      .send({ offerId: offers.body.data[0].id });
    assert.equal(again.status, res.status);
  });

  it('signup with the payload as its name and in a header stores them verbatim', async () => {
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .send({ name: "a'b\\' OR 1=1; #" });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const [key] = await ds.query('SELECT name FROM api_keys WHERE id = ?', [res.body.data.account.key.id]);
    assert.equal(key.name, "a'b\\' OR 1=1; #");
  });

  it('refuses to start when a session still runs under an unsafe mode', async () => {
    const unpinned = createDataSource(url, 1, entities);
    await unpinned.initialize();
    try {
      // What a session-resetting proxy would do after our SET.
      await unpinned.query(`SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'`);
      await assert.rejects(() => migrate(unpinned), /sql_mode NO_BACKSLASH_ESCAPES/);
    } finally {
      await unpinned.destroy();
    }
  });
});
