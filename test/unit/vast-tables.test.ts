import assert from 'node:assert/strict';
import { classifyVastError, VAST_ERROR_TABLE } from '../../plugins/vast/errors.js';
import { validateVastOptions, VAST_DEFAULT_IMAGE } from '../../plugins/vast/options.js';
import { vastCategory } from '../../plugins/vast/offers.js';
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
      bandwidthGbPerHour: 0,
    });
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
      () => validateVastOptions({ API_KEY: 'k', BANDWIDTH_GB_PER_HOUR: '-1' }),
      /VAST_PROVIDER_BANDWIDTH_GB_PER_HOUR/,
    );
    assert.equal(validateVastOptions({ API_KEY: 'k', BANDWIDTH_GB_PER_HOUR: '5' }).bandwidthGbPerHour, 5);
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
