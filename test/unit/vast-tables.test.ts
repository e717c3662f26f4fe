import assert from 'node:assert/strict';
import { classifyVastError, VAST_ERROR_TABLE } from '../../plugins/vast/errors.js';
import { validateVastOptions, VAST_DEFAULT_IMAGE } from '../../plugins/vast/options.js';
import { ConfigError } from '../../src/config-values.js';
import { vastTraffic } from '../../plugins/vast/machine.js';
import {
  isVastOfferDrop,
  mapVastOffer,
  vastCategory,
  vastTrafficPrice,
  VAST_DROP_REASONS,
  type VastOffer,
} from '../../plugins/vast/offers.js';
import { readVastState, VAST_STATE_TABLE } from '../../plugins/vast/states.js';
import { vastSsh } from '../../plugins/vast/provider.js';

describe('vast state table', () => {
  const cases: [Parameters<typeof readVastState>[0], string][] = [
    [{ actual_status: null }, 'pending'],
    [{}, 'pending'],
    [{ actual_status: 'loading', intended_status: 'running' }, 'pending'],
    [{ actual_status: 'rebooting' }, 'pending'],
    [{ actual_status: 'running' }, 'running'],
    [{ actual_status: 'stopped' }, 'stopped'],
    [{ actual_status: 'frozen' }, 'stopped'],
    [{ actual_status: 'created', intended_status: 'running', status_msg: 'OCI runtime create failed' }, 'failed'],
    // The moment between making a container and starting it, on a healthy start.
    [{ actual_status: 'created', intended_status: 'running' }, 'pending'],
    [{ actual_status: 'created', intended_status: 'running', status_msg: '  ' }, 'pending'],
    [
      { actual_status: 'loading', intended_status: 'stopped', status_msg: 'docker_build() error writing dockerfile' },
      'failed',
    ],
    [{ actual_status: null, intended_status: 'stopped' }, 'failed'],
    [{ actual_status: 'exited' }, 'failed'],
    [{ actual_status: 'unknown' }, 'failed'],
    [{ actual_status: 'offline' }, 'failed'],
    [{ actual_status: 'error' }, 'failed'],
    [{ actual_status: 'destroyed', intended_status: 'destroyed' }, 'gone'],
    [{ actual_status: 'terminated' }, 'gone'],
  ];
  for (const [fields, ours] of cases) {
    it(`${JSON.stringify(fields)} → ${ours}`, () =>
      assert.deepEqual(
        readVastState(fields).kind === 'known' && (readVastState(fields) as { state: string }).state,
        ours,
      ));
  }

  it("a value no row knows is unknown (bounded by the kit's StateWatch), as is a key of Object.prototype", () => {
    assert.deepEqual(readVastState({ actual_status: 'some_new_state' }), { kind: 'unknown' });
    assert.deepEqual(readVastState({ actual_status: 'constructor' }), { kind: 'unknown' });
  });

  it('a failed reading carries the status_msg as its reason', () => {
    assert.equal(
      readVastState({ actual_status: 'created', status_msg: ' manifest for x not found ' }).why,
      'manifest for x not found',
    );
  });

  it('names every Vast status documented or recorded', () => {
    assert.deepEqual(Object.keys(VAST_STATE_TABLE).sort(), [
      'created',
      'destroyed',
      'error',
      'exited',
      'frozen',
      'loading',
      'offline',
      'rebooting',
      'running',
      'stopped',
      'terminated',
      'unknown',
    ]);
  });

  it('gives SSH only when the public IP and the port 22 mapping both exist', () => {
    const base = { id: 1, label: 'x', actual_status: 'running' };
    const ports = { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: '41022' }] };
    assert.deepEqual(vastSsh({ ...base, public_ipaddr: '203.0.113.7', ports }), {
      host: '203.0.113.7',
      port: 41022,
      user: 'root',
    });
    assert.equal(vastSsh({ ...base, public_ipaddr: '203.0.113.7', ports: null }), undefined);
    assert.equal(vastSsh({ ...base, public_ipaddr: '203.0.113.7', ports: { '8080/tcp': ports['22/tcp'] } }), undefined);
    assert.equal(vastSsh({ ...base, public_ipaddr: '203.0.113.7', ports: { '22/tcp': [] } }), undefined);
    assert.equal(vastSsh({ ...base, public_ipaddr: '', ports }), undefined);
    assert.equal(
      vastSsh({ ...base, public_ipaddr: '203.0.113.7', ports: { '22/tcp': [{ HostPort: '0' }] } }),
      undefined,
    );
  });

  it('sorts GPU families into categories', () => {
    assert.deepEqual(
      ['H100 SXM', 'A100 SXM4', 'L40S', 'RTX 4090', 'RTX 3090', 'RTX A6000', 'RTX 6000 Ada', 'A10', 'Tesla V100'].map(
        vastCategory,
      ),
      [
        'datacenter',
        'datacenter',
        'datacenter',
        'consumer',
        'consumer',
        'workstation',
        'workstation',
        'datacenter',
        'datacenter',
      ],
    );
  });
});

describe('vast options', () => {
  it('needs an API key and fills documented defaults', () => {
    assert.throws(() => validateVastOptions({}), /VAST_PROVIDER_API_KEY is required/);
    assert.throws(() => validateVastOptions({ API_KEY: '  ' }), /VAST_PROVIDER_API_KEY is required/);
    assert.deepEqual(validateVastOptions({ API_KEY: 'k123' }), {
      apiKey: 'k123',
      apiUrl: 'https://console.vast.ai',
      image: VAST_DEFAULT_IMAGE,
      diskGb: 32,
      maxOffers: 64,
      maxTrafficMicroUsdPerGb: null,
    });
  });

  it('stops the start when the removed VAST_PROVIDER_BANDWIDTH_GB_PER_HOUR is set, saying traffic is billed as used', () => {
    for (const value of ['0', '10']) {
      assert.throws(
        () => validateVastOptions({ API_KEY: 'k', BANDWIDTH_GB_PER_HOUR: value }),
        (e: Error) =>
          e instanceof ConfigError &&
          /^VAST_PROVIDER_BANDWIDTH_GB_PER_HOUR was removed: traffic is now billed as used/.test(e.message) &&
          /remove it/.test(e.message),
      );
    }
    // Blank is unset, as for every variable.
    assert.equal(validateVastOptions({ API_KEY: 'k', BANDWIDTH_GB_PER_HOUR: ' ' }).apiKey, 'k');
  });

  it('reads VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB as exact millionths of a USD per GB', () => {
    const max = (v: string) =>
      validateVastOptions({ API_KEY: 'k', MAX_TRAFFIC_PRICE_PER_GB: v }).maxTrafficMicroUsdPerGb;
    assert.equal(max('0.05'), 50_000);
    assert.equal(max('0.03'), 30_000);
    assert.equal(max('0.000001'), 1);
    assert.equal(max('1.5'), 1_500_000);
    assert.equal(max('0'), 0, 'only asks whose traffic is free');
    assert.equal(max('$0.05'), 50_000, 'read by the one rule for per-GB prices people type (gpr reads it too)');
    for (const bad of ['-0.05', '0.0000001', '1e-2', '0,05', '.05', 'free', '10000']) {
      assert.throws(() => max(bad), /VAST_PROVIDER_MAX_TRAFFIC_PRICE_PER_GB must be USD per GB/, bad);
    }
  });

  it('rejects unknown names and bad values, naming the variable and never echoing the key', () => {
    assert.throws(
      () => validateVastOptions({ API_KEY: 'k', MARKUP: '10' }),
      /VAST_PROVIDER_MARKUP is not an option of the vast provider/,
    );
    assert.throws(
      () => validateVastOptions({ API_KEY: 'k', DISK_GB: '4' }),
      /VAST_PROVIDER_DISK_GB must be a whole number from 8/,
    );
    assert.throws(() => validateVastOptions({ API_KEY: 'k', DISK_GB: '32.5' }), /VAST_PROVIDER_DISK_GB/);
    assert.throws(() => validateVastOptions({ API_KEY: 'k', MAX_OFFERS: '0' }), /VAST_PROVIDER_MAX_OFFERS/);
    assert.throws(
      () => validateVastOptions({ API_KEY: 'k', API_URL: 'https://console.vast.ai/api/v0' }),
      /VAST_PROVIDER_API_URL must be an http\(s\) origin without a path/,
    );
    assert.throws(() => validateVastOptions({ API_KEY: 'k', API_URL: 'ftp://x' }), /VAST_PROVIDER_API_URL/);
    assert.throws(() => validateVastOptions({ API_KEY: 'k', IMAGE: 'a b' }), /VAST_PROVIDER_IMAGE/);
    assert.throws(
      () => validateVastOptions({ API_KEY: 'secret with space' }),
      (e: Error) => /VAST_PROVIDER_API_KEY/.test(e.message) && !e.message.includes('secret'),
    );
    const o = validateVastOptions({
      API_KEY: 'k',
      API_URL: 'http://127.0.0.1:9999/',
      IMAGE: 'nvidia/cuda:12.4.1-devel-ubuntu22.04',
      DISK_GB: '100',
      MAX_OFFERS: '10',
    });
    assert.deepEqual(
      [o.apiUrl, o.image, o.diskGb, o.maxOffers],
      ['http://127.0.0.1:9999', 'nvidia/cuda:12.4.1-devel-ubuntu22.04', 100, 10],
    );
  });
});

describe('vast error table', () => {
  it('every rule says why, and the catch-all rows close the table', () => {
    for (const r of VAST_ERROR_TABLE) assert.ok(r.note.length > 10, JSON.stringify(r));
    assert.deepEqual(VAST_ERROR_TABLE.at(-1)!.match, {});
    assert.equal(classifyVastError({ status: 418, json: null, text: '' }).create, 'rejected');
    assert.equal(classifyVastError({ status: 302, json: null, text: '' }).create, 'ambiguous');
  });
});

describe('vast traffic readings', () => {
  const ask: VastOffer = { id: 1, gpu_name: 'RTX 3090', num_gpus: 1, dph_total: 0.3, duration: 86_400 };

  it('reads the billed counters as KiB, from numbers or their plain text; anything else is no reading', () => {
    assert.deepEqual(vastTraffic({ inet_up_billed: 15.3, inet_down_billed: 278 }), {
      upBytes: 15_667,
      downBytes: 284_672,
    });
    assert.deepEqual(vastTraffic({ inet_up_billed: '0.5', inet_down_billed: ' 2 ' }), {
      upBytes: 512,
      downBytes: 2048,
    });
    assert.deepEqual(vastTraffic({ inet_up_billed: 0, inet_down_billed: 0 }), { upBytes: 0, downBytes: 0 });
    for (const bad of [null, undefined, -1, NaN, Infinity, '', '1e3', '-2', 'lots', {}, 1e300]) {
      assert.equal(vastTraffic({ inet_up_billed: bad, inet_down_billed: 1 }), undefined, String(bad));
      assert.equal(vastTraffic({ inet_up_billed: 1, inet_down_billed: bad }), undefined, String(bad));
    }
  });

  it('prices traffic in exact millionths per GB, absent as free, and leaves out an ask whose price is unreadable', () => {
    assert.deepEqual(vastTrafficPrice({ inet_up_cost: 0.00456, inet_down_cost: 0.00123 }), {
      upMicroUsdPerGb: 4_560,
      downMicroUsdPerGb: 1_230,
    });
    assert.deepEqual(vastTrafficPrice({}), { upMicroUsdPerGb: 0, downMicroUsdPerGb: 0 });
    assert.deepEqual(vastTrafficPrice({ inet_up_cost: null, inet_down_cost: 0 }), {
      upMicroUsdPerGb: 0,
      downMicroUsdPerGb: 0,
    });
    const free = mapVastOffer({ ...ask, inet_up_cost: 0, inet_down_cost: 0 }, 32);
    assert.ok(!isVastOfferDrop(free) && !('trafficPrice' in free));
    for (const bad of [-0.01, NaN, '0.03']) {
      const m = mapVastOffer({ ...ask, inet_down_cost: bad as number }, 32);
      assert.ok(isVastOfferDrop(m) && m.drop === 'traffic_price_unreadable', String(bad));
    }
  });

  it('gives every drop a stable code of the published list', () => {
    const cases: [Partial<VastOffer>, string][] = [
      [{ id: 0 }, 'no_ask_id'],
      [{ gpu_name: ' ' }, 'no_gpu_name'],
      [{ num_gpus: 0 }, 'no_num_gpus'],
      [{ dph_total: 0 }, 'no_dph_total'],
      [{ duration: 3_599 }, 'duration_under_an_hour'],
      [{ inet_up_cost: -1 }, 'traffic_price_unreadable'],
      [{ inet_up_cost: 0.02 }, 'traffic_price_above_limit'],
    ];
    for (const [change, code] of cases) {
      const m = mapVastOffer({ ...ask, ...change }, 32, { maxTrafficMicroUsdPerGb: 10_000 });
      assert.ok(isVastOfferDrop(m), code);
      assert.equal(m.drop, code);
      assert.ok(m.detail.length > 0);
    }
    assert.deepEqual(
      cases.map(([, code]) => code),
      [...VAST_DROP_REASONS],
    );
  });
});
