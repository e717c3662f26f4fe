import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { NodeSSH } from 'node-ssh';
import { validateVastOptions } from '../../plugins/vast/options.js';
import { VastProvider } from '../../plugins/vast/provider.js';
import { ConfigError } from '../../src/config-values.js';
import { readProviders } from '../../src/config/providers.js';
import { createLogger } from '../../src/logger.js';
import { createProviderRegistry } from '../../src/providers/provider-registry.js';
import type { InstanceInfo, OfferRef, ProviderDeps, TrafficCounters } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { BANDWIDTH_BILLED_OFFER, FAKE_VAST_OFFERS, SUB_CENT_TRAFFIC_OFFER } from '../fakes/vast-api.js';
import { waitForRunning } from './provider-contract.js';
import { FAST_TUNING, makeVastHarness, type VastHarness } from './vast-harness.js';

const MIB = 1024 * 1024;
/** What SSH itself adds to a transfer on the wire (packet framing, padding, MACs, the handshake): a few percent at most. */
const overhead = (bytes: number) => Math.ceil(bytes * 0.05) + 64 * 1024;

/**
 * Vast traffic as the plugin reads it, through the real plugin code against the fake: asks whose
 * host bills traffic are offered with their per-GB prices, the operator's price limit leaves the
 * dear ones out, the removed volume guess stops the start, an instance's billed counters come back
 * in bytes and move with what its SSH sessions transfer, and a traffic price above the quote is a
 * repricing.
 */
describe('vast traffic (plugin against the fake)', () => {
  let h: VastHarness;
  const keys = generateDeploymentKeyPair('vast-traffic');
  const billed = String(BANDWIDTH_BILLED_OFFER.id);
  const subCent = String(SUB_CENT_TRAFFIC_OFFER.id);
  const calls = (method: string, path: RegExp) => h.fake.calls.filter((c) => c.method === method && path.test(c.path));

  afterEach(async () => h?.cleanup());

  describe('offers', () => {
    beforeEach(async () => {
      h = await makeVastHarness({ fake: { behaviour: 'recorded', bootMs: 0 } });
    });

    it('lists the recorded asks that bill traffic, each with its per-GB prices beside a price per hour that leaves traffic out', async () => {
      const offers = await h.provider.listOffers();
      const byKey = new Map(offers.map((o) => [o.key, o]));
      // 0.03 USD/GB each way (the recorded live ask), and the document's sub-cent prices, exact in millionths.
      assert.deepEqual(byKey.get(billed)?.trafficPrice, { upMicroUsdPerGb: 30_000, downMicroUsdPerGb: 30_000 });
      assert.equal(byKey.get(billed)?.pricePerHourMinor, 33, 'dph_total 0.3228 alone, rounded up');
      assert.deepEqual(byKey.get(subCent)?.trafficPrice, { upMicroUsdPerGb: 4_560, downMicroUsdPerGb: 1_230 });
      assert.equal(byKey.get(subCent)?.pricePerHourMinor, 24);
      // Asks whose traffic is free (0.0, as recorded) carry no traffic price at all.
      const free = byKey.get(String(FAKE_VAST_OFFERS[0].id));
      assert.ok(free, 'the plain H100 is listed');
      assert.equal('trafficPrice' in free, false);
    });

    it('VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB leaves out the asks billing more either way, logged with the reason code', async () => {
      const lines: Record<string, unknown>[] = [];
      const logger = createLogger('debug', { write: (l: string) => void lines.push(JSON.parse(l)) });
      const options = validateVastOptions({
        API_KEY: h.fake.apiKey,
        API_URL: h.fake.url,
        MAX_TRAFFIC_PRICE_PER_GB: '0.01',
      });
      const provider = new VastProvider(options, { ...h.deps, logger }, FAST_TUNING);
      try {
        const listed = (await provider.listOffers()).map((o) => o.key);
        assert.ok(!listed.includes(billed), '0.03 USD/GB is over 0.01');
        assert.ok(listed.includes(subCent), '0.00456 and 0.00123 are under it');
        assert.ok(listed.includes(String(FAKE_VAST_OFFERS[0].id)), 'free traffic is under any limit');
        const skipped = lines.filter((l) => l.msg === 'vast offer skipped' && l.ask === BANDWIDTH_BILLED_OFFER.id);
        assert.equal(skipped.length, 1);
        assert.equal(skipped[0].reason, 'traffic_price_above_limit');
        assert.match(String(skipped[0].why), /over VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB \(0\.01 USD\/GB\)/);
      } finally {
        await provider.close();
      }
      // 0: only the asks whose traffic is free.
      const none = h.newProvider({ raw: { MAX_TRAFFIC_PRICE_PER_GB: '0' } });
      const left = (await none.listOffers()).map((o) => o.key);
      assert.ok(!left.includes(billed) && !left.includes(subCent));
      assert.ok(left.includes(String(FAKE_VAST_OFFERS[0].id)));
    });

    it('VAST_PROVIDER_BANDWIDTH_GB_PER_HOUR stops the start, naming the variable and saying traffic is billed as used', async () => {
      const env = {
        PROVIDERS: 'vast',
        VAST_PROVIDER_API_KEY: h.fake.apiKey,
        VAST_PROVIDER_API_URL: h.fake.url,
        VAST_PROVIDER_BANDWIDTH_GB_PER_HOUR: '10',
      };
      // The host's own deps, as the start builds them (it makes the drift log itself).
      const { drift: _drift, ...deps } = h.deps as ProviderDeps & { drift?: unknown };
      await assert.rejects(
        createProviderRegistry(readProviders(env), deps),
        // By name: the registry imports the plugin at run time, which can load its own copy of the class under the test runner.
        (e: Error) =>
          e.constructor.name === ConfigError.name &&
          e.message.startsWith('VAST_PROVIDER_BANDWIDTH_GB_PER_HOUR was removed: traffic is now billed as used') &&
          e.message.includes('remove it'),
      );
      assert.equal(calls('POST', /\/bundles\/$/).length, 0, 'refused before any call');
    });
  });

  describe('counters', () => {
    beforeEach(async () => {
      h = await makeVastHarness({ fake: { bootMs: 0 }, tuning: { listTtlMs: 0 } });
    });

    async function running(): Promise<{ id: string; info: InstanceInfo & { ssh: NonNullable<InstanceInfo['ssh']> } }> {
      const res = await h.provider.create(h.label(), h.offer(FAKE_VAST_OFFERS[0].id), keys.publicKey);
      assert.equal(res.kind, 'created', JSON.stringify(res));
      const id = (res as { instanceId: string }).instanceId;
      return { id, info: await waitForRunning(h.provider, id) };
    }

    const traffic = async (id: string): Promise<TrafficCounters> => {
      const t = (await h.provider.get(id)).traffic;
      assert.ok(t, 'the answer carries the billed counters');
      return t;
    };

    it('reports the billed counters in bytes on get, findByLabel and listInstances, moving with what SSH transfers', async function () {
      this.timeout(30_000);
      const { id, info } = await running();
      const before = await traffic(id);
      const ssh = new NodeSSH();
      await ssh.connect({
        host: info.ssh.host,
        port: info.ssh.port,
        username: info.ssh.user,
        privateKey: keys.privateKey,
        hostVerifier: () => true,
      });
      try {
        // Up: the machine sends 3 MiB of random bytes (nothing compresses them) to the client.
        const pulled = await ssh.execCommand(`head -c ${3 * MIB} /dev/urandom | base64 -w0`, { noTrim: true });
        assert.equal(pulled.code, 0, pulled.stderr);
        const upBytes = pulled.stdout.length;
        const afterUp = await traffic(id);
        const up = afterUp.upBytes - before.upBytes;
        assert.ok(up >= upBytes && up <= upBytes + overhead(upBytes), `up moved ${up} for ${upBytes}`);
        assert.ok(afterUp.downBytes - before.downBytes < overhead(0), 'little came down while it sent');
        // Down: the client sends 2 MiB to the machine.
        const sent = randomBytes(2 * MIB).toString('base64');
        const pushed = await ssh.execCommand('wc -c', { stdin: sent });
        assert.equal(pushed.stdout.trim(), String(sent.length));
        const afterDown = await traffic(id);
        const down = afterDown.downBytes - afterUp.downBytes;
        assert.ok(down >= sent.length && down <= sent.length + overhead(sent.length), `down moved ${down}`);
        // Every read of the instance carries the same counters, as Vast states them (KiB to a tenth).
        const label = (await h.provider.get(id)).label;
        const fake = h.fake.trafficOf(id);
        const asVast = (b: number) => Math.round((Math.floor((b / 1024) * 10) / 10) * 1024);
        const expected = { upBytes: asVast(fake.sentBytes), downBytes: asVast(fake.receivedBytes) };
        assert.deepEqual((await h.provider.findByLabel(label))?.traffic, expected);
        assert.deepEqual((await h.provider.listInstances()).find((i) => i.instanceId === id)?.traffic, expected);
      } finally {
        ssh.dispose();
      }
    });

    it('counts traffic the machine moves other than over SSH; a destroyed instance Vast still shows gives its last counters', async () => {
      const { id } = await running();
      const before = await traffic(id);
      h.fake.moveTraffic(id, { receivedBytes: 40 * 1024 * MIB, sentBytes: 5 * MIB });
      const after = await traffic(id);
      assert.equal(after.downBytes - before.downBytes, 40 * 1024 * MIB, 'a 40 GiB pull, to the byte');
      assert.equal(after.upBytes - before.upBytes, 5 * MIB);
      // Recorded: show-instance after a destroy can answer the instance with actual_status "destroyed".
      h.fake.setQuirk('afterDestroy', 'destroyed');
      await h.provider.destroy(id);
      const gone = await h.provider.get(id);
      assert.equal(gone.state, 'gone');
      assert.deepEqual(gone.traffic, after);
    });

    it('an answer without usable counters carries no traffic', async () => {
      const { id } = await running();
      for (const counters of [
        { inet_up_billed: null, inet_down_billed: 10 },
        { inet_up_billed: -1, inet_down_billed: 10 },
        { inet_up_billed: 'lots', inet_down_billed: 10 },
        { inet_down_billed: 10 },
      ]) {
        h.fake.respondNext('list', 200, {
          success: true,
          next_token: null,
          instances: [{ ...(await showRaw(id)), ...counters }],
        });
        const info = await h.provider.get(id);
        assert.equal(info.state, 'running', JSON.stringify(counters));
        assert.equal(info.traffic, undefined, JSON.stringify(counters));
      }
    });

    /** The instance as show-instance answers it, with `inet_up_billed` dropped (each case sets its own). */
    async function showRaw(id: string): Promise<Record<string, unknown>> {
      const res = await fetch(`${h.fake.url}/api/v0/instances/${id}/?owner=me`, {
        headers: { Authorization: `Bearer ${h.fake.apiKey}` },
      });
      const { inet_up_billed: _dropped, ...inst } = ((await res.json()) as { instances: Record<string, unknown> })
        .instances;
      return inst;
    }
  });

  describe('repricing', () => {
    beforeEach(async () => {
      h = await makeVastHarness({ fake: { behaviour: 'recorded', bootMs: 0 } });
    });

    /** The host's offer for the recorded traffic-billing ask, quoted as listed. */
    const quotedBilled = (): OfferRef => ({
      ...h.offer(billed, 33),
      trafficPrice: { upMicroUsdPerGb: 30_000, downMicroUsdPerGb: 30_000 },
    });

    it('an instance billing a higher per-GB price than its ask quoted is destroyed and the attempt unavailable', async () => {
      h.fake.repriceTraffic(billed, { up: 0.03, down: 0.05 });
      const res = await h.provider.create(h.label(), quotedBilled(), keys.publicKey);
      assert.equal(res.kind, 'unavailable', JSON.stringify(res));
      assert.match(
        (res as { reason: string }).reason,
        /^vast ask 7100009: the instance bills 0\.03 USD\/GB up and 0\.05 USD\/GB down, over the 0\.03 USD\/GB up and 0\.03 USD\/GB down the offer was quoted at; destroyed$/,
      );
      assert.deepEqual(h.fake.instances(), [], 'the fake saw the destroy');
      assert.equal(calls('POST', /\/ssh\/$/).length, 0, 'no key was attached to a machine we do not keep');
    });

    it('an ask quoted as free whose instance bills traffic is repriced too', async () => {
      const h100 = String(FAKE_VAST_OFFERS[0].id);
      h.fake.repriceTraffic(h100, { up: 0.01, down: 0 });
      const res = await h.provider.create(h.label(), h.offer(h100, 210), keys.publicKey);
      assert.equal(res.kind, 'unavailable', JSON.stringify(res));
      assert.match(
        (res as { reason: string }).reason,
        /bills 0\.01 USD\/GB up and 0 USD\/GB down, over the 0 USD\/GB up/,
      );
    });

    it('the quoted price, or a lower one, is kept', async () => {
      assert.equal((await h.provider.create(h.label(), quotedBilled(), keys.publicKey)).kind, 'created');
      h.fake.repriceTraffic(billed, { up: 0.02, down: 0.03 });
      assert.equal((await h.provider.create(h.label(), quotedBilled(), keys.publicKey)).kind, 'created');
      assert.equal(calls('DELETE', /./).length, 0);
    });

    it('a traffic price it could not read at create is compared on the next poll: the instance reads as failed', async () => {
      h.fake.repriceTraffic(billed, { up: 0.04, down: 0.03 });
      h.fake.failNext('get', '5xx');
      const p = h.newProvider({ tuning: { listTtlMs: 0 } });
      const res = await p.create(h.label(), quotedBilled(), keys.publicKey);
      assert.equal(res.kind, 'created', JSON.stringify(res));
      const info = await p.get((res as { instanceId: string }).instanceId);
      assert.equal(info.state, 'failed');
      assert.match(info.providerState!, /repriced: the instance bills 0\.04 USD\/GB up/);
    });
  });
});
