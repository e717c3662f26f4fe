import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { VastProvider } from '../../plugins/vast/provider.js';
import { createLogger } from '../../src/logger.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import type { CreateResult, ProviderErrorClass } from '../../src/providers/provider.js';
import { FAKE_VAST_OFFERS, type VastEndpoint, type VastFailure } from '../fakes/vast-api.js';
import { FAST_TUNING, makeVastHarness, type VastHarness } from './vast-harness.js';

const fixtureText = (file: string): string =>
  readFileSync(new URL(`../fixtures/providers/vast/${file}`, import.meta.url), 'utf8');
const fixture = (file: string): unknown => JSON.parse(fixtureText(file));

/** An answer as the fake sends it: a documented status and body, or a transport failure. */
type Answer = { status: number; body: unknown; contentType?: string } | VastFailure;

const ask = FAKE_VAST_OFFERS[0].id;
const authError = { success: false, error: 'auth_error', msg: 'Invalid user key' };
const tooFrequent = (t: number) => ({
  status: 429,
  body: `API requests too frequent endpoint threshold=${t}`,
  contentType: 'text/plain',
});

/** Every documented (and observed) answer to PUT /api/v0/asks/{id}/ and what the host is told. */
const CREATE_CASES: { name: string; answer: Answer; kind: CreateResult['kind'] }[] = [
  {
    name: '400 invalid_args',
    answer: {
      status: 400,
      body: {
        success: false,
        error: 'invalid_args',
        msg: "error 400/3467: Invalid args: 'id' is required and must be a valid offer ID",
        ask_id: ask,
      },
    },
    kind: 'rejected',
  },
  {
    name: '400 invalid_price',
    answer: { status: 400, body: { success: false, error: 'invalid_price', msg: 'invalid price', ask_id: ask } },
    kind: 'rejected',
  },
  {
    name: '400 no_ssh_key_for_vm',
    answer: {
      status: 400,
      body: { success: false, error: 'no_ssh_key_for_vm', msg: 'VM instances need an SSH key', ask_id: ask },
    },
    kind: 'rejected',
  },
  {
    name: '400 team_ssh_keys_not_supported',
    answer: {
      status: 400,
      body: { success: false, error: 'team_ssh_keys_not_supported', msg: 'team keys cannot manage ssh keys' },
    },
    kind: 'rejected',
  },
  { name: '401 auth_error', answer: { status: 401, body: authError }, kind: 'rejected' },
  {
    name: '403 not your own offer',
    answer: {
      status: 403,
      body: {
        success: false,
        error: 'invalid_args',
        msg: `error 403/3586: Offer ${ask} is not your own. Hosts can only rent their own machines.`,
        ask_id: ask,
      },
    },
    kind: 'rejected',
  },
  { name: '404 auth_error (observed for a wrong key)', answer: { status: 404, body: authError }, kind: 'rejected' },
  {
    name: '404 no_such_ask named in msg',
    answer: {
      status: 404,
      body: {
        success: false,
        error: 'invalid_args',
        msg: `error 404/3603: no_such_ask Instance type by id ${ask} is not available.`,
        ask_id: ask,
      },
    },
    kind: 'unavailable',
  },
  {
    name: '404 no_such_ask as the code',
    answer: { status: 404, body: { success: false, error: 'no_such_ask', msg: 'gone' } },
    kind: 'unavailable',
  },
  // Live (test/fixtures/providers/vast/create-400-no-such-ask*.json): a taken ask under HTTP 400.
  {
    name: '400 invalid_args naming no_such_ask in msg (recorded)',
    answer: { status: 400, body: fixture('create-400-no-such-ask.json') },
    kind: 'unavailable',
  },
  {
    name: '400 with the whole no_such_ask text in error (recorded)',
    answer: { status: 400, body: fixture('create-400-no-such-ask-error-field.json') },
    kind: 'unavailable',
  },
  {
    name: '400 invalid_args with the recorded detail text as msg',
    answer: {
      status: 400,
      body: { success: false, error: 'invalid_args', msg: fixtureText('create-400-no-such-ask-detail.txt').trim() },
    },
    kind: 'unavailable',
  },
  {
    name: '410 no_such_ask (cancel_unavail)',
    answer: {
      status: 410,
      body: {
        success: false,
        error: 'no_such_ask',
        msg: `error 410/3907: no_such_ask Instance type ${ask} is no longer available.`,
        ask_id: ask,
      },
    },
    kind: 'unavailable',
  },
  {
    name: '429 JSON detail',
    answer: { status: 429, body: { detail: 'API requests too frequent endpoint threshold=4.5' } },
    kind: 'throttled',
  },
  { name: '429 plain text, no Retry-After', answer: tooFrequent(4.5), kind: 'throttled' },
  {
    name: '500',
    answer: { status: 500, body: { success: false, error: 'server_error', msg: 'Internal error' } },
    kind: 'ambiguous',
  },
  { name: '502 HTML', answer: '5xx', kind: 'ambiguous' },
  {
    name: '503 plain text',
    answer: { status: 503, body: 'Service Unavailable', contentType: 'text/plain' },
    kind: 'ambiguous',
  },
  {
    name: '402 (undocumented refusal)',
    answer: { status: 402, body: { success: false, error: 'insufficient_credit', msg: 'add credit' } },
    kind: 'rejected',
  },
  { name: '200 without new_contract', answer: { status: 200, body: { success: false } }, kind: 'ambiguous' },
  { name: 'no answer (hang)', answer: 'hang', kind: 'ambiguous' },
  { name: 'dropped connection', answer: 'drop', kind: 'ambiguous' },
];

/** Reads throw `ProviderApiError` with a class; destroy's 404 not_found means success. */
const READ_CASES: { name: string; endpoint: VastEndpoint; answer: Answer; cls: ProviderErrorClass | 'ok' }[] = [
  {
    name: 'offers 400 invalid_request',
    endpoint: 'offers',
    answer: { status: 400, body: { error: 'invalid_request', msg: 'Invalid json body' } },
    cls: 'request',
  },
  {
    name: 'offers 404 Invalid user key (documented)',
    endpoint: 'offers',
    answer: { status: 404, body: { msg: 'Invalid user key' } },
    cls: 'auth',
  },
  {
    name: 'offers 404 auth_error (observed)',
    endpoint: 'offers',
    answer: { status: 404, body: authError },
    cls: 'auth',
  },
  { name: 'offers 429', endpoint: 'offers', answer: '429', cls: 'rate_limited' },
  { name: 'offers 502', endpoint: 'offers', answer: '5xx', cls: 'unavailable' },
  {
    name: 'offers 200 without offers',
    endpoint: 'offers',
    answer: { status: 200, body: { result: [] } },
    cls: 'bad_response',
  },
  { name: 'offers hang', endpoint: 'offers', answer: 'hang', cls: 'timeout' },
  { name: 'offers dropped', endpoint: 'offers', answer: 'drop', cls: 'unavailable' },
  {
    name: 'list 410 deprecated_endpoint',
    endpoint: 'list',
    answer: { status: 410, body: { success: false, error: 'deprecated_endpoint', msg: 'use /api/v1/instances/' } },
    cls: 'request',
  },
  {
    name: 'list 400 invalid_token',
    endpoint: 'list',
    answer: { status: 400, body: { error: 'invalid_token', msg: 'Invalid after_token' } },
    cls: 'request',
  },
  { name: 'list 401', endpoint: 'list', answer: { status: 401, body: authError }, cls: 'auth' },
  {
    name: 'list 429 JSON',
    endpoint: 'list',
    answer: { status: 429, body: { detail: 'API requests too frequent endpoint threshold=1.0' } },
    cls: 'rate_limited',
  },
  {
    name: 'list 200 without instances',
    endpoint: 'list',
    answer: { status: 200, body: { success: true } },
    cls: 'bad_response',
  },
  { name: 'get 401 auth_error', endpoint: 'get', answer: { status: 401, body: authError }, cls: 'auth' },
  {
    name: 'get 400 invalid_args',
    endpoint: 'get',
    answer: {
      status: 400,
      body: { success: false, error: 'invalid_args', msg: 'error 400/1782: Invalid args: invalid json: {}' },
    },
    cls: 'request',
  },
  {
    name: 'get 429',
    endpoint: 'get',
    answer: { status: 429, body: { detail: 'API requests too frequent endpoint threshold=2.0' } },
    cls: 'rate_limited',
  },
  { name: 'get 200 without instances', endpoint: 'get', answer: { status: 200, body: {} }, cls: 'bad_response' },
  {
    name: 'destroy 404 not_found',
    endpoint: 'destroy',
    answer: { status: 404, body: { success: false, error: 'not_found', msg: 'Instance not found' } },
    cls: 'ok',
  },
  {
    name: 'destroy 404 no_such_instance (recorded)',
    endpoint: 'destroy',
    answer: { status: 404, body: fixture('destroy-404-no-such-instance.json') },
    cls: 'ok',
  },
  {
    name: 'destroy 200 success:false no_such_instance (recorded)',
    endpoint: 'destroy',
    answer: { status: 200, body: fixture('destroy-200-no-such-instance.json') },
    cls: 'ok',
  },
  {
    name: 'destroy 200 success:false for another reason destroyed nothing',
    endpoint: 'destroy',
    answer: { status: 200, body: { success: false, error: 'server_busy', msg: 'try again' } },
    cls: 'bad_response',
  },
  { name: 'destroy 404 auth_error', endpoint: 'destroy', answer: { status: 404, body: authError }, cls: 'auth' },
  {
    name: 'destroy 400 invalid_args',
    endpoint: 'destroy',
    answer: { status: 400, body: { success: false, error: 'invalid_args', msg: 'invalid instance_id' } },
    cls: 'request',
  },
  {
    name: 'destroy 429 rate_limit_exceeded',
    endpoint: 'destroy',
    answer: {
      status: 429,
      body: { success: false, error: 'rate_limit_exceeded', msg: 'API requests too frequent endpoint threshold=3.0' },
    },
    cls: 'rate_limited',
  },
  { name: 'destroy 502', endpoint: 'destroy', answer: '5xx', cls: 'unavailable' },
];

function arrange(h: VastHarness, endpoint: VastEndpoint, answer: Answer): void {
  if (typeof answer === 'string') h.fake.failNext(endpoint, answer);
  else h.fake.respondNext(endpoint, answer.status, answer.body, answer.contentType);
}

async function readOutcome(h: VastHarness, endpoint: VastEndpoint): Promise<ProviderErrorClass | 'ok'> {
  const call: Record<string, () => Promise<unknown>> = {
    offers: () => h.provider.listOffers(),
    list: () => h.provider.listInstances(),
    // 12345678 is never in the (empty) list, so get asks GET /api/v0/instances/{id}/.
    get: () => h.provider.get('12345678'),
    destroy: () => h.provider.destroy('12345678'),
  };
  try {
    await call[endpoint]();
    return 'ok';
  } catch (err) {
    assert.ok(err instanceof ProviderApiError, `${endpoint} threw ${(err as Error).stack}`);
    assert.doesNotMatch(err.message, new RegExp(h.fake.apiKey));
    return err.errorClass;
  }
}

describe('vast error table', () => {
  let h: VastHarness;
  const key = generateDeploymentKeyPair('vast-errors').publicKey;
  beforeEach(async () => {
    h = await makeVastHarness({ tuning: { timeoutMs: 1000 } });
  });
  afterEach(async () => h.cleanup());

  for (const c of CREATE_CASES) {
    it(`create: ${c.name} → ${c.kind}`, async () => {
      arrange(h, 'create', c.answer);
      const res = await h.provider.create(h.label(), h.offer(ask), key);
      assert.equal(res.kind, c.kind, JSON.stringify(res));
      assert.doesNotMatch(JSON.stringify(res), new RegExp(h.fake.apiKey));
      if (res.kind === 'throttled') assert.ok(res.retryAfterMs > 0);
      if (c.kind !== 'ambiguous') assert.deepEqual(h.fake.instances(), [], 'nothing was created');
    });
  }

  for (const c of READ_CASES) {
    it(`${c.endpoint}: ${c.name} → ${c.cls}`, async () => {
      arrange(h, c.endpoint, c.answer);
      assert.equal(await readOutcome(h, c.endpoint), c.cls);
    });
  }

  it('a failed label look-up before the create is throttled, rejected or ambiguous and sends no create', async () => {
    h.fake.failNext('list', '429');
    assert.equal((await h.provider.create(h.label(), h.offer(ask), key)).kind, 'throttled');
    h.fake.respondNext('list', 401, authError);
    assert.equal((await h.provider.create(h.label(), h.offer(ask), key)).kind, 'rejected');
    h.fake.failNext('list', '5xx');
    assert.equal((await h.provider.create(h.label(), h.offer(ask), key)).kind, 'ambiguous');
    assert.equal(h.fake.calls.filter((c) => c.method === 'PUT').length, 0);
  });

  it('a wrong API key is a rejected create and an auth error on reads (observed 404 auth_error)', async () => {
    const wrong = h.newProvider({ raw: { API_KEY: 'not-the-key' } });
    assert.equal((await wrong.create(h.label(), h.offer(ask), key)).kind, 'rejected');
    await assert.rejects(wrong.listOffers(), (e: ProviderApiError) => e.errorClass === 'auth' && e.status === 404);
    await assert.rejects(wrong.get('31000001'), (e: ProviderApiError) => e.errorClass === 'auth');
    assert.equal(h.fake.calls.filter((c) => c.status === 404).length, 3);
  });

  it('show-instance answering gone in any recorded form reads as gone', async () => {
    for (const body of [
      fixture('show-instance-null-after-destroy.json'),
      fixture('show-instance-empty-array-after-destroy.json'),
      { instances: 'gone' },
      { instances: { ...(fixture('show-instance-destroyed.json') as object), id: 12345678 } },
    ]) {
      h.fake.respondNext('get', 200, body);
      assert.equal((await h.provider.get('12345678')).state, 'gone', JSON.stringify(body));
    }
    h.fake.respondNext('get', 404, fixture('destroy-404-no-such-instance.json'));
    assert.equal((await h.provider.get('12345678')).state, 'gone');
    h.fake.respondNext('get', 200, { instances: [{ id: 12345678, label: 'x', actual_status: 'running' }] });
    assert.equal((await h.provider.get('12345678')).state, 'running', 'a list holding the instance is that instance');
  });

  it('a refused create names the variable to fix in its reason; the plugin itself logs nothing for it (the host logs the reason once)', async () => {
    const cases: [unknown, number, RegExp, string][] = [
      [
        { success: false, error: 'invalid_args', msg: "error 400/3467: Invalid args: 'image' is required" },
        400,
        /^VAST_PROVIDER_IMAGE: /,
        'request',
      ],
      [
        { success: false, error: 'invalid_args', msg: 'error 400/3467: Invalid args: disk' },
        400,
        /^VAST_PROVIDER_DISK_GB: /,
        'request',
      ],
      [{ success: false, error: 'auth_error', msg: 'Invalid user key' }, 404, /^VAST_PROVIDER_API_KEY: /, 'auth'],
      [
        { success: false, error: 'team_ssh_keys_not_supported', msg: 'team keys' },
        400,
        /^VAST_PROVIDER_API_KEY: /,
        'request',
      ],
      [
        { success: false, error: 'insufficient_credit', msg: 'add credit' },
        402,
        /^the account of VAST_PROVIDER_API_KEY: /,
        'request',
      ],
      [
        { success: false, error: 'invalid_args', msg: 'label too long' },
        400,
        /^VAST_PROVIDER_IMAGE or VAST_PROVIDER_DISK_GB: /,
        'request',
      ],
    ];
    for (const [body, status, want, errorClass] of cases) {
      h.fake.respondNext('create', status, body);
      const res = await h.provider.create(h.label(), h.offer(ask), key);
      assert.equal(res.kind, 'rejected');
      assert.match((res as { reason: string }).reason, want);
      assert.equal((res as { errorClass?: string }).errorClass, errorClass);
      assert.doesNotMatch((res as { reason: string }).reason, new RegExp(h.fake.apiKey));
    }
  });

  it('logs refusals loudly without the API key', async () => {
    const lines: string[] = [];
    const logger = createLogger('debug', { write: (l: string) => void lines.push(l) });
    const p = new VastProvider(h.options, { ...h.deps, logger }, FAST_TUNING);
    try {
      h.fake.respondNext('create', 400, { success: false, error: 'invalid_args', msg: 'bad image' });
      const refused = await p.create(h.label(), h.offer(ask), key);
      assert.equal(refused.kind, 'rejected');
      assert.match((refused as { reason: string }).reason, /^VAST_PROVIDER_IMAGE: .*HTTP 400 invalid_args: bad image/);
      h.fake.failNext('offers', '429');
      await assert.rejects(p.listOffers());
      h.fake.respondNext('attach', 401, authError);
      await p.create(h.label(), h.offer(ask), key);
    } finally {
      await p.close();
    }
    const errors = lines.map((l) => JSON.parse(l)).filter((l) => l.level === 'error');
    assert.deepEqual(
      errors.map((e) => e.msg),
      ['vast refused our SSH key for the instance; it will read as failed'],
    );
    assert.ok(lines.some((l) => l.includes('backing off')));
    assert.ok(!lines.some((l) => l.includes(h.fake.apiKey)));
  });
});
