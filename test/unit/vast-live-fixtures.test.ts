import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { classifyVastError, createFailure } from '../../plugins/vast/errors.js';
import { vastTraffic } from '../../plugins/vast/machine.js';
import {
  isVastOfferDrop,
  mapVastOffer,
  vastCostMinor,
  vastOverQuote,
  vastTrafficPrice,
  type VastOffer,
} from '../../plugins/vast/offers.js';
import { vastSsh } from '../../plugins/vast/provider.js';
import { readVastState } from '../../plugins/vast/states.js';
import type { VastInstance } from '../../plugins/vast/client.js';
import { usdToCentsCeil } from '../../src/providers/pricing.js';
import type { ProviderOffer } from '../../src/providers/provider.js';
import type { HttpResponse } from '../../src/providers/provider-http.js';
import { BANDWIDTH_BILLED_OFFER } from '../fakes/vast-recorded.js';

const DIR = new URL('../fixtures/providers/vast/', import.meta.url);
const text = (file: string) => readFileSync(new URL(file, DIR), 'utf8');
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- recorded bodies of many shapes, read field by field
const json = (file: string): any => JSON.parse(text(file));

/** An answer as the HTTP client hands it to the plugin. */
function answer(status: number, body: string): HttpResponse {
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(body);
  } catch {
    // A text body: the plugin reads `text`.
  }
  return { status, json: parsed, text: body, headers: new Headers() };
}

/** The offer an ask maps to, failing with the drop's reason when it was left out. */
function offered(m: ReturnType<typeof mapVastOffer>): ProviderOffer {
  assert.ok(!isVastOfferDrop(m), isVastOfferDrop(m) ? `${m.drop}: ${m.detail}` : '');
  return m;
}

/**
 * The contract over every recorded Vast answer in test/fixtures/providers/vast/: what the plugin's
 * parsers and decisions (state, error verdict, price, SSH endpoint) make of each, as the live API
 * sent it. A fixture added without a case here fails the first test, so none goes unread.
 */
describe('vast plugin over the recorded live answers', () => {
  /** Each fixture file and the decisions it must produce. */
  const CASES: Record<string, () => void | Promise<void>> = {
    'search-offers-raw-rtx4090.json': () => {
      const [raw] = json('search-offers-raw-rtx4090.json') as VastOffer[];
      const offer = offered(mapVastOffer(raw, 32));
      // Price: dph_total in cents, rounded up; traffic is 0.0 on this host, so no traffic price.
      assert.equal(offer.pricePerHourMinor, usdToCentsCeil(raw.dph_total));
      assert.equal(offer.pricePerHourMinor, 25);
      assert.equal(offer.trafficPrice, undefined);
      assert.deepEqual(
        [
          offer.key,
          offer.name,
          offer.category,
          offer.vramGb,
          offer.gpuCount,
          offer.cpuCores,
          offer.memoryGb,
          offer.region,
        ],
        ['11684738', 'RTX 4090', 'consumer', 24, 1, 24, 15, 'Guangxi, CN'],
      );
      // The same host billing traffic is offered at the same hourly price, its traffic priced apart.
      const billed = offered(mapVastOffer({ ...raw, inet_up_cost: 0.05, inet_down_cost: 0.02 }, 32));
      assert.equal(billed.pricePerHourMinor, 25);
      assert.deepEqual(billed.trafficPrice, { upMicroUsdPerGb: 50_000, downMicroUsdPerGb: 20_000 });
    },
    'create-400-no-such-ask.json': () => {
      const res = answer(400, text('create-400-no-such-ask.json'));
      assert.equal(classifyVastError(res).create, 'unavailable');
      assert.equal(createFailure('vast PUT /api/v0/asks/999/', res).kind, 'unavailable');
    },
    'create-400-no-such-ask-error-field.json': () => {
      const res = answer(400, text('create-400-no-such-ask-error-field.json'));
      assert.equal(createFailure('vast PUT /api/v0/asks/999/', res).kind, 'unavailable');
    },
    'create-400-no-such-ask-detail.txt': () => {
      const detail = text('create-400-no-such-ask-detail.txt').trim();
      // Kept as text by the client that saw it: as a plain body, as msg and as detail.
      for (const body of [
        detail,
        JSON.stringify({ success: false, error: 'invalid_args', msg: detail }),
        JSON.stringify({ detail }),
      ]) {
        assert.equal(createFailure('vast PUT /api/v0/asks/37888568/', answer(400, body)).kind, 'unavailable', body);
      }
    },
    'destroy-404-no-such-instance.json': () => {
      assert.equal(classifyVastError(answer(404, text('destroy-404-no-such-instance.json'))).read, 'gone');
    },
    'destroy-200-no-such-instance.json': () => {
      assert.equal(classifyVastError(answer(200, text('destroy-200-no-such-instance.json'))).read, 'gone');
    },
    'show-instance-created-oci-failure.json': () => {
      const inst = json('show-instance-created-oci-failure.json') as VastInstance;
      assert.deepEqual(readVastState(inst), {
        kind: 'known',
        state: 'failed',
        why: 'Error: container failed to start: OCI runtime create failed',
      });
      assert.equal(vastSsh(inst), undefined);
      assert.equal(vastCostMinor(inst), null, 'no price stated: nothing to compare');
      assert.equal(vastTraffic(inst), undefined, 'no counters stated: no traffic');
    },
    'show-instance-created-manifest-not-found.json': () => {
      const inst = json('show-instance-created-manifest-not-found.json') as VastInstance;
      const reading = readVastState(inst);
      assert.deepEqual([reading.kind, (reading as { state: string }).state], ['known', 'failed']);
      assert.match(reading.why!, /manifest for .* not found/);
      assert.equal(vastSsh(inst), undefined);
    },
    'show-instance-loading-intended-stopped.json': () => {
      const inst = json('show-instance-loading-intended-stopped.json') as VastInstance;
      assert.deepEqual(readVastState(inst), {
        kind: 'known',
        state: 'failed',
        why: 'docker_build() error writing dockerfile',
      });
      // The same status while Vast still intends to run it is an ordinary start.
      assert.deepEqual(readVastState({ ...inst, intended_status: 'running', status_msg: null }), {
        kind: 'known',
        state: 'pending',
      });
    },
    'show-instance-destroyed.json': () => {
      assert.deepEqual(readVastState(json('show-instance-destroyed.json')), { kind: 'known', state: 'gone' });
    },
    // The two bodies of show-instance after a destroy also go through the client (test/plugins/vast-live-fixtures.test.ts, with the fake).
    'show-instance-null-after-destroy.json': () =>
      assert.deepEqual(json('show-instance-null-after-destroy.json'), { instances: null }),
    'show-instance-empty-array-after-destroy.json': () =>
      assert.deepEqual(json('show-instance-empty-array-after-destroy.json'), { instances: [] }),
    'pending-price-increases.json': () => {
      // A host raising a contract's GPU price: the instance then bills more than the offer was quoted at.
      const [raise] = json('pending-price-increases.json').pending_price_increases;
      const offerDph = 0.99;
      const quoted = usdToCentsCeil(offerDph);
      const now = vastCostMinor({
        dph_total: offerDph + (raise.new_gpu_costpersec - raise.old_gpu_costpersec) * 3600,
      })!;
      assert.ok(now > quoted, `${now} > ${quoted}`);
      assert.equal(now, 135);
      // Its traffic raise is a repricing of its own, whatever the hourly price does.
      const quote = {
        costPerHourMinor: quoted,
        trafficPrice: vastTrafficPrice({ inet_up_cost: raise.old_bwu_cost, inet_down_cost: raise.old_bwd_cost }),
      };
      assert.ok(quote.trafficPrice !== 'unreadable');
      const raised = { dph_total: offerDph, inet_up_cost: raise.new_bwu_cost, inet_down_cost: raise.new_bwd_cost };
      assert.equal(
        vastOverQuote(raised, { ...quote, trafficPrice: quote.trafficPrice }),
        'the instance bills 0.02 USD/GB up and 0.02 USD/GB down, over the 0.01 USD/GB up and 0.01 USD/GB down the offer was quoted at',
      );
      assert.equal(
        vastOverQuote(
          { ...raised, inet_up_cost: raise.old_bwu_cost, inet_down_cost: raise.old_bwd_cost },
          {
            ...quote,
            trafficPrice: quote.trafficPrice,
          },
        ),
        null,
      );
    },
    'search-offer-traffic-billed-rtx3090.json': () => {
      const raw = json('search-offer-traffic-billed-rtx3090.json') as VastOffer;
      const offer = offered(mapVastOffer(raw, 32));
      // Offered, not left out: the hour at dph_total, each GB at 0.03 USD either way.
      assert.deepEqual(
        [offer.key, offer.name, offer.pricePerHourMinor, offer.memoryGb, offer.region],
        ['5006600', 'RTX 3090', 33, 31, 'Norway'],
      );
      assert.deepEqual(offer.trafficPrice, { upMicroUsdPerGb: 30_000, downMicroUsdPerGb: 30_000 });
      // The operator's limit is met at 0.03 and exceeded under it, with the reason's stable code.
      assert.ok(!isVastOfferDrop(mapVastOffer(raw, 32, { maxTrafficMicroUsdPerGb: 30_000 })));
      const dropped = mapVastOffer(raw, 32, { maxTrafficMicroUsdPerGb: 29_999 });
      assert.ok(isVastOfferDrop(dropped));
      assert.equal(dropped.drop, 'traffic_price_above_limit');
      assert.match(
        dropped.detail,
        /0\.03 USD\/GB up .* over VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB \(0\.029999 USD\/GB\)/,
      );
      // The fake's traffic-billing ask serves exactly this ask's prices.
      assert.deepEqual(
        [BANDWIDTH_BILLED_OFFER.dph_total, BANDWIDTH_BILLED_OFFER.inet_up_cost, BANDWIDTH_BILLED_OFFER.inet_down_cost],
        [raw.dph_total, raw.inet_up_cost, raw.inet_down_cost],
      );
    },
    'show-instance-running-traffic-billed.json': () => {
      const inst = json('show-instance-running-traffic-billed.json');
      assert.deepEqual(readVastState(inst), { kind: 'known', state: 'running' });
      assert.deepEqual(vastSsh(inst), { host: '41.193.204.66', port: 43486, user: 'root' });
      // The billed counters, KiB with a tenth: 15.3 up and 278.0 down.
      assert.deepEqual(vastTraffic(inst), { upBytes: 15_667, downBytes: 284_672 });
      assert.deepEqual(vastTrafficPrice(inst), { upMicroUsdPerGb: 1302, downMicroUsdPerGb: 1302 });
      // Vast's TB is 1024 of its GB (the per-TB price is the per-GB one times 1024), so its units are binary.
      assert.ok(Math.abs(inst.internet_up_cost_per_tb - inst.inet_up_cost * 1024) < 1e-9);
      // At the price it states, quoted as it stands, it is not repriced.
      const quote = { costPerHourMinor: 268, trafficPrice: { upMicroUsdPerGb: 1302, downMicroUsdPerGb: 1302 } };
      assert.equal(vastOverQuote(inst, quote), null);
      assert.match(
        vastOverQuote(inst, { ...quote, trafficPrice: undefined })!,
        /^the instance bills 0\.001302 USD\/GB up and 0\.001302 USD\/GB down, over the 0 USD\/GB up and 0 USD\/GB down/,
      );
    },
    'accept-price-increase-404-no-pending.json': () => {
      // An endpoint the plugin does not call; an unknown 404 code is an error, never "gone".
      const rule = classifyVastError(answer(404, text('accept-price-increase-404-no-pending.json')));
      assert.notEqual(rule.read, 'gone');
    },
  };

  /** How each fixture was captured (the levels of SOURCES.md), shown in the test names. */
  const PROVENANCE: Record<string, string> = {
    'search-offers-raw-rtx4090.json': 'live capture',
    'create-400-no-such-ask.json': 'recorded by a client',
    'create-400-no-such-ask-error-field.json': 'recorded by a client',
    'create-400-no-such-ask-detail.txt': 'recorded by a client',
    'destroy-404-no-such-instance.json': 'recorded by a client',
    'destroy-200-no-such-instance.json': 'recorded by a client',
    'show-instance-created-oci-failure.json': 'vendor test data',
    'show-instance-created-manifest-not-found.json': 'vendor test data',
    'show-instance-loading-intended-stopped.json': 'vendor test data',
    'show-instance-destroyed.json': 'vendor test data',
    'show-instance-null-after-destroy.json': 'recorded by a client',
    'show-instance-empty-array-after-destroy.json': 'recorded by a client',
    'pending-price-increases.json': 'vendor test data',
    'search-offer-traffic-billed-rtx3090.json': 'live capture',
    'show-instance-running-traffic-billed.json': 'live capture',
    'accept-price-increase-404-no-pending.json': 'vendor test data',
  };

  it('has a case for every fixture file', () => {
    const files = readdirSync(DIR)
      .filter((f) => f !== 'SOURCES.md')
      .sort();
    assert.deepEqual(files, Object.keys(CASES).sort());
    assert.deepEqual(Object.keys(PROVENANCE).sort(), files);
  });

  for (const [file, check] of Object.entries(CASES)) it(`${file} (${PROVENANCE[file]})`, check);
});
