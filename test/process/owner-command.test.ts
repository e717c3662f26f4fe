import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { runOwnerCommand } from '../../src/cli/owner-command.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { spawnService } from '../helpers/process.js';

const TOKEN_RE = /gpr_[A-Za-z0-9]{8}\.[A-Za-z0-9_-]{43}/g;

describe('owner create (operator command)', function () {
  this.timeout(120_000);
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(() => ctx.close());

  it('creates an owner account and an OWNER key, prints the token once, and the token works against the API', async () => {
    const run = spawnService(['owner', 'create', '--name', 'Ada Ops', '--email', 'ada@example.com'], {
      DATABASE_URL: testDatabaseUrl,
      LOG_LEVEL: 'trace',
    });
    assert.equal(await run.exited, 0, run.stderr());
    const tokens = run.stdout().match(TOKEN_RE) ?? [];
    assert.equal(tokens.length, 1, run.stdout());
    assert.equal(run.stderr(), '', 'nothing on stderr, and nothing secret logged');
    const auth = { Authorization: `Bearer ${tokens[0]}` };

    const me = await ctx.api.get('/api/v1/me').set(auth);
    assert.equal(me.status, 200, JSON.stringify(me.body));
    assert.equal(me.body.data.key.kind, 'OWNER');
    assert.equal(me.body.data.key.name, 'Ada Ops');
    assert.deepEqual([...me.body.data.key.scopes].sort(), ['billing', 'manage', 'read', 'rent']);
    assert.equal(me.body.data.user.email, 'ada@example.com');
    assert.equal(me.body.data.user.telegramLinked, false);
    assert.match(run.stdout(), new RegExp(me.body.data.user.id));

    // An owner key: it issues agent keys.
    const issued = await ctx.api
      .post('/api/v1/agent-keys')
      .set(auth)
      .set('Idempotency-Key', 'first-agent')
      .send({
        name: 'trainer',
        scopes: ['read', 'rent'],
        maxPerRentalMinor: 500,
        budgetLimitMinor: 5000,
        maxConcurrentDeployments: 1,
      });
    assert.equal(issued.status, 201, JSON.stringify(issued.body));
    const stored: { n: number }[] = await ctx.services.ds.query(
      `SELECT COUNT(*) AS n FROM api_keys WHERE prefix = ? AND kind = 'OWNER' AND origin = 'operator'`,
      [tokens[0].slice(4, 12)],
    );
    assert.equal(Number(stored[0].n), 1);
  });

  it('takes limits and scopes, and prints JSON for scripts', async () => {
    const run = spawnService(
      [
        'owner',
        'create',
        '--name',
        'ci',
        '--scopes',
        'read,rent',
        '--max-per-rental-minor',
        '2000',
        '--budget-limit-minor',
        '9000',
        '--max-concurrent',
        '3',
        '--max-rental-seconds',
        '28800',
        '--json',
      ],
      { DATABASE_URL: testDatabaseUrl },
    );
    assert.equal(await run.exited, 0, run.stderr());
    const out = JSON.parse(run.stdout());
    const me = await ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${out.token}`);
    assert.equal(me.body.data.key.id, out.keyId);
    assert.deepEqual(
      [
        me.body.data.key.scopes,
        me.body.data.key.maxPerRentalMinor,
        me.body.data.key.budgetLimitMinor,
        me.body.data.key.maxConcurrentDeployments,
        me.body.data.key.maxRentalSeconds,
      ],
      [['read', 'rent'], 2000, 9000, 3, 28800],
    );
  });

  it('gives an owner key a longest rental only when asked, and says so', async () => {
    let out = '';
    const status = await runOwnerCommand(['create', '--name', 'leases', '--max-rental-seconds', '3600'], ctx.config, {
      out: (t) => (out += t),
      err: () => {},
    });
    assert.equal(status, 0);
    assert.match(out, /at a time, rentals up to 3600 seconds\./);
    const [token] = out.match(TOKEN_RE) ?? [];
    assert.equal(
      (await ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`)).body.data.key.maxRentalSeconds,
      3600,
    );
    let plain = '';
    assert.equal(
      await runOwnerCommand(['create', '--name', 'no leases', '--json'], ctx.config, {
        out: (t) => (plain += t),
        err: () => {},
      }),
      0,
    );
    const me = await ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${JSON.parse(plain).token}`);
    assert.equal(me.body.data.key.maxRentalSeconds, null);
    assert.equal(me.body.data.key.idleTerminateMinutes, null);
  });

  it('gives an owner key an idle time for its own rentals only when asked, and says so', async () => {
    let out = '';
    const status = await runOwnerCommand(['create', '--name', 'tidy', '--idle-terminate-minutes', '45'], ctx.config, {
      out: (t) => (out += t),
      err: () => {},
    });
    assert.equal(status, 0);
    assert.match(out, /at a time, rentals ended after 45 idle minutes\./);
    const [token] = out.match(TOKEN_RE) ?? [];
    const me = await ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`);
    assert.equal(me.body.data.key.kind, 'OWNER');
    assert.equal(me.body.data.key.idleTerminateMinutes, 45);
    assert.equal(me.body.data.key.maxRentalSeconds, null);
  });

  it('refuses bad options with the usage text and exit status 2, creating nothing', async () => {
    const before: { n: number }[] = await ctx.services.ds.query(`SELECT COUNT(*) AS n FROM accounts`);
    const run = spawnService(['owner', 'create', '--name', 'x', '--scopes', 'read,admin'], {
      DATABASE_URL: testDatabaseUrl,
    });
    assert.equal(await run.exited, 2);
    assert.match(run.stderr(), /unknown: admin[\s\S]*Usage: owner create --name/);
    for (const args of [
      ['create'],
      ['create', '--name', 'x', '--max-concurrent', '0'],
      ['create', '--name', 'x', '--max-rental-seconds', '59'],
      ['create', '--name', 'x', '--max-rental-seconds', '8h'],
      ['create', '--name', 'x', '--idle-terminate-minutes', '0'],
      ['create', '--name', 'x', '--idle-terminate-minutes', '1441'],
      ['create', '--name', 'x', '--idle-terminate-minutes', '30m'],
      ['create', '--name', 'x', '--email', 'nope'],
      ['create', '--name', 'x', '--bogus'],
      ['destroy'],
    ]) {
      let out = '';
      let err = '';
      const status = await runOwnerCommand(args, ctx.config, { out: (t) => (out += t), err: (t) => (err += t) });
      assert.equal(status, 2, args.join(' '));
      assert.match(err, /Usage: owner create --name/);
      assert.doesNotMatch(out, TOKEN_RE);
    }
    const after: { n: number }[] = await ctx.services.ds.query(`SELECT COUNT(*) AS n FROM accounts`);
    assert.equal(Number(after[0].n), Number(before[0].n));
  });

  /** `npm <npmArgs> owner -- <args>` as an operator types it. */
  async function npmOwner(npmArgs: string[], args: string[], env: Record<string, string> = {}) {
    const child = spawn('npm', ['run', ...npmArgs, 'owner', '--', ...args], {
      // Without the npm settings of a run that started this one (`npm test --silent` would pass its loglevel on).
      env: {
        ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))),
        DATABASE_URL: testDatabaseUrl,
        LOG_LEVEL: 'warn',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    return { code, out, err };
  }
  const accountCount = async () =>
    Number(((await ctx.services.ds.query(`SELECT COUNT(*) AS n FROM accounts`)) as { n: number }[])[0].n);

  it('runs as npm run --silent owner -- create --json with nothing but the JSON on stdout (jq parses it)', async () => {
    const { code, out, err } = await npmOwner(['--silent'], ['create', '--name', 'npm owner', '--json']);
    assert.equal(code, 0, err);
    const { token } = JSON.parse(out);
    assert.equal(
      (await ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`)).body.data.key.name,
      'npm owner',
    );
  });

  it('refuses --json when npm printed its banner on stdout, before creating anything, and says the command that works', async () => {
    const before = await accountCount();
    const { code, out, err } = await npmOwner([], ['create', '--name', 'banner owner', '--json']);
    assert.equal(code, 2, err);
    assert.doesNotMatch(out, TOKEN_RE);
    assert.match(
      err,
      /npm printed its banner on stdout.*nothing was created\. Run: npm run --silent owner -- create --name 'banner owner' --json/,
    );
    assert.equal(await accountCount(), before);
  });

  it('prints the URLs of the configured PORT or PUBLIC_BASE_URL, never a fixed 8080', async () => {
    const onPort = spawnService(['owner', 'create', '--name', 'port owner'], {
      DATABASE_URL: testDatabaseUrl,
      PORT: '9137',
    });
    assert.equal(await onPort.exited, 0, onPort.stderr());
    assert.match(onPort.stdout(), /http:\/\/localhost:9137\/api\/v1\/agent-authorizations\/approve/);
    const public_ = spawnService(['owner', 'create', '--name', 'public owner'], {
      DATABASE_URL: testDatabaseUrl,
      PORT: '9137',
      PUBLIC_BASE_URL: 'https://gpu.example.com',
    });
    assert.equal(await public_.exited, 0, public_.stderr());
    assert.match(public_.stdout(), /https:\/\/gpu\.example\.com\/api\/v1\/agent-authorizations\/approve/);
    assert.doesNotMatch(onPort.stdout() + public_.stdout(), /8080/);
  });
});
