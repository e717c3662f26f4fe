import assert from 'node:assert/strict';
import { LAMBDA_STATE_TABLE } from '../../plugins/lambda/states.js';
import { errorClassOf } from '../../src/providers/provider-http.js';
import type { CreateResult } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import type { FakeEndpoint, FakeFailure, FakeLambdaStatus } from '../fakes/lambda-api.js';
import { makeLambdaHarness, type LambdaHarness } from './lambda-harness.js';

/** `InstanceStatus` as the document enumerates it. */
const DOCUMENTED_STATUSES: FakeLambdaStatus[] = [
  'booting',
  'active',
  'unhealthy',
  'terminated',
  'terminating',
  'preempted',
];

const body = (code: string) => ({ error: { code, message: `message for ${code}`, suggestion: 'a suggestion' } });

type Injection = { status: number; body: unknown } | FakeFailure;

/** Launch failures: the documented 400/401/403/404 bodies, then the undocumented ones that happen. */
const LAUNCH_CASES: [string, Injection, CreateResult['kind']][] = [
  [
    '400 file-system-in-wrong-region',
    { status: 400, body: body('instance-operations/launch/file-system-in-wrong-region') },
    'rejected',
  ],
  [
    '400 insufficient-capacity',
    { status: 400, body: body('instance-operations/launch/insufficient-capacity') },
    'unavailable',
  ],
  ['400 invalid-parameters', { status: 400, body: body('global/invalid-parameters') }, 'rejected'],
  [
    '400 object-does-not-exist (type, region or key)',
    { status: 400, body: body('global/object-does-not-exist') },
    'unavailable',
  ],
  ['400 quota-exceeded', { status: 400, body: body('global/quota-exceeded') }, 'unavailable'],
  ['401 invalid-api-key', { status: 401, body: body('global/invalid-api-key') }, 'rejected'],
  ['403 account-inactive', { status: 403, body: body('global/account-inactive') }, 'rejected'],
  ['403 invalid-address', { status: 403, body: body('global/invalid-address') }, 'rejected'],
  ['404 object-does-not-exist', { status: 404, body: body('global/object-does-not-exist') }, 'unavailable'],
  ['409 duplicate', { status: 409, body: body('global/duplicate') }, 'rejected'],
  ['500 internal-error', { status: 500, body: body('global/internal-error') }, 'ambiguous'],
  ['503 provider/internal-unavailable', { status: 503, body: body('provider/internal-unavailable') }, 'ambiguous'],
  ['400 provider/quota-limit', { status: 400, body: body('provider/quota-limit') }, 'ambiguous'],
  ['502 from a proxy, no Lambda body', { status: 502, body: '<html>Bad Gateway</html>' }, 'ambiguous'],
  ['401 without a body', { status: 401, body: '' }, 'rejected'],
  ['422 with an undocumented code', { status: 422, body: body('global/something-new') }, 'rejected'],
  ['429', '429', 'throttled'],
  ['5xx', '5xx', 'ambiguous'],
  ['dropped connection', 'drop', 'ambiguous'],
  ['no answer', 'hang', 'ambiguous'],
];

/** Reads (get of an unlisted id, the list, terminate, offers): what each failure becomes. */
const READ_CASES: [FakeEndpoint, string, Injection, 'gone' | 'ok' | string][] = [
  ['get', '404 object-does-not-exist', { status: 404, body: body('global/object-does-not-exist') }, 'gone'],
  ['get', '404 without a Lambda body (wrong API_URL)', { status: 404, body: 'Not Found' }, 'request'],
  ['get', '401 invalid-api-key', { status: 401, body: body('global/invalid-api-key') }, 'auth'],
  ['get', '403 account-inactive', { status: 403, body: body('global/account-inactive') }, 'auth'],
  ['get', '500 internal-error', { status: 500, body: body('global/internal-error') }, 'unavailable'],
  ['get', '429', '429', 'rate_limited'],
  ['get', 'no answer', 'hang', 'timeout'],
  ['list', '401 invalid-api-key', { status: 401, body: body('global/invalid-api-key') }, 'auth'],
  ['list', '403 account-inactive', { status: 403, body: body('global/account-inactive') }, 'auth'],
  ['list', '500 internal-error', { status: 500, body: body('global/internal-error') }, 'unavailable'],
  ['list', '200 without a list', { status: 200, body: { data: {} } }, 'bad_response'],
  ['list', 'dropped connection', 'drop', 'unavailable'],
  ['destroy', '404 object-does-not-exist', { status: 404, body: body('global/object-does-not-exist') }, 'ok'],
  ['destroy', '401 invalid-api-key', { status: 401, body: body('global/invalid-api-key') }, 'auth'],
  ['destroy', '403 account-inactive', { status: 403, body: body('global/account-inactive') }, 'auth'],
  // Refused for an id Lambda does not know: the instance's own read says it is gone, which is done.
  ['destroy', '500 internal-error for an unknown id', { status: 500, body: body('global/internal-error') }, 'ok'],
  ['offers', '401 invalid-api-key', { status: 401, body: body('global/invalid-api-key') }, 'auth'],
  ['offers', '403 account-inactive', { status: 403, body: body('global/account-inactive') }, 'auth'],
  ['offers', '5xx', '5xx', 'unavailable'],
];

describe('Lambda error and state tables', () => {
  let h: LambdaHarness;
  const keys = generateDeploymentKeyPair('lambda-errors');
  const inject = (endpoint: FakeEndpoint, what: Injection) =>
    typeof what === 'string' ? h.fake.failNext(endpoint, what) : h.fake.failNextWith(endpoint, what.status, what.body);

  beforeEach(async () => {
    h = await makeLambdaHarness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  for (const [name, injection, kind] of LAUNCH_CASES) {
    it(`launch answered ${name} is ${kind}`, async () => {
      inject('create', injection);
      const label = h.label();
      const res = await h.provider.create(label, h.offer(), keys.publicKey);
      assert.equal(res.kind, kind, JSON.stringify(res));
      assert.doesNotMatch(JSON.stringify(res), new RegExp(h.fake.apiKey));
      const keyLeft = h.fake.sshKeys().some((k) => k.name === label);
      // A definite refusal frees the key; an unknown outcome or a throttle keeps it for the retry.
      assert.equal(keyLeft, kind === 'ambiguous' || kind === 'throttled');
      if (kind === 'throttled') assert.ok((res as { retryAfterMs: number }).retryAfterMs >= 0);
    });
  }

  for (const [endpoint, name, injection, expected] of READ_CASES) {
    it(`${endpoint} answered ${name} is ${expected}`, async () => {
      inject(endpoint, injection);
      const unknownId = 'ffffffffffffffffffffffffffffffff';
      const call = {
        get: () => h.provider.get(unknownId),
        list: () => h.provider.listInstances(),
        destroy: () => h.provider.destroy(unknownId),
        offers: () => h.provider.listOffers(),
      }[endpoint as 'get' | 'list' | 'destroy' | 'offers'];
      if (expected === 'gone') {
        assert.equal(((await call()) as { state: string }).state, 'gone');
      } else if (expected === 'ok') {
        await call();
      } else {
        const err = await call().then(
          () => assert.fail('should have thrown'),
          (e: unknown) => e,
        );
        assert.equal(errorClassOf(err), expected, (err as Error).message);
        assert.doesNotMatch((err as Error).message, new RegExp(h.fake.apiKey));
      }
    });
  }

  it("hands the operator Lambda's code, message and suggestion", async () => {
    h.fake.failNextWith('create', 403, body('global/account-inactive'));
    const res = await h.provider.create(h.label(), h.offer(), keys.publicKey);
    assert.deepEqual(res, {
      kind: 'rejected',
      errorClass: 'auth',
      reason: `LAMBDA_PROVIDER_API_KEY: lambda launch ${h.offer().key}: the account is inactive (403 global/account-inactive: message for global/account-inactive (a suggestion))`,
    });
  });

  it('a key registration Lambda refuses fails the create before any launch', async () => {
    h.fake.failNextWith('ssh-keys', 400, body('global/invalid-parameters'));
    const res = await h.provider.create(h.label(), h.offer(), keys.publicKey);
    assert.equal(res.kind, 'rejected');
    assert.ok(!h.fake.calls.some((c) => c.path.endsWith('/launch')));
  });

  it('a failed label lookup before the launch gets the one shared verdict and launches nothing', async () => {
    h.fake.failNextWith('list', 429, body('global/too-many-requests'));
    assert.equal((await h.provider.create(h.label(), h.offer(), keys.publicKey)).kind, 'throttled');
    h.fake.failNextWith('list', 401, body('global/invalid-api-key'));
    // The kit's verdict carries the class the lookup met, so the host blames the key.
    assert.deepEqual(
      await h.provider
        .create(h.label(), h.offer(), keys.publicKey)
        .then((r) => [r.kind, 'errorClass' in r && r.errorClass]),
      ['rejected', 'auth'],
    );
    h.fake.failNext('list', '5xx');
    assert.equal((await h.provider.create(h.label(), h.offer(), keys.publicKey)).kind, 'ambiguous');
    assert.ok(!h.fake.calls.some((c) => c.path.endsWith('/launch') || c.path.endsWith('/ssh-keys')));
  });

  it('a key registration that fails transiently asks for a retry with the same label, launching nothing', async () => {
    h.fake.failNext('ssh-keys', '5xx');
    const label = h.label();
    const res = await h.provider.create(label, h.offer(), keys.publicKey);
    assert.equal(res.kind, 'throttled');
    assert.ok(!h.fake.calls.some((c) => c.path.endsWith('/launch')));
    assert.equal((await h.provider.create(label, h.offer(), keys.publicKey)).kind, 'created');
  });

  it('maps every documented instance status through the one state table', async () => {
    assert.deepEqual(Object.keys(LAMBDA_STATE_TABLE).sort(), [...DOCUMENTED_STATUSES].sort());
    // What the host must see for each: written out here, not read from the table under test.
    const expected: [FakeLambdaStatus, string][] = [
      ['booting', 'pending'],
      ['active', 'running'],
      ['unhealthy', 'pending'],
    ];
    expected.push(['terminating', 'terminating'], ['terminated', 'gone'], ['preempted', 'failed']);
    const res = await h.provider.create(h.label(), h.offer(), keys.publicKey);
    const id = (res as { instanceId: string }).instanceId;
    assert.deepEqual(expected.map(([s]) => s).sort(), [...DOCUMENTED_STATUSES].sort());
    for (const [status, state] of expected) {
      h.fake.setStatus(id, status);
      const fresh = await h.newProvider();
      const info = await fresh.get(id);
      assert.equal(info.state, state, status);
      assert.equal(info.providerState, status);
    }
  });
});
