import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { runOwnerCommand } from '../../src/cli/owner-command.js';
import { FakeVastApi } from '../fakes/vast-api.js';
import { cloudService } from '../helpers/cloud-agent.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { testDatabaseUrl } from '../helpers/db.js';
import { spawnService } from '../helpers/process.js';

/** A code-like word no other test sends (letters only, so the report keeps it). */
const word = (prefix: string) =>
  `${prefix}_${[...randomBytes(8)].map((b) => String.fromCharCode(97 + (b % 26))).join('')}`;

interface DriftCounts {
  shapes: number;
  seen: number;
}

/**
 * The drift report as an operator meets it: the service brokering Vast (its fake) records an
 * answer the plugin could not read; `GET /api/v1/providers` counts it for the cloud and
 * `owner providers drift` lists it, as text and as JSON. The report's table is shared by the
 * files of a worker, so counts are compared with what they were before.
 */
describe('the drift report: GET /api/v1/providers and owner providers drift', function () {
  this.timeout(120_000);
  let vast: FakeVastApi;
  let ctx: TestContext;
  let code: string;
  let earlier: DriftCounts;

  const vastDrift = async (): Promise<DriftCounts> => {
    const res = await ctx.api.get('/api/v1/providers');
    assert.equal(res.status, 200);
    return (res.body.data as { id: string; drift: DriftCounts }[]).find((p) => p.id === 'vast')!.drift;
  };

  /** Runs `owner <argv>` in this process against the test database; its exit status and output. */
  const owner = async (...argv: string[]) => {
    let out = '';
    let err = '';
    const status = await runOwnerCommand(argv, ctx.config, {
      out: (t) => void (out += t),
      err: (t) => void (err += t),
    });
    return { status, out, err };
  };

  before(async () => {
    vast = await FakeVastApi.start();
    ctx = await createTestContext(cloudService({ vast }));
    earlier = await vastDrift();
    code = word('teapot');
    // Twice an answer no row of meaning takes (a 4xx with a code Vast never documented), with
    // words a report must not keep.
    for (let i = 0; i < 2; i++) {
      vast.respondNext('list', 418, { success: false, error: code, msg: `instance 31000777 at 203.0.113.8` });
      await assert.rejects(ctx.services.providers.get('vast').listInstances(), { errorClass: 'request' });
    }
    await ctx.services.providers.drift.flush();
  });
  after(async () => {
    await ctx.close();
    await vast.close();
  });

  it('counts the shapes and sightings of each configured provider', async () => {
    assert.deepEqual(await vastDrift(), { shapes: earlier.shapes + 1, seen: earlier.seen + 2 });
    const res = await ctx.api.get('/api/v1/providers');
    assert.doesNotMatch(JSON.stringify(res.body.data), /31000777|203\.0\.113\.8/);
  });

  it('lists the shape once per line, with its count, times and compact shape; --json gives the list', async () => {
    const text = await owner('providers', 'drift', '--provider', 'vast');
    assert.equal(text.status, 0, text.err);
    const lines = text.out.split('\n').filter((l) => l.includes(code));
    assert.equal(lines.length, 1, text.out);
    assert.match(
      lines[0],
      new RegExp(
        `^vast  unmatched_error  GET /api/v1/instances/  seen 2  first \\S+Z  last \\S+Z  \\{body:\\{error:string,msg:string,success:boolean\\},code:${code},status:418\\}$`,
      ),
    );
    assert.doesNotMatch(text.out, /31000777|203\.0\.113\.8/);

    const json = await owner('providers', 'drift', '--json');
    assert.equal(json.status, 0, json.err);
    const list = JSON.parse(json.out) as Record<string, unknown>[];
    const mine = list.filter((r) => JSON.stringify(r.shape).includes(code));
    assert.equal(mine.length, 1);
    assert.deepEqual(
      { ...mine[0], firstSeenAt: typeof mine[0].firstSeenAt, lastSeenAt: typeof mine[0].lastSeenAt },
      {
        provider: 'vast',
        kind: 'unmatched_error',
        where: 'GET /api/v1/instances/',
        seen: 2,
        firstSeenAt: 'string',
        lastSeenAt: 'string',
        shape: { body: { error: 'string', msg: 'string', success: 'boolean' }, code, status: '418' },
      },
    );
  });

  it('says so when a provider has nothing recorded, and refuses an unknown subcommand or option', async () => {
    const none = await owner('providers', 'drift', '--provider', 'nowhere');
    assert.deepEqual(
      [none.status, none.out],
      [0, 'No drift recorded for nowhere: every answer was one its plugin reads.\n'],
    );
    const unknown = await owner('providers', 'explode');
    assert.equal(unknown.status, 2);
    assert.match(unknown.err, /Unknown owner providers command "explode"[\s\S]*owner providers drift/);
    const option = await owner('providers', 'drift', '--verbose');
    assert.equal(option.status, 2);
    assert.match(option.err, /--verbose/);
    const help = await owner('providers', 'help');
    assert.equal(help.status, 0);
    assert.match(help.out, /^Usage: owner providers drift \[--provider <id>\] \[--json\]/);
  });

  it('runs from the service entry point like every owner command', async () => {
    const run = spawnService(['owner', 'providers', 'drift', '--provider', 'vast'], { DATABASE_URL: testDatabaseUrl });
    assert.equal(await run.exited, 0, run.stderr());
    assert.ok(
      run
        .stdout()
        .split('\n')
        .some((l) => l.includes(code) && l.includes('seen 2')),
      run.stdout(),
    );
  });
});
