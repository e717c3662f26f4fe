import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { FakeVastApi, recordedVastOffer, REPRICED_OFFER, TRAFFIC_BILLED_OFFERS } from '../fakes/vast-api.js';
import { waitFor } from '../helpers/wait.js';

const fixture = (file: string): unknown =>
  JSON.parse(readFileSync(new URL(`../fixtures/providers/vast/${file}`, import.meta.url), 'utf8'));

/** The fake's recorded mode serves the live answers kept in test/fixtures/providers/vast/, quirk by quirk. */
describe('FakeVastApi recorded mode', () => {
  let fake: FakeVastApi;

  afterEach(async () => {
    await fake?.close();
  });

  async function call(method: string, path: string, body?: unknown) {
    const res = await fetch(`${fake.url}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${fake.apiKey}`,
        'User-Agent': 'gpu-rental/test',
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- wire bodies of many shapes, read field by field
    return { status: res.status, json: (await res.json()) as any };
  }

  const create = (askId: number, extra: Record<string, unknown> = {}) =>
    call('PUT', `/api/v0/asks/${askId}/`, { image: 'vastai/base-image:cuda-12.4', label: 'rec', disk: 10, ...extra });
  const show = (id: number | string) => call('GET', `/api/v0/instances/${id}/`);

  async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string): Promise<T> {
    let last: T | undefined;
    const seen = await waitFor(
      async () => {
        last = await read();
        return ok(last) && { value: last };
      },
      { timeoutMs: 5000, intervalMs: 20, what: () => `${what}; last ${JSON.stringify(last)}` },
    );
    return seen.value;
  }

  it('is documented by default: a taken ask is 404, destroying the unknown is not_found, a gone instance shows null', async () => {
    fake = await FakeVastApi.start();
    assert.ok(Object.values(fake.quirks).every((q) => q === false));
    assert.deepEqual([(await create(999)).status, (await create(999)).json.error], [404, 'invalid_args']);
    const gone = await call('DELETE', '/api/v0/instances/999999/');
    assert.deepEqual([gone.status, gone.json.error], [404, 'not_found']);
    assert.deepEqual((await show(999999)).json, { instances: null });
  });

  it('answers a taken ask with HTTP 400 no_such_ask in both recorded forms, in turn', async () => {
    fake = await FakeVastApi.start({ behaviour: 'recorded' });
    const first = await create(999);
    assert.equal(first.status, 400);
    assert.deepEqual(first.json, fixture('create-400-no-such-ask.json'));
    const second = await create(999);
    assert.equal(second.status, 400);
    assert.deepEqual(second.json, fixture('create-400-no-such-ask-error-field.json'));
    // The msg form names the ask that was asked for; an ask taken by `noCapacity` answers the same way.
    fake.noCapacity('H100 SXM');
    const third = await create(7100001);
    assert.equal(third.status, 400);
    assert.equal(third.json.error, 'invalid_args');
    assert.equal(third.json.msg, 'error 404/3603: no_such_ask Instance type by id 7100001 is not available.');
    assert.equal(third.json.ask_id, 7100001);
  });

  it('pins one form of a quirk, and carries a single quirk in documented mode', async () => {
    fake = await FakeVastApi.start({ quirks: { takenAsk: 'error-field' } });
    for (let i = 0; i < 2; i++)
      assert.deepEqual(await create(999), { status: 400, json: fixture('create-400-no-such-ask-error-field.json') });
    assert.equal(
      (await call('DELETE', '/api/v0/instances/999999/')).json.error,
      'not_found',
      'other quirks stay documented',
    );
    fake.setQuirk('takenAsk', false);
    assert.equal((await create(999)).status, 404);
    await assert.rejects(FakeVastApi.start({ quirks: { nope: true } }), /unknown quirk nope/);
  });

  it('answers a destroy of what is gone with no_such_instance under 404, then under 200', async () => {
    fake = await FakeVastApi.start({ behaviour: 'recorded', bootMs: 0 });
    assert.deepEqual(await call('DELETE', '/api/v0/instances/999999/'), {
      status: 404,
      json: fixture('destroy-404-no-such-instance.json'),
    });
    const id = (await create(7100001)).json.new_contract;
    assert.equal((await call('DELETE', `/api/v0/instances/${id}/`)).status, 200);
    assert.deepEqual(await call('DELETE', `/api/v0/instances/${id}/`), {
      status: 200,
      json: fixture('destroy-200-no-such-instance.json'),
    });
    const again = await call('DELETE', `/api/v0/instances/${id}/`);
    assert.deepEqual(
      [again.status, again.json.error, again.json.msg],
      [404, 'no_such_instance', `Instance ${id} not found.`],
    );
  });

  it('shows a destroyed instance as null, then [], then an object reading destroyed', async () => {
    fake = await FakeVastApi.start({ behaviour: 'recorded', bootMs: 0 });
    const id = (await create(7100001)).json.new_contract;
    await call('DELETE', `/api/v0/instances/${id}/`);
    assert.deepEqual(await show(id), { status: 200, json: fixture('show-instance-null-after-destroy.json') });
    assert.deepEqual(await show(id), { status: 200, json: fixture('show-instance-empty-array-after-destroy.json') });
    const third = await show(id);
    const destroyed = fixture('show-instance-destroyed.json') as Record<string, unknown>;
    assert.equal(third.json.instances.id, id);
    assert.equal(third.json.instances.actual_status, destroyed.actual_status);
    assert.equal(third.json.instances.intended_status, destroyed.intended_status);
    // A never-created id is not "after a destroy": it stays the documented null.
    assert.deepEqual((await show(1)).json, { instances: null });
  });

  it('walks instances that can never start through the recorded states', async () => {
    fake = await FakeVastApi.start({ behaviour: 'recorded', bootMs: 150 });
    // Held until all four are created and read (each create starts an SSH server): all read `loading` however loaded the machine.
    fake.holdStarts();
    const oci = fixture('show-instance-created-oci-failure.json') as Record<string, string>;
    const manifest = fixture('show-instance-created-manifest-not-found.json') as Record<string, string>;
    const pull = fixture('show-instance-loading-intended-stopped.json') as Record<string, string>;
    const image = 'vastai/base-image:no-such-tag';
    fake.breakStarts('7100001', 'oci-failure');
    fake.breakStarts(image, 'manifest-not-found');
    fake.breakStarts('A100 SXM4', 'image-pull-failure');
    fake.breakStarts('RTX 3090', 'host-offline');
    const ids = {
      oci: (await create(7100001)).json.new_contract,
      manifest: (await create(7100002, { image })).json.new_contract,
      pull: (await create(7100004)).json.new_contract,
      offline: (await create(7100005)).json.new_contract,
    };
    const status = async (id: number) => (await show(id)).json.instances;
    for (const id of Object.values(ids)) assert.equal((await status(id)).actual_status, 'loading');
    fake.releaseStarts();
    await until(
      () => status(ids.offline),
      (i) => i.actual_status === 'running' && i.ports !== null,
      'running',
    );

    const a = await until(
      () => status(ids.oci),
      (i) => i.actual_status !== 'loading',
      'oci',
    );
    assert.deepEqual(
      [a.actual_status, a.intended_status, a.status_msg, a.ports],
      [oci.actual_status, oci.intended_status, oci.status_msg, null],
    );
    const b = await until(
      () => status(ids.manifest),
      (i) => i.actual_status !== 'loading',
      'manifest',
    );
    assert.deepEqual([b.actual_status, b.intended_status], [manifest.actual_status, manifest.intended_status]);
    assert.equal(b.status_msg, `Error response from daemon: manifest for ${image} not found`);
    const c = await until(
      () => status(ids.pull),
      (i) => i.intended_status === 'stopped',
      'image pull failure',
    );
    assert.deepEqual(
      [c.actual_status, c.intended_status, c.status_msg],
      [pull.actual_status, pull.intended_status, pull.status_msg],
    );
    await until(
      () => status(ids.pull),
      (i) => i.actual_status === 'exited',
      'exited',
    );
    const d = await until(
      () => status(ids.offline),
      (i) => i.actual_status === 'offline',
      'offline',
    );
    assert.equal(d.ports, null);
    // Read after the offline instance's last step, eleven boot intervals in: the oci failure's walk (one step, one interval in) is long over.
    assert.equal((await status(ids.oci)).actual_status, 'created', 'created is for good');
  });

  it('lists offers with traffic prices: the recorded zeros on most, per-GB charges on the recorded ask and the document example', async () => {
    fake = await FakeVastApi.start({ behaviour: 'recorded' });
    const recorded = (fixture('search-offers-raw-rtx4090.json') as Record<string, number>[])[0];
    const { json } = await call('POST', '/api/v0/bundles/', { limit: 100 });
    const offers = json.offers as Record<string, number>[];
    const fields = ['inet_up_cost', 'inet_down_cost', 'internet_up_cost_per_tb', 'internet_down_cost_per_tb'];
    for (const o of offers) for (const f of fields) assert.equal(typeof o[f], 'number', `${o.id} ${f}`);
    const billed = TRAFFIC_BILLED_OFFERS.map((t) => offers.find((o) => o.id === t.id)!);
    assert.deepEqual(
      billed.map((o) => [o.inet_up_cost, o.inet_down_cost]),
      [
        [0.03, 0.03],
        [0.00456, 0.00123],
      ],
    );
    // Vast's per-TB price is 1024 times its per-GB one (show-instance-running-traffic-billed.json).
    for (const o of billed) assert.ok(Math.abs(o.internet_up_cost_per_tb - o.inet_up_cost * 1024) < 1e-9, `${o.id}`);
    const plain = offers.find((o) => o.id === 7100001)!;
    for (const f of fields) assert.equal(plain[f], recorded[f]);
    // Documented mode has neither the fields nor the extra offer.
    await fake.close();
    fake = await FakeVastApi.start();
    const doc = (await call('POST', '/api/v0/bundles/', { limit: 100 })).json.offers as Record<string, number>[];
    assert.ok(doc.every((o) => o.inet_up_cost === undefined && !TRAFFIC_BILLED_OFFERS.some((t) => t.id === o.id)));
  });

  it('serves the recorded offer as printed and finds it with the default search filters', async () => {
    fake = await FakeVastApi.start({ offers: [recordedVastOffer()] });
    const { json } = await call('POST', '/api/v0/bundles/', {});
    assert.deepEqual(json.offers, fixture('search-offers-raw-rtx4090.json'));
  });

  it('reprices an instance after accept: its dph_total is above the offer it was created from', async () => {
    fake = await FakeVastApi.start({ behaviour: 'recorded', bootMs: 0 });
    const offered = (
      (await call('POST', '/api/v0/bundles/', { limit: 100 })).json.offers as { id: number; dph_total: number }[]
    ).find((o) => o.id === REPRICED_OFFER.id)!;
    const id = (await create(REPRICED_OFFER.id)).json.new_contract;
    const inst = (await show(id)).json.instances;
    assert.ok(inst.dph_total > offered.dph_total, `${inst.dph_total} > ${offered.dph_total}`);
    assert.equal(inst.dph_total, 1.35);
    // Other asks keep their price; `reprice` does the same to any ask in any mode.
    assert.equal((await show((await create(7100001)).json.new_contract)).json.instances.dph_total, 2.1);
    fake.reprice('7100001', 2.5);
    assert.equal((await show((await create(7100001)).json.new_contract)).json.instances.dph_total, 2.5);
  });

  it('pages the instance list by two with next_token whatever limit asks', async () => {
    fake = await FakeVastApi.start({ behaviour: 'recorded', bootMs: 0 });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await create(7100001, { label: `page-${i}` })).json.new_contract);
    const first = await call('GET', '/api/v1/instances/?limit=25');
    assert.deepEqual(
      first.json.instances.map((i: { id: number }) => i.id),
      ids.slice(0, 2),
    );
    assert.equal(first.json.total_instances, 3);
    assert.equal(typeof first.json.next_token, 'string');
    const second = await call(
      'GET',
      `/api/v1/instances/?limit=25&after_token=${encodeURIComponent(first.json.next_token)}`,
    );
    assert.deepEqual(
      second.json.instances.map((i: { id: number }) => i.id),
      ids.slice(2),
    );
    assert.equal(second.json.next_token, null);
  });
});
