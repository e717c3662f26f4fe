import assert from 'node:assert/strict';
import { ProviderApiError } from '../../src/providers/provider-http.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, sshProbe } from '../../src/providers/ssh-probe.js';
import { FAKE_VAST_OFFERS } from '../fakes/vast-api.js';
import { waitForRunning } from './provider-contract.js';
import { makeVastHarness, type VastHarness } from './vast-harness.js';

describe('vast listing, polling and destroy', () => {
  let h: VastHarness;
  const keys = generateDeploymentKeyPair('vast-listing');
  const ask = FAKE_VAST_OFFERS[0].id;
  const lists = () => h.fake.calls.filter((c) => c.method === 'GET' && c.path === '/api/v1/instances/');
  async function createMany(n: number, provider = h.provider, label = () => h.label()): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await provider.create(label(), h.offer(ask), keys.publicKey);
      assert.equal(r.kind, 'created');
      out.push((r as { instanceId: string }).instanceId);
    }
    return out;
  }

  beforeEach(async () => {
    h = await makeVastHarness();
    h.fake.setBootMs(0);
  });
  afterEach(async () => h.cleanup());

  it('listInstances pages with after_token until next_token is null, and keeps only our prefix', async function () {
    this.timeout(30_000);
    const ours = await createMany(27);
    const foreign = await createMany(2, h.provider, () => `someone-else-${Math.random()}`);
    h.fake.calls.length = 0;
    const listed = await h.provider.listInstances();
    assert.deepEqual(listed.map((i) => i.instanceId).sort(), [...ours].sort());
    assert.ok(
      listed.every((i) => i.label.startsWith(h.labelPrefix) && i.state === 'running' && i.ssh?.user === 'root'),
    );
    assert.ok(!listed.some((i) => foreign.includes(i.instanceId)));
    const pages = lists();
    assert.equal(pages.length, 2);
    assert.equal(pages[0].query.limit, '25');
    assert.equal(pages[0].query.after_token, undefined);
    assert.ok(pages[1].query.after_token);
    assert.equal(h.fake.calls.filter((c) => c.path === '/api/v0/instances/').length, 0, 'never the deprecated v0 list');
  });

  it('findByLabel filters the v1 list by label server-side', async () => {
    const label = h.label();
    const [id] = await createMany(1, h.provider, () => label);
    await createMany(2);
    h.fake.calls.length = 0;
    const found = await h.provider.findByLabel(label);
    assert.equal(found?.instanceId, id);
    assert.deepEqual(JSON.parse(lists()[0].query.select_filters), { label: { eq: label } });
    assert.equal(await h.provider.findByLabel(`${h.labelPrefix}nobody`), null);
  });

  it('a 410 or any failure on any page is an error, never "no instances"', async () => {
    await createMany(26);
    h.fake.respondNext('list', 410, {
      success: false,
      error: 'deprecated_endpoint',
      msg: 'This endpoint is deprecated.',
    });
    await assert.rejects(
      h.provider.listInstances(),
      (e: ProviderApiError) => e.errorClass === 'request' && e.status === 410,
    );
    // The second page fails: the first page alone must not pass for the whole list.
    const fresh = h.newProvider({ tuning: { listTtlMs: 0 } });
    const first = h.fake.instances()[0];
    const page = { id: Number(first.id), label: first.label, actual_status: 'running' };
    h.fake.respondNext('list', 200, { success: true, instances: [page], next_token: 'eyJ2YWx1ZXMiOiB7ImlkIjogMX19' });
    h.fake.failNext('list', '5xx');
    await assert.rejects(
      fresh.listInstances(),
      (e: ProviderApiError) => e.errorClass === 'unavailable' && e.status === 502,
    );
    const ids = h.fake.calls.filter((c) => c.path === '/api/v1/instances/').slice(-2);
    assert.equal(ids[1].query.after_token, 'eyJ2YWx1ZXMiOiB7ImlkIjogMX19');
    h.fake.respondNext('list', 200, { success: true, instances: [], next_token: null });
    assert.deepEqual(await fresh.listInstances(), [], 'an empty answer is "none"');
  });

  it('many polls share one list call', async function () {
    this.timeout(20_000);
    const ids = await createMany(12);
    const p = h.newProvider({ tuning: { listTtlMs: 60_000 } });
    h.fake.calls.length = 0;
    const infos = await Promise.all(ids.map((id) => p.get(id)));
    assert.deepEqual(
      infos.map((i) => i.instanceId),
      ids,
    );
    assert.ok(infos.every((i) => i.state === 'running' && i.ssh));
    await Promise.all(ids.map((id) => p.get(id)));
    assert.deepEqual(
      h.fake.calls.map((c) => `${c.method} ${c.path}`),
      ['GET /api/v1/instances/'],
    );
  });

  it('an id missing from a cached list is asked for directly, so a fresh instance never reads as gone', async () => {
    const other = h.newProvider({ tuning: { listTtlMs: 60_000 } });
    await other.listInstances();
    const [id] = await createMany(1);
    const info = await other.get(id);
    assert.equal(info.state, 'running');
    assert.ok(
      h.fake.calls.some((c) => c.method === 'GET' && c.path === `/api/v0/instances/${id}/` && c.query.owner === 'me'),
    );
  });

  it('reports pending while Vast loads, and SSH only once the IP and port 22 mapping both exist', async () => {
    h.fake.setBootMs(400);
    const [id] = await createMany(1);
    const early = await h.provider.get(id);
    assert.deepEqual([early.state, early.providerState, early.ssh], ['pending', 'loading', undefined]);
    const info = await waitForRunning(h.provider, id);
    assert.equal(info.ssh.port, Number(h.fake.instances()[0].sshPort));
  });

  it('maps what the host reports: exited and offline fail, frozen stops, running again runs', async () => {
    const p = h.newProvider({ tuning: { listTtlMs: 0 } });
    const [id] = await createMany(1, p);
    for (const [actual, ours] of [
      ['exited', 'failed'],
      ['offline', 'failed'],
      ['frozen', 'stopped'],
      ['running', 'running'],
    ] as const) {
      h.fake.setStatus(id, actual);
      const info = await p.get(id);
      assert.deepEqual([info.state, info.providerState, info.ssh === undefined], [ours, actual, actual !== 'running']);
    }
  });

  it('a create without cancel_unavail:true on a full ask leaves a stopped instance; ours never does', async () => {
    h.fake.noCapacity(String(ask));
    const sent = await fetch(`${h.fake.url}/api/v0/asks/${ask}/`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${h.fake.apiKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        client_id: 'me',
        image: 'vastai/base-image:cuda-12.4.1-auto',
        label: `${h.labelPrefix}sdk`,
        cancel_unavail: false,
      }),
    });
    const { new_contract: stray } = (await sent.json()) as { new_contract: number };
    assert.equal((await h.provider.get(String(stray))).state, 'stopped');
    assert.equal((await h.provider.create(h.label(), h.offer(ask), keys.publicKey)).kind, 'unavailable');
    assert.deepEqual(
      h.fake.instances().map((i) => i.id),
      [String(stray)],
    );
  });

  it('a forgotten instance reads as gone while its SSH still lets the key in (the host catches the ghost)', async () => {
    const p = h.newProvider({ tuning: { listTtlMs: 0 } });
    const [id] = await createMany(1, p);
    const info = await waitForRunning(p, id);
    h.fake.forget(id);
    assert.equal((await p.get(id)).state, 'gone');
    assert.equal(await p.findByLabel(info.label), null);
    assert.equal((await sshExec({ ...info.ssh, privateKey: keys.privateKey }, 'echo ghost')).stdout, 'ghost\n');
  });

  it('destroy deletes the instance, stops its SSH, and succeeds again on 404 not_found', async () => {
    const [id] = await createMany(1);
    const info = await waitForRunning(h.provider, id);
    await h.provider.destroy(id);
    await h.provider.destroy(id);
    const deletes = h.fake.calls.filter((c) => c.method === 'DELETE');
    assert.deepEqual(
      deletes.map((c) => [c.path, c.status]),
      [
        [`/api/v0/instances/${id}/`, 200],
        [`/api/v0/instances/${id}/`, 404],
      ],
    );
    assert.deepEqual(await h.provider.get(id), {
      instanceId: id,
      label: '',
      state: 'gone',
      providerState: 'destroyed',
    });
    assert.equal((await sshProbe({ ...info.ssh, privateKey: keys.privateKey }, { timeoutMs: 1000 })).ok, false);
    await h.provider.afterDestroyed(info.label);
  });

  it('ids that cannot be Vast ids are gone without a call', async () => {
    assert.equal((await h.provider.get('not-a-number')).state, 'gone');
    await h.provider.destroy('../../etc');
    assert.deepEqual(h.fake.calls, []);
  });
});
