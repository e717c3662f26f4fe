import assert from 'node:assert/strict';
import { runOwnerProviders } from '../../src/cli/owner-providers.js';
import { loadConfig } from '../../src/config.js';
import { PRODUCT_USER_AGENT } from '../../src/providers/kit/user-agent.js';
import type { ProviderCheckReport } from '../../src/providers/provider-checks.js';
import { FakeLambdaApi } from '../fakes/lambda-api.js';
import { FakeRunpodApi } from '../fakes/runpod-api.js';
import { FakeVastApi } from '../fakes/vast-api.js';
import { offer, type FakeVastOffer } from '../fakes/vast-fixtures.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { freePort, spawnService } from '../helpers/process.js';

/** Asks of every kind the Vast check counts: two offered, the rest dropped for a reason each. */
const ASKS: FakeVastOffer[] = [
  offer(7200001, 'RTX 4090', 1, 24_564, 0.35),
  offer(7200002, 'RTX 3090', 1, 24_576, 0.25, { inet_up_cost: 0.005, inet_down_cost: 0.005 }),
  offer(7200003, 'H100 SXM', 1, 81_559, 2.1, { inet_up_cost: 0.03, inet_down_cost: 0.03 }),
  offer(7200004, 'A100 SXM4', 1, 81_920, 1.2, { inet_up_cost: 0.02, inet_down_cost: 0 }),
  offer(7200005, '', 1, 24_576, 0.3),
  offer(7200006, 'L40S', 1, 46_068, 0),
  offer(7200007, 'L4', 1, 23_034, 0.4, { inet_up_cost: 'n/a' as unknown as number }),
];

describe('owner providers check', function () {
  this.timeout(120_000);
  let vast: FakeVastApi;
  let runpod: FakeRunpodApi;
  let lambda: FakeLambdaApi;

  before(async () => {
    [vast, runpod, lambda] = await Promise.all([
      FakeVastApi.start({ offers: ASKS }),
      // Recorded: RunPod's edge refuses a runtime's default User-Agent, as Cloudflare does.
      FakeRunpodApi.start({ behaviour: 'recorded' }),
      FakeLambdaApi.start({ behaviour: 'recorded' }),
    ]);
  });
  after(() => Promise.all([vast?.close(), runpod?.close(), lambda?.close()]));

  afterEach(() => {
    runpod.refuseUserAgents(null);
    lambda.refuseUserAgents(null);
    vast.setCredit(25);
    vast.offers = structuredClone(ASKS);
  });

  /** The environment of a service configured with the three fakes (each key right unless replaced). */
  function env(over: Record<string, string> = {}): Record<string, string> {
    return {
      DATABASE_URL: testDatabaseUrl,
      LOG_LEVEL: 'silent',
      PROVIDERS: 'vast,runpod,lambda',
      VAST_PROVIDER_API_KEY: vast.apiKey,
      VAST_PROVIDER_API_URL: vast.url,
      RUNPOD_PROVIDER_API_KEY: runpod.apiKey,
      RUNPOD_PROVIDER_API_URL: runpod.url,
      LAMBDA_PROVIDER_API_KEY: lambda.apiKey,
      LAMBDA_PROVIDER_API_URL: lambda.url,
      ...over,
    };
  }

  /** `owner providers check --json` in this process, as the owner command runs it. */
  async function check(over: Record<string, string> = {}, args = ['--json']) {
    let out = '';
    let err = '';
    const status = await runOwnerProviders(['check', ...args], loadConfig(env(over)), {
      out: (t) => (out += t),
      err: (t) => (err += t),
    });
    const report = args.includes('--json') ? (JSON.parse(out) as ProviderCheckReport) : undefined;
    return { status, out, err, report: report! };
  }

  const entry = (r: ProviderCheckReport, id: string) => {
    const e = r.providers.find((p) => p.id === id);
    assert.ok(e, `no entry for ${id}`);
    assert.ok(e.check, `${id} has no check: ${JSON.stringify(e)}`);
    return { ...e, check: e.check };
  };

  /** Every call each fake received was a read: GETs, and Vast's offer search (a POST that only reads). */
  function assertOnlyReads(): void {
    const writes = [
      ...vast.calls.filter((c) => c.method !== 'GET' && !(c.method === 'POST' && c.path === '/api/v0/bundles/')),
      ...runpod.calls.filter((c) => c.method !== 'GET'),
      ...lambda.calls.filter((c) => c.method !== 'GET'),
    ];
    assert.deepEqual(writes, []);
    assert.ok(vast.calls.length > 0 && runpod.calls.length > 0 && lambda.calls.length > 0);
  }

  it('with good keys: every cloud usable, exit 0, nothing on stderr, read-only calls, no secret in the report', async () => {
    const { status, out, err, report } = await check();
    assert.equal(status, 0, err);
    assert.equal(err, '');
    assert.equal(report.usable, true);
    assert.deepEqual(report.problems, []);
    assert.deepEqual(
      report.providers.map((p) => [p.id, p.supported, p.usable]),
      [
        ['vast', true, true],
        ['runpod', true, true],
        ['lambda', true, true],
      ],
    );
    const v = entry(report, 'vast').check;
    assert.equal(v.credentials.accepted, true);
    assert.deepEqual(v.balance, {
      amountMinor: 2500,
      currency: 'USD',
      detail: 'the credit of the account (Vast is prepaid)',
    });
    assert.deepEqual(
      v.calls.map((c) => [c.name, c.status, c.ok]),
      [
        ['GET /api/v0/users/current/', 200, true],
        ['POST /api/v0/bundles/', 200, true],
      ],
    );
    for (const e of report.providers) {
      const c = e.check!;
      assert.deepEqual(c.userAgent, { sent: PRODUCT_USER_AGENT, accepted: true, detail: 'the API itself answered' });
      assert.ok(c.offers.parsed > 0, `${e.id}: ${JSON.stringify(c.offers)}`);
      for (const call of c.calls) assert.ok(Number.isInteger(call.ms) && call.ms >= 0, JSON.stringify(call));
    }
    // RunPod and Lambda tell no balance through a read-only call of their APIs.
    assert.equal(entry(report, 'runpod').check.balance, undefined);
    assert.equal(entry(report, 'lambda').check.balance, undefined);
    assert.equal(entry(report, 'lambda').check.sshKeys?.possible, true);
    assert.ok(runpod.calls.every((c) => c.userAgent === PRODUCT_USER_AGENT));
    // Vast's current-user answer carries the API key itself: it never reaches the report.
    for (const key of [vast.apiKey, runpod.apiKey, lambda.apiKey]) assert.ok(!out.includes(key), 'a key in the report');
    assert.ok(!out.includes('operator@example.test'), "the account's e-mail in the report");
    assertOnlyReads();
  });

  it('counts the asks Vast dropped per reason, says what to change, and stays usable while some are offered', async () => {
    const { status, report } = await check({
      VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB: '0.01',
      LAMBDA_PROVIDER_REGIONS: 'us-east-1',
    });
    assert.equal(status, 0);
    const v = entry(report, 'vast');
    assert.equal(v.usable, true);
    assert.deepEqual(
      { considered: v.check.offers.considered, parsed: v.check.offers.parsed, dropped: v.check.offers.dropped },
      {
        considered: 7,
        parsed: 2,
        dropped: { traffic_price_above_limit: 2, no_gpu_name: 1, no_dph_total: 1, traffic_price_unreadable: 1 },
      },
    );
    assert.match(v.check.offers.hints.traffic_price_above_limit, /raise VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB/);
    assert.equal(v.warnings.length, 1);
    assert.equal(
      v.warnings[0],
      'vast: 5 of 7 asks dropped: no_dph_total 1, no_gpu_name 1, traffic_price_unreadable 1 (asks Vast answered without a usable field: nothing to change here; report it if many); traffic_price_above_limit 2 (raise VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB, or unset it to list asks whatever their traffic costs)',
    );
    assert.ok(report.warnings.includes(v.warnings[0]));
    // Lambda: the regions LAMBDA_PROVIDER_REGIONS leaves out are counted, with the variable to change.
    const l = entry(report, 'lambda').check.offers;
    assert.ok(l.dropped.region_not_configured > 0, JSON.stringify(l));
    assert.match(l.hints.region_not_configured, /LAMBDA_PROVIDER_REGIONS leaves out/);
    assert.equal(l.considered, l.parsed + Object.values(l.dropped).reduce((a, n) => a + n, 0));
    assert.deepEqual(report.problems, []);
  });

  it('makes a cloud whose every ask is dropped not usable, naming the reason and what to change (exit 1)', async () => {
    vast.offers = structuredClone(ASKS.filter((o) => (o.inet_up_cost ?? 0) > 0.01));
    const { status, err, report } = await check({ VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB: '0' });
    assert.equal(status, 1);
    assert.equal(entry(report, 'vast').usable, false);
    assert.equal(entry(report, 'runpod').usable, true);
    assert.deepEqual(report.problems, [
      'vast: none of its 2 asks could be offered: traffic_price_above_limit 2 (raise VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB, or unset it to list asks whatever their traffic costs)',
    ]);
    assert.equal(err, `${report.problems[0]}\n`);
  });

  it('names a wrong key per cloud with the exact refusal and the variable to set (exit 1)', async () => {
    const { status, err, report } = await check({
      VAST_PROVIDER_API_KEY: 'wrong-vast-key',
      RUNPOD_PROVIDER_API_KEY: 'rpa_WRONG',
      LAMBDA_PROVIDER_API_KEY: 'secret_wrong',
    });
    assert.equal(status, 1);
    assert.equal(report.usable, false);
    for (const [id, status] of [
      ['vast', 404],
      ['runpod', 401],
      ['lambda', 401],
    ] as const) {
      const e = entry(report, id);
      assert.equal(e.usable, false);
      assert.equal(e.check.credentials.accepted, false);
      assert.equal(e.check.credentials.errorClass, 'auth', id);
      // The key refused stops the check: nothing else is asked with it.
      assert.deepEqual(
        e.check.calls.map((c) => [c.status, c.errorClass]),
        [[status, 'auth']],
      );
      assert.equal(e.check.userAgent.accepted, true, 'the API itself answered');
      assert.equal(e.problems.length, 1, JSON.stringify(e.problems));
      assert.match(
        e.problems[0],
        new RegExp(
          `^${id}: the API key was refused \\(HTTP ${status}[^)]*\\): set ${id.toUpperCase()}_PROVIDER_API_KEY to `,
        ),
      );
    }
    assert.equal(err, report.problems.map((p) => `${p}\n`).join(''), 'one line per problem on stderr');
    assert.ok(!err.includes('wrong-vast-key') && !err.includes('rpa_WRONG') && !err.includes('secret_wrong'));
    assertOnlyReads();
  });

  it('tells a User-Agent the edge refuses from a refused key (exit 1)', async () => {
    runpod.refuseUserAgents(/^gpu-rental\//);
    lambda.refuseUserAgents(/^gpu-rental\//);
    const { status, err, report } = await check();
    assert.equal(status, 1);
    assert.equal(entry(report, 'vast').usable, true);
    for (const id of ['runpod', 'lambda']) {
      const e = entry(report, id);
      assert.equal(e.usable, false);
      assert.equal(e.check.credentials.errorClass, 'user_agent', id);
      assert.match(e.check.credentials.detail, /not checked: the edge refused the request before the API read the key/);
      assert.equal(e.check.userAgent.sent, PRODUCT_USER_AGENT);
      assert.equal(e.check.userAgent.accepted, false);
      assert.deepEqual(
        e.check.calls.map((c) => [c.status, c.errorClass]),
        [[403, 'user_agent']],
      );
      assert.deepEqual(e.problems.length, 1);
      assert.ok(
        e.problems[0].startsWith(`${id}: the edge refused our User-Agent "${PRODUCT_USER_AGENT}"`),
        e.problems[0],
      );
      assert.doesNotMatch(e.problems[0], /API_KEY/, 'the key is not blamed');
    }
    assert.equal(err.trim().split('\n').length, 2);
  });

  it('says what to look at when a cloud cannot be reached', async () => {
    const { status, report } = await check({
      PROVIDERS: 'vast',
      VAST_PROVIDER_API_URL: `http://127.0.0.1:${await freePort()}`,
    });
    assert.equal(status, 1);
    const v = entry(report, 'vast');
    assert.equal(v.check.credentials.errorClass, 'unavailable');
    assert.equal(v.check.userAgent.accepted, false, 'no answer came, so the edge could not be seen');
    assert.ok(v.problems.length >= 1);
    for (const p of v.problems) assert.match(p, /^vast: .*: no answer from the API: check VAST_PROVIDER_API_URL/);
    assert.ok(!report.problems.some((p) => /User-Agent/.test(p)), 'no answer is not an edge refusal');
  });

  it('makes an empty Vast credit a problem, with what to do', async () => {
    vast.setCredit(0);
    const { status, report } = await check({ PROVIDERS: 'vast' });
    assert.equal(status, 1);
    assert.equal(entry(report, 'vast').check.balance?.amountMinor, 0);
    assert.deepEqual(report.problems.length, 1);
    assert.match(report.problems[0], /^vast: the account's balance is \$0\.00: add credit/);
  });

  it('prints one block per cloud and the verdict as text; a usage mistake exits 2', async () => {
    const text = await check({ VAST_PROVIDER_API_KEY: 'wrong-vast-key' }, []);
    assert.equal(text.status, 1);
    assert.match(text.out, /^vast: NOT USABLE/m);
    assert.match(text.out, /^ {2}credentials +refused \(auth\): the API key was refused \(HTTP 404 auth_error\)$/m);
    assert.match(text.out, /^runpod: usable/m);
    assert.match(text.out, /^ {2}balance +not told by this cloud$/m);
    assert.match(text.out, /^lambda: usable/m);
    assert.match(text.out, /^ {2}ssh keys +possible: /m);
    assert.match(text.out, new RegExp(`^ {2}user agent +"${PRODUCT_USER_AGENT.replace(/\./g, '\\.')}" accepted`, 'm'));
    assert.match(text.out, /^ {2}call +GET \/v2\/pods {2}200 {2}\d+ ms {2}ok$/m);
    assert.match(text.out, /^1 problem: vast not usable/m);
    assert.match(text.err, /^vast: the API key was refused \(HTTP 404 auth_error\): set VAST_PROVIDER_API_KEY/);

    const usage = await check({}, ['--fast']);
    assert.equal(usage.status, 2);
    assert.match(usage.err, /Usage: owner providers check \[--json\]/);
    let help = '';
    assert.equal(await runOwnerProviders(['help'], loadConfig(env()), { out: (t) => (help += t), err: () => {} }), 0);
    assert.match(help, /^ {7}owner providers check \[--json\]$/m);
    assert.match(help, /^check: whether each configured cloud is usable, through read-only calls only/m);
  });

  it('runs as the operator runs it: a process of its own, the report on stdout, the problems on stderr', async () => {
    const run = spawnService(
      ['owner', 'providers', 'check', '--json'],
      env({ PROVIDERS: 'local,vast,lambda', LAMBDA_PROVIDER_API_KEY: 'secret_wrong' }),
    );
    assert.equal(await run.exited, 1, run.stderr());
    const report = JSON.parse(run.stdout()) as ProviderCheckReport;
    assert.deepEqual(
      report.providers.map((p) => [p.id, p.usable]),
      [
        ['local', true],
        ['vast', true],
        ['lambda', false],
      ],
    );
    // The local provider signs in to nothing and calls no API: it reads its inventory.
    const local = entry(report, 'local').check;
    assert.equal(local.credentials.accepted, true);
    assert.ok(local.offers.parsed > 0);
    assert.deepEqual(local.userAgent, {
      sent: null,
      accepted: true,
      detail: 'no HTTP API: there is no edge to refuse it',
    });
    assert.equal(run.stderr(), `${report.problems[0]}\n`);
    assert.match(
      run.stderr(),
      /^lambda: the API key was refused \(HTTP 401 global\/invalid-api-key\): set LAMBDA_PROVIDER_API_KEY/,
    );
  });
});
