import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import dc from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import runpodPlugin from '../../plugins/runpod/index.js';
import { RunpodProvider } from '../../plugins/runpod/provider.js';
import { PRODUCT_USER_AGENT } from '../../src/providers/kit/user-agent.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import type { Provider } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { NO_INSTANCES_DETAIL } from '../fakes/runpod-api.js';
import { waitFor } from '../helpers/wait.js';
import { makeRunpodHarness, NO_LIMITS, type RunpodHarness } from './runpod-harness.js';

const keys = generateDeploymentKeyPair('runpod-v2-only');

/** One HTTP request as Node's fetch (undici) announces it, before any connection is opened. */
interface SentRequest {
  method: string;
  origin: string;
  path: string;
}

/**
 * Every request made inside `run`, from fetch's own announcement (`undici:request:create`): it
 * names requests that never reach the fake too (another host, a refused connection). Requests of
 * anything else running in this process are told apart by their async context.
 */
async function requestsOf<T>(run: () => Promise<T>): Promise<{ result: T; sent: SentRequest[] }> {
  const mine = new AsyncLocalStorage<SentRequest[]>();
  const listener = (message: unknown) => {
    const { request } = message as { request: SentRequest };
    mine.getStore()?.push({ method: request.method, origin: request.origin, path: request.path });
  };
  const sent: SentRequest[] = [];
  dc.subscribe('undici:request:create', listener);
  try {
    return { result: await mine.run(sent, run), sent };
  } finally {
    dc.unsubscribe('undici:request:create', listener);
  }
}

/** The methods of the `Provider` contract, read from its declaration, optional ones included. */
function providerContractMethods(): string[] {
  const path = new URL('../../src/providers/provider.ts', import.meta.url);
  const sf = ts.createSourceFile('provider.ts', readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
  const decl = sf.statements.find(
    (s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === 'Provider',
  );
  assert.ok(decl, 'no interface Provider in src/providers/provider.ts');
  return decl.members.filter(ts.isMethodSignature).map((m) => m.name.getText(sf));
}

/** The error a call threw, which must be a `ProviderApiError`. */
async function apiErrorOf(call: Promise<unknown>): Promise<ProviderApiError> {
  try {
    await call;
  } catch (err) {
    assert.ok(err instanceof ProviderApiError, String(err));
    return err;
  }
  assert.fail('the call succeeded');
}

describe('RunPod: REST v2 only, against the fake', function () {
  this.timeout(60_000);
  let h: RunpodHarness;

  afterEach(async () => {
    await h?.cleanup();
  });

  it('drives every operation of the provider, and every request went to a /v2/ path on the configured origin', async () => {
    // Recorded: cursor pages of two pods, the User-Agent gate, pods without `ssh` before they run.
    h = await makeRunpodHarness({ fake: { behaviour: 'recorded' } });
    const p = h.provider;
    const driven = new Set<string>();
    const drive = <T>(name: keyof Provider & string, call: Promise<T>): Promise<T> => {
      driven.add(name);
      return call;
    };
    const [a, b, c, d] = [h.label(), h.label(), h.label(), h.label()];
    const { sent } = await requestsOf(async () => {
      assert.ok((await drive('listOffers', p.listOffers())).length > 0, 'no offers');
      assert.equal((await drive('check', p.check!())).credentials.accepted, true, 'the check reads with the key');
      const created = await drive('create', p.create(a, h.offer(), keys.publicKey));
      assert.equal(created.kind, 'created', JSON.stringify(created));
      const id = (created as { instanceId: string }).instanceId;
      assert.deepEqual(await p.create(a, h.offer(), keys.publicKey), created, 'a second create adopts the pod');
      const machine = { image: null, env: { MODE: 'v2' }, startupScript: 'true', ports: [8888], diskGb: 40 };
      for (const label of [b, c])
        assert.equal((await p.create(label, h.offer(), keys.publicKey, machine)).kind, 'created');
      h.fake.answerNext('create', { status: 400, detail: NO_INSTANCES_DETAIL });
      assert.equal((await p.create(d, h.offer(), keys.publicKey)).kind, 'unavailable');

      // Three pods, two to a page: the third is found on page 2.
      assert.equal((await drive('findByLabel', p.findByLabel(c)))?.label, c);
      await waitFor(async () => (await drive('get', p.get(id))).state === 'running', { what: `pod ${id} running` });
      const listed = await drive('listInstances', p.listInstances());
      assert.deepEqual(listed.map((i) => i.label).sort(), [a, b, c].sort());

      for (const i of listed) await drive('destroy', p.destroy(i.instanceId));
      // No longer in the list: `get` asks for the pod itself, and RunPod's 404 says it is gone.
      assert.equal((await p.get(id)).state, 'gone');
      await p.destroy(id);
      assert.deepEqual(await p.listInstances(), []);
    });

    const contract = providerContractMethods();
    assert.ok(contract.includes('listInstances') && contract.includes('create'), contract.join(', '));
    const implemented = contract.filter((m) => typeof (p as unknown as Record<string, unknown>)[m] === 'function');
    assert.deepEqual(
      implemented.filter((m) => !driven.has(m)),
      [],
      'RunpodProvider has a Provider method this test does not drive: drive it above, so its calls are checked too',
    );

    const origin = new URL(h.fake.url).origin;
    assert.ok(sent.length >= 10, `only ${sent.length} requests seen`);
    assert.deepEqual(
      sent.filter((r) => r.origin !== origin || !r.path.startsWith('/v2/')),
      [],
      `requests that did not go to ${origin}/v2/`,
    );
    // Every request announced reached the fake (nothing went elsewhere), and the fake saw v2 paths only.
    assert.equal(h.fake.calls.length, sent.length);
    assert.deepEqual(
      h.fake.calls.filter((c) => !c.path.startsWith('/v2/')),
      [],
    );
    const seen = new Set(
      h.fake.calls.map((c) => `${c.method} ${c.path.replace(/^\/v2\/pods\/[^/]+$/, '/v2/pods/{id}')}`),
    );
    assert.deepEqual([...seen].sort(), [
      'DELETE /v2/pods/{id}',
      'GET /v2/catalog/gpus',
      'GET /v2/pods',
      'GET /v2/pods/{id}',
      'POST /v2/pods',
    ]);
    assert.ok(
      h.fake.calls.some((c) => c.path === '/v2/pods' && new URLSearchParams(c.query).has('cursor')),
      'the list was read past its first page',
    );
  });

  it('answers a v1 path 410 Gone with a problem document naming the retirement, whatever the method or key', async () => {
    h = await makeRunpodHarness({ fake: { behaviour: 'recorded' } });
    const ask = (method: string, path: string, headers: Record<string, string> = {}) =>
      fetch(`${h.fake.url}${path}`, {
        method,
        headers: { 'User-Agent': PRODUCT_USER_AGENT, ...headers },
        ...(method === 'POST' ? { body: '{"name":"x"}' } : {}),
      });
    const good = { Authorization: `Bearer ${h.fake.apiKey}` };
    for (const [method, path, headers] of [
      ['GET', '/v1/pods', good],
      ['POST', '/v1/pods', { ...good, 'Content-Type': 'application/json' }],
      ['DELETE', '/v1/pods/abc', { Authorization: 'Bearer wrong' }],
      ['GET', '/v1', {}],
    ] as const) {
      const res = await ask(method, path, headers);
      assert.equal(res.status, 410, `${method} ${path}`);
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
      const body = (await res.json()) as { title: string; status: number; detail: string };
      assert.equal(body.title, 'Gone');
      assert.equal(body.status, 410);
      assert.match(body.detail, /REST API v1 was retired on 2026-11-15/);
      assert.match(body.detail, /REST API v2/);
    }
    // The edge in front of every path still answers a runtime's User-Agent first.
    const edge = await fetch(`${h.fake.url}/v1/pods`, { headers: { 'User-Agent': 'node' } });
    assert.deepEqual([edge.status, (await edge.text()).trim()], [403, 'error code: 1010']);
    // GraphQL is not served: the plugin makes no GraphQL call.
    const graphql = await ask('POST', '/graphql', good);
    assert.equal(graphql.status, 404);
    assert.match(((await graphql.json()) as { detail: string }).detail, /serves no GraphQL/);
    // The v2 surface answers as before.
    assert.equal((await ask('GET', '/v2/pods', good)).status, 200);
  });

  it('turns the retired answer into an error saying so, should the client ever be pointed at v1', async () => {
    h = await makeRunpodHarness();
    const v1 = `${h.fake.url}/v1`;
    // The only way there would be a value with a path, which the options refuse at start.
    assert.throws(
      () => runpodPlugin.validateOptions({ API_KEY: h.fake.apiKey, API_URL: v1 }),
      /RUNPOD_PROVIDER_API_URL .*RunPod retired REST v1 .*: give the origin only/,
    );
    const options = { ...runpodPlugin.validateOptions({ API_KEY: h.fake.apiKey, API_URL: h.fake.url }), apiUrl: v1 };
    const p = new RunpodProvider(options, h.deps, { limits: NO_LIMITS, pollTtlMs: 0, timeoutMs: 2000 });
    const reads: [string, () => Promise<unknown>][] = [
      ['listOffers', () => p.listOffers()],
      ['findByLabel', () => p.findByLabel(h.label())],
      ['get', () => p.get('abcdefghijklmn')],
      ['destroy', () => p.destroy('abcdefghijklmn')],
      ['listInstances', () => p.listInstances()],
    ];
    for (const [name, call] of reads) {
      const err = await apiErrorOf(call());
      assert.equal(err.errorClass, 'request', name);
      assert.equal(err.status, 410, name);
      assert.match(err.message, /RunPod has retired this API path \(410 Gone/, name);
      assert.match(err.message, /REST API v1 was retired on 2026-11-15/, name);
    }
    const created = await p.create(h.label(), h.offer(), keys.publicKey);
    assert.equal(created.kind, 'rejected');
    assert.equal((created as { errorClass?: string }).errorClass, 'request');
    assert.match(created.kind === 'rejected' ? created.reason : '', /retired this API path/);
    assert.ok(h.fake.calls.length >= reads.length + 1);
    assert.deepEqual(
      h.fake.calls.filter((c) => !c.path.startsWith('/v1/v2/')),
      [],
    );
    assert.deepEqual(h.fake.instances(), [], 'nothing was created');
  });

  it('reads a 410 on a v2 path (a later retirement) the same way, whatever its body says', async () => {
    h = await makeRunpodHarness();
    const gone = { status: 410, title: 'Gone', detail: 'This resource is no longer available.' };
    h.fake.answerNext('list', gone);
    const err = await apiErrorOf(h.provider.listInstances());
    assert.deepEqual([err.errorClass, err.status], ['request', 410]);
    assert.match(err.message, /^runpod GET \/v2\/pods: 410 RunPod has retired this API path/);

    h.fake.answerNext('create', gone);
    const created = await h.provider.create(h.label(), h.offer(), keys.publicKey);
    assert.deepEqual(
      [created.kind, (created as { errorClass?: string }).errorClass],
      ['rejected', 'request'],
      JSON.stringify(created),
    );
    assert.ok(
      h.logs.some((l) => l.level === 'error' && /retired this API path/.test(String(l.reason))),
      'the refused create is logged as an error for the operator',
    );
  });
});
