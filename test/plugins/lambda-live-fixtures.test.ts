import assert from 'node:assert/strict';
import type { LambdaProvider } from '../../plugins/lambda/provider.js';
import { PRODUCT_USER_AGENT } from '../../src/providers/kit/user-agent.js';
import { errorClassOf } from '../../src/providers/provider-http.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import type { FakeLambdaStatus } from '../fakes/lambda-api.js';
import { EDGE_403_HTML, lambdaRecorded } from '../fakes/lambda-recorded.js';
import { waitFor } from '../helpers/wait.js';
import { makeLambdaHarness, type LambdaHarness } from './lambda-harness.js';

// What the plugin decides of each recorded fixture on its own is test/unit/lambda-live-fixtures.test.ts.
describe('Lambda plugin against the fake in recorded mode', function () {
  this.timeout(30_000);
  let h: LambdaHarness;
  const keys = generateDeploymentKeyPair('lambda-live');

  afterEach(async () => {
    await h?.cleanup();
  });

  async function launched(provider: LambdaProvider = h.provider): Promise<string> {
    const res = await provider.create(h.label(), h.offer(), keys.publicKey);
    assert.equal(res.kind, 'created', JSON.stringify(res));
    return (res as { instanceId: string }).instanceId;
  }

  it('sends the product User-Agent on every call: a whole lifecycle behind the edge gate meets no 403', async () => {
    h = await makeLambdaHarness({ fake: { behaviour: 'recorded', terminateMs: 50 } });
    assert.equal(h.fake.quirks.edgeHtml403, true);
    assert.match(PRODUCT_USER_AGENT, /^gpu-rental\//);
    assert.ok((await h.provider.listOffers()).length > 0);
    const label = h.label();
    const id = ((await h.provider.create(label, h.offer(), keys.publicKey)) as { instanceId: string }).instanceId;
    await waitFor(async () => (await h.provider.get(id)).state === 'running', { timeoutMs: 10_000, what: 'running' });
    assert.equal((await h.provider.findByLabel(label))?.instanceId, id);
    assert.ok((await h.provider.listInstances()).some((i) => i.instanceId === id));
    await h.provider.destroy(id);
    await waitFor(async () => (await h.provider.get(id)).state === 'gone', { timeoutMs: 10_000, what: 'gone' });
    await h.provider.afterDestroyed(label);
    const paths = new Set(h.fake.calls.map((c) => `${c.method} ${c.path.replace(/[0-9a-f]{32}/, ':id')}`));
    for (const p of [
      'GET /api/v1/instance-types',
      'POST /api/v1/ssh-keys',
      'POST /api/v1/instance-operations/launch',
      'GET /api/v1/instances',
      'POST /api/v1/instance-operations/terminate',
      'DELETE /api/v1/ssh-keys/:id',
    ]) {
      assert.ok(paths.has(p), `${p} in ${[...paths].join(', ')}`);
    }
    assert.deepEqual(
      h.fake.calls.filter((c) => c.status === 403),
      [],
    );
  });

  it('an HTML 403 from the edge is not a refused key: reads are request errors naming the User-Agent, a create is rejected naming LAMBDA_PROVIDER_API_URL', async () => {
    h = await makeLambdaHarness({ fake: { behaviour: 'recorded' } });
    h.fake.failNextWith('offers', 403, EDGE_403_HTML);
    const err = await h.provider.listOffers().then(
      () => assert.fail('should have thrown'),
      (e: unknown) => e as Error,
    );
    assert.equal(errorClassOf(err), 'request');
    assert.match(err.message, /LAMBDA_PROVIDER_API_URL/);
    assert.match(err.message, /User-Agent/);
    assert.match(err.message, /HTML page titled "Access denied"/);
    assert.doesNotMatch(err.message, /<html|<body/i, 'the page itself stays out of the log line');

    h.fake.failNextWith('create', 403, EDGE_403_HTML);
    const label = h.label();
    const res = await h.provider.create(label, h.offer(), keys.publicKey);
    assert.equal(res.kind, 'rejected', JSON.stringify(res));
    const rejected = res as { reason: string; errorClass?: string };
    assert.equal(rejected.errorClass, 'request');
    assert.match(rejected.reason, /^LAMBDA_PROVIDER_API_URL: /);
    assert.match(rejected.reason, /not the API key/);
    assert.doesNotMatch(rejected.reason, new RegExp(h.fake.apiKey));
    assert.ok(!h.fake.sshKeys().some((k) => k.name === label), 'the key registered for the refused launch is deleted');

    // A JSON 403 from the API itself still blames the account, and says which variable.
    h.fake.failNextWith('create', 403, {
      error: { code: 'global/account-inactive', message: 'Your account is inactive.' },
    });
    const inactive = (await h.provider.create(h.label(), h.offer(), keys.publicKey)) as {
      kind: string;
      reason: string;
      errorClass?: string;
    };
    assert.deepEqual([inactive.kind, inactive.errorClass], ['rejected', 'auth']);
    assert.match(inactive.reason, /^LAMBDA_PROVIDER_API_KEY: /);
  });

  it('destroy is idempotent: a terminate answered global/unknown for an instance already terminating is done', async () => {
    h = await makeLambdaHarness({ fake: { behaviour: 'recorded', bootMs: 10, terminateMs: 3000 } });
    const id = await launched();
    await h.provider.destroy(id);
    // The recorded answer to terminating it again, under either status it may carry.
    for (const status of [500, 400] as const) {
      h.fake.setQuirk('globalUnknown', status);
      const before = h.fake.calls.length;
      await h.provider.destroy(id);
      const after = h.fake.calls.slice(before);
      assert.deepEqual(
        after.map((c) => `${c.method} ${c.path.replace(id, ':id')} ${c.status}`),
        [`POST /api/v1/instance-operations/terminate ${status}`, 'GET /api/v1/instances/:id 200'],
      );
    }
    assert.equal((await h.provider.get(id)).state, 'terminating');
    assert.match(h.logText(), /already ending; counted as done/);
  });

  it('destroy still fails when the refused instance is alive, and when the key is refused', async () => {
    h = await makeLambdaHarness({ fake: { behaviour: 'recorded', bootMs: 10 } });
    const id = await launched();
    const { code, message } = lambdaRecorded().globalUnknown;
    h.fake.failNextWith('destroy', 500, { error: { code, message } });
    const err = await h.provider.destroy(id).then(
      () => assert.fail('should have thrown'),
      (e: unknown) => e,
    );
    assert.equal(errorClassOf(err), 'unavailable');
    assert.notEqual(h.fake.instances().find((i) => i.id === id)?.status, 'terminating');
    h.fake.failNextWith('destroy', 401, {
      error: { code: 'global/invalid-api-key', message: 'API key was invalid, expired, or deleted.' },
    });
    const auth = await h.provider.destroy(id).then(
      () => assert.fail('should have thrown'),
      (e: unknown) => e as Error,
    );
    assert.equal(errorClassOf(auth), 'auth');
    assert.match(auth.message, /^LAMBDA_PROVIDER_API_KEY: /);
    // And then it terminates for real.
    await h.provider.destroy(id);
  });

  it('a launch past the account instance limit is unavailable (the next offer is tried), not a configuration error', async () => {
    h = await makeLambdaHarness({ fake: { behaviour: 'recorded', bootMs: 10, quirks: { instanceLimit: 1 } } });
    await launched();
    const label = h.label();
    const res = await h.provider.create(label, h.offer(), keys.publicKey);
    assert.equal(res.kind, 'unavailable', JSON.stringify(res));
    assert.match((res as { reason: string }).reason, /limit on running instances/);
    assert.ok(!h.fake.sshKeys().some((k) => k.name === label));
  });

  it('a status no table knows reads as pending, is logged once with its raw value, and fails after its own bound', async () => {
    h = await makeLambdaHarness({
      fake: { behaviour: 'recorded', bootMs: 10 },
      tuning: { unknownStateBoundMs: 300, listTtlMs: 0 },
    });
    const id = await launched();
    await waitFor(async () => (await h.provider.get(id)).state === 'running', { timeoutMs: 10_000, what: 'running' });
    h.fake.setStatus(id, 'rebuilding' as FakeLambdaStatus);
    const first = await h.provider.get(id);
    assert.deepEqual([first.state, first.providerState], ['pending', 'rebuilding']);
    assert.equal((await h.provider.get(id)).state, 'pending');
    h.advance(300);
    assert.equal((await h.provider.get(id)).state, 'failed');
    assert.equal(h.logText().match(/"rawState":"rebuilding"/g)?.length, 1, 'logged once');
    // A known status clears the timer.
    h.fake.setStatus(id, 'active');
    assert.equal((await h.provider.get(id)).state, 'running');
  });

  it('unhealthy waits as pending and preempted fails at once', async () => {
    h = await makeLambdaHarness({
      fake: { behaviour: 'recorded', bootMs: 10 },
      tuning: { unknownStateBoundMs: 1, listTtlMs: 0 },
    });
    const id = await launched();
    h.fake.setStatus(id, 'unhealthy');
    assert.equal((await h.provider.get(id)).state, 'pending');
    h.advance(2);
    // Not bounded by the unknown-state timer: the host's provisioning bound decides.
    assert.equal((await h.provider.get(id)).state, 'pending');
    h.fake.setStatus(id, 'preempted');
    assert.equal((await h.provider.get(id)).state, 'failed');
  });
});
