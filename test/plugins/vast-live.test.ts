import assert from 'node:assert/strict';
import { VastProvider } from '../../plugins/vast/provider.js';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { usdToCentsCeil } from '../../src/providers/pricing.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { BANDWIDTH_BILLED_OFFER, FAKE_VAST_OFFERS, REPRICED_OFFER, type VastStartFailure } from '../fakes/vast-api.js';
import { waitFor } from '../helpers/wait.js';
import { waitForRunning } from './provider-contract.js';
import { FAST_TUNING, makeVastHarness, type VastHarness } from './vast-harness.js';

/**
 * The Vast plugin against the fake in recorded mode: the answers the live API was seen to give
 * (test/fixtures/providers/vast/), not the ones its documents promise.
 */
describe('vast plugin on live answers (recorded fake)', () => {
  let h: VastHarness;
  const keys = generateDeploymentKeyPair('vast-live');
  const h100 = FAKE_VAST_OFFERS[0].id;
  const calls = (method: string, path: RegExp) => h.fake.calls.filter((c) => c.method === method && path.test(c.path));

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

  /** A provider whose log lines are kept, on the same fake; its clock is the test's to move. */
  function logged(tuning = {}) {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger('debug', { write: (l: string) => void lines.push(JSON.parse(l)) });
    const clock = new ManualClock();
    const provider = new VastProvider(
      h.options,
      { ...h.deps, logger, clock },
      { ...FAST_TUNING, listTtlMs: 0, ...tuning },
    );
    return { provider, lines, clock };
  }

  async function created(provider: VastProvider, askId: number | string = h100, cost?: number) {
    const res = await provider.create(h.label(), h.offer(askId, cost), keys.publicKey);
    assert.equal(res.kind, 'created', JSON.stringify(res));
    return (res as { instanceId: string }).instanceId;
  }

  beforeEach(async () => {
    h = await makeVastHarness({ fake: { behaviour: 'recorded', bootMs: 50 } });
  });
  afterEach(async () => h.cleanup());

  describe('a taken ask', () => {
    it('is unavailable in both recorded 400 forms, so the host tries the next candidate; nothing is made', async () => {
      h.fake.noCapacity('H100 SXM');
      for (const form of ['msg', 'error-field'] as const) {
        h.fake.setQuirk('takenAsk', form);
        const res = await h.provider.create(h.label(), h.offer(h100), keys.publicKey);
        assert.equal(res.kind, 'unavailable', `${form}: ${JSON.stringify(res)}`);
        assert.match((res as { reason: string }).reason, /HTTP 400 no_such_ask/);
      }
      assert.deepEqual(
        calls('PUT', /\/asks\//).map((c) => c.status),
        [400, 400],
      );
      assert.deepEqual(h.fake.instances(), []);
    });

    it('a true invalid_args under 400 stays rejected', async () => {
      h.fake.respondNext('create', 400, {
        success: false,
        error: 'invalid_args',
        msg: "error 400/3467: Invalid args: 'image' is required",
        ask_id: h100,
      });
      const res = await h.provider.create(h.label(), h.offer(h100), keys.publicKey);
      assert.equal(res.kind, 'rejected');
    });
  });

  describe('destroy', () => {
    it('succeeds against every recorded form of "already gone", and reads every after-destroy form as gone', async () => {
      const { provider } = logged();
      const ids = [await created(provider), await created(provider), await created(provider)];
      for (const id of ids) await provider.destroy(id);
      // Again, as a retry after a lost answer: no_such_instance under 404, then under 200 with success:false.
      for (const id of ids.slice(0, 2)) await provider.destroy(id);
      assert.deepEqual(
        calls('DELETE', /./).map((c) => c.status),
        [200, 200, 200, 404, 200],
      );
      // Show-instance after the destroy: instances null, [], then the object with actual_status destroyed.
      const states = [];
      for (const id of ids) states.push((await provider.get(id)).state);
      assert.deepEqual(states, ['gone', 'gone', 'gone']);
      assert.deepEqual(
        calls('GET', /^\/api\/v0\/instances\/\d+\/$/).map((c) => c.status),
        [200, 200, 200],
      );
    });

    it('a destroyed instance a list still shows is neither adopted by label nor listed as ours', async () => {
      const label = h.label();
      const res = await h.provider.create(label, h.offer(h100), keys.publicKey);
      const id = (res as { instanceId: string }).instanceId;
      h.fake.respondNext('list', 200, {
        success: true,
        next_token: null,
        instances: [{ id: Number(id), label, actual_status: 'destroyed', intended_status: 'destroyed' }],
      });
      assert.equal(await h.provider.findByLabel(label), null);
      const p = h.newProvider({ tuning: { listTtlMs: 0 } });
      h.fake.respondNext('list', 200, {
        success: true,
        next_token: null,
        instances: [{ id: Number(id), label, actual_status: 'terminated' }],
      });
      assert.deepEqual(await p.listInstances(), []);
    });
  });

  describe('an instance that cannot start', () => {
    const cases: [VastStartFailure, RegExp][] = [
      ['oci-failure', /^created: Error: container failed to start: OCI runtime create failed$/],
      [
        'manifest-not-found',
        /^created: Error response from daemon: manifest for vastai\/base-image:cuda-12\.4\.1-auto not found$/,
      ],
      ['image-pull-failure', /^loading, intended stopped: docker_build\(\) error writing dockerfile$/],
    ];
    for (const [kind, providerState] of cases) {
      it(`${kind}: reads failed as soon as Vast says so, with its status_msg, logged once`, async () => {
        h.fake.breakStarts('H100 SXM', kind);
        const { provider, lines } = logged();
        const id = await created(provider);
        const info = await until(
          () => provider.get(id),
          (i) => i.state !== 'pending',
          'a failed state',
        );
        assert.equal(info.state, 'failed');
        assert.match(info.providerState!, providerState);
        await provider.get(id);
        const said = lines.filter((l) => l.msg === 'vast reports an instance that cannot run');
        assert.equal(said.length, 1);
        assert.equal(said[0].instanceId, id);
      });
    }

    it('host-offline: running, then failed once the host drops off', async () => {
      h.fake.breakStarts('H100 SXM', 'host-offline');
      const { provider } = logged();
      const id = await created(provider);
      await waitForRunning(provider, id);
      const info = await until(
        () => provider.get(id),
        (i) => i.state !== 'running',
        'offline',
      );
      assert.deepEqual([info.state, info.providerState], ['failed', 'offline']);
    });

    it('rebooting is pending; an unknown state is pending, logged once with its raw value, then failed after its own bound', async () => {
      const { provider, lines, clock } = logged({ unknownStateBoundMs: 300 });
      const id = await created(provider);
      await waitForRunning(provider, id);
      h.fake.setStatus(id, 'rebooting');
      assert.equal((await provider.get(id)).state, 'pending');
      h.fake.setStatus(id, 'migrating_to_mars');
      assert.equal((await provider.get(id)).state, 'pending');
      assert.equal((await provider.get(id)).state, 'pending');
      const warned = lines.filter((l) => l.rawState === 'migrating_to_mars');
      assert.equal(warned.length, 1);
      clock.advance(300);
      assert.equal((await provider.get(id)).state, 'failed');
      h.fake.setStatus(id, 'running');
      assert.equal((await provider.get(id)).state, 'running', 'a known state clears the timer');
    });
  });

  describe('money', () => {
    it('lists offers that bill internet traffic, with their per-GB prices (more in vast-traffic.test.ts)', async () => {
      const offers = await h.provider.listOffers();
      assert.ok(
        offers.some((o) => o.key === '7100005'),
        'the plain RTX 3090 is listed',
      );
      const billed = offers.find((o) => o.key === String(BANDWIDTH_BILLED_OFFER.id));
      assert.deepEqual(billed?.trafficPrice, { upMicroUsdPerGb: 30_000, downMicroUsdPerGb: 30_000 });
      assert.equal(billed?.pricePerHourMinor, usdToCentsCeil(BANDWIDTH_BILLED_OFFER.dph_total), 'no assumed volume');
    });

    it('an instance repriced over its quote is destroyed and the attempt is unavailable', async () => {
      const quoted = usdToCentsCeil(REPRICED_OFFER.dph_total);
      const res = await h.provider.create(h.label(), h.offer(REPRICED_OFFER.id, quoted), keys.publicKey);
      assert.equal(res.kind, 'unavailable', JSON.stringify(res));
      assert.match((res as { reason: string }).reason, /bills 135 cents\/h, over the 99 cents\/h/);
      assert.deepEqual(h.fake.instances(), [], 'the fake saw the destroy');
      assert.equal(calls('DELETE', /./).length, 1);
      assert.equal(calls('POST', /\/ssh\/$/).length, 0, 'no key was attached to a machine we do not keep');
    });

    it('an instance at or under its quote is kept; without a quote nothing is compared', async () => {
      assert.equal(
        (await h.provider.create(h.label(), h.offer(REPRICED_OFFER.id, 135), keys.publicKey)).kind,
        'created',
      );
      assert.equal((await h.provider.create(h.label(), h.offer(REPRICED_OFFER.id), keys.publicKey)).kind, 'created');
      assert.equal((await h.provider.create(h.label(), h.offer(h100, 210), keys.publicKey)).kind, 'created');
      assert.equal(calls('DELETE', /./).length, 0);
    });

    it('a repriced instance whose destroy fails is created but reads as failed, so the host destroys it', async () => {
      h.fake.failNext('destroy', '5xx');
      const id = await created(h.provider, REPRICED_OFFER.id, 99);
      const info = await h.provider.get(id);
      assert.equal(info.state, 'failed');
      assert.match(info.providerState!, /repriced/);
    });

    it('a price it could not read at create is compared on the next poll', async () => {
      h.fake.failNext('get', '5xx');
      const { provider } = logged();
      const id = await created(provider, REPRICED_OFFER.id, 99);
      const info = await provider.get(id);
      assert.equal(info.state, 'failed');
      assert.match(info.providerState!, /bills 135 cents\/h, over the 99/);
    });
  });

  describe('paging', () => {
    it('the label look-up follows next_token: an instance on page 2 is adopted, never duplicated', async () => {
      h.fake.setQuirk('smallPages', 1);
      const label = h.label();
      h.fake.hangCreatesAfterCreating(true);
      assert.equal((await h.provider.create(label, h.offer(h100), keys.publicKey)).kind, 'ambiguous');
      h.fake.hangCreatesAfterCreating(false);
      const mine = h.fake.instances()[0];
      // Page 1 holds nothing under the label and points past it; the fake serves page 2 from there.
      const before = Buffer.from(JSON.stringify({ values: { id: Number(mine.id) - 1 } })).toString('base64');
      h.fake.respondNext('list', 200, { success: true, next_token: before, instances: [] });
      const again = await h.provider.create(label, h.offer(h100), keys.publicKey);
      assert.deepEqual(again, { kind: 'created', instanceId: mine.id });
      assert.equal(h.fake.instances().length, 1);
      assert.equal(calls('PUT', /\/asks\//).length, 1);
      const lists = calls('GET', /^\/api\/v1\/instances\/$/).slice(-2);
      assert.equal(lists[1].query.after_token, before);
    });

    it('listInstances reads every small page', async () => {
      h.fake.setQuirk('smallPages', true);
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push(await created(h.provider));
      const p = h.newProvider({ tuning: { listTtlMs: 0 } });
      const listed = await p.listInstances();
      assert.deepEqual(listed.map((i) => i.instanceId).sort(), ids.sort());
      assert.ok(calls('GET', /^\/api\/v1\/instances\/$/).filter((c) => !c.query.select_filters).length >= 3);
    });
  });
});
