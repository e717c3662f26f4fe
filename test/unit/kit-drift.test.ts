import assert from 'node:assert/strict';
import {
  callTemplate,
  compactShape,
  isSafeKey,
  mergeShapes,
  safeCode,
  safeName,
  shapeHash,
  shapeOf,
  shapeText,
  SHAPE_BOUNDS,
} from '../../src/providers/kit/drift.js';
import { ProviderDrift } from '../../src/providers/kit/provider-drift.js';
import type { DriftSighting } from '../../src/providers/kit/drift.js';

/** A Vast instance as the live API answers it, with every kind of value a shape must never carry. */
const SECRETISH = {
  id: 31000123,
  label: 'gpr-7d1c9a2e-1',
  actual_status: 'hibernating',
  public_ipaddr: '203.0.113.77',
  ssh_host: 'ssh7.vast.ai',
  ports: { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: '41022' }] },
  extra_env: [['SECRET_TOKEN', 'sk-live-abcdefghijklmnopqrstuvwxyz0123456789']],
  status_msg: 'pulled image for Ada Lovelace at ada@example.com',
  by_ip: { '203.0.113.77': { up: true } },
  by_id: { '31000123': 1, '31000124': 2 },
  nested: { a: { b: { c: { d: { e: { f: { g: 'deep' } } } } } } },
};

describe('the drift report: shapes', () => {
  it('keeps keys and types only: no string, number or address of the value reaches the shape', () => {
    const shape = shapeOf(SECRETISH);
    const text = shapeText(shape);
    for (const value of [
      '31000123',
      '31000124',
      'gpr-7d1c9a2e',
      'hibernating',
      '203.0.113.77',
      'ssh7.vast.ai',
      '41022',
      'SECRET_TOKEN',
      'sk-live',
      'Ada',
      'ada@example.com',
      'deep',
      '0.0.0.0',
    ])
      assert.ok(!text.includes(value), `${value} leaked into ${text}`);
    assert.deepEqual(shape, {
      actual_status: 'string',
      by_id: { '<key>': 'number' },
      by_ip: { '<key>': { up: 'boolean' } },
      extra_env: [['string']],
      id: 'number',
      label: 'string',
      nested: { a: { b: { c: { d: { e: '{…}' } } } } },
      ports: { '22/tcp': [{ HostIp: 'string', HostPort: 'string' }] },
      public_ipaddr: 'string',
      ssh_host: 'string',
      status_msg: 'string',
    });
  });

  it('reads null, empty arrays and arrays of mixed elements, and merges objects key by key', () => {
    assert.equal(shapeOf(null), 'null');
    assert.deepEqual(shapeOf([]), []);
    assert.deepEqual(shapeOf([1, 'a', null]), ['null|number|string']);
    assert.deepEqual(shapeOf([{ a: 1 }, { b: 'x' }, { a: null }]), [{ a: 'null|number', b: 'string' }]);
    assert.deepEqual(shapeOf([1, { a: 1 }]), ['mixed']);
    assert.deepEqual(mergeShapes([], ['string']), ['string']);
  });

  it('is bounded: depth, keys per object, elements per array and nodes in all', () => {
    const wide = Object.fromEntries(
      Array.from({ length: 100 }, (_, i) => [`field_${String.fromCharCode(97 + (i % 26))}${i}`, i]),
    );
    const shape = shapeOf(wide) as Record<string, unknown>;
    assert.equal(Object.keys(shape).length, SHAPE_BOUNDS.keys + 1);
    assert.equal(shape['…'], 'more keys');
    // Only the first elements are read: a later one of another kind does not change the shape.
    assert.deepEqual(shapeOf([1, 2, 3, 4, 5, 'late']), ['number']);
    const huge = Array.from({ length: 5 }, () =>
      Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}x`, [{ a: 1, b: [1] }]])),
    );
    assert.ok(shapeText(shapeOf(huge)).length < 20_000);
    assert.ok(shapeText(shapeOf(huge)).includes('…'), 'the node budget cut it short');
  });

  it('does not depend on key order, and hashes the canonical form', () => {
    assert.equal(shapeText(shapeOf({ b: 1, a: 'x' })), shapeText(shapeOf({ a: 'y', b: 2 })));
    assert.equal(shapeHash(shapeOf({ b: 1, a: 'x' })), shapeHash(shapeOf({ a: 'zz', b: 3 })));
    assert.notEqual(shapeHash(shapeOf({ a: 1 })), shapeHash(shapeOf({ a: '1' })));
    assert.match(shapeHash('string'), /^[0-9a-f]{64}$/);
  });

  it('keeps an own key named __proto__ as a key, not as a prototype', () => {
    const shape = shapeOf(JSON.parse('{"__proto__": {"x": 1}}')) as Record<string, unknown>;
    assert.deepEqual(Object.keys(shape), ['__proto__']);
    assert.equal(Object.getPrototypeOf(shape), Object.prototype);
  });

  it('shows a shape on one line', () => {
    assert.equal(
      compactShape(shapeOf({ id: 1, ports: { '22/tcp': [{ HostPort: '1' }] }, gone: null })),
      '{gone:null,id:number,ports:{22/tcp:[{HostPort:string}]}}',
    );
  });

  it('keeps name-like keys and states, and nothing that looks like an id, an address or a token', () => {
    for (const k of ['actual_status', '22/tcp', '8080/tcp', 'instance-type', 'gpu_name', 'RateLimit-Policy'])
      assert.ok(isSafeKey(k), k);
    for (const k of ['31000123', '10.0.0.1', 'a1b2c3d4e5f6', 'ssh-ed25519 AAAA', 'ada@example.com', 'x'.repeat(49)])
      assert.ok(!isSafeKey(k), k);
    assert.equal(safeName('hibernating'), 'hibernating');
    assert.equal(safeName('PAUSED_BY_HOST'), 'PAUSED_BY_HOST');
    assert.equal(safeName(''), '(empty)');
    assert.equal(safeName(null), '(null)');
    assert.equal(safeName(7), '(number)');
    assert.equal(safeName('moved to 203.0.113.7'), '(not a name: 20 characters)');
    assert.equal(safeName('i-0abc12345def'), '(not a name: 14 characters)');
    assert.equal(safeCode('global/brand-new'), 'global/brand-new');
    assert.equal(safeCode('Instance type by id 123 is not available'), undefined);
  });

  it('names calls by their template: no query string, ids replaced', () => {
    assert.equal(callTemplate('GET /api/v0/instances/31000123/?owner=me'), 'GET /api/v0/instances/{id}/');
    assert.equal(callTemplate('GET /v2/pods/x7f9s2k3l4m5n6'), 'GET /v2/pods/{id}');
    assert.equal(callTemplate('GET /v2/pods/abcdefghijklmn'), 'GET /v2/pods/{id}', 'an id without a digit');
    assert.equal(callTemplate('POST /api/v1/instance-operations/launch'), 'POST /api/v1/instance-operations/launch');
    assert.equal(
      callTemplate('DELETE /api/v1/ssh-keys/0920582c7ff041399e34823a0be62549'),
      'DELETE /api/v1/ssh-keys/{id}',
    );
    assert.equal(callTemplate('PUT /api/v0/asks/{id}/'), 'PUT /api/v0/asks/{id}/');
    assert.equal(callTemplate('GET /v2/catalog/gpus gpus[]'), 'GET /v2/catalog/gpus gpus[]');
    assert.equal(callTemplate('pod status'), 'pod status');
    assert.equal(callTemplate('instance "x"'), 'instance ?x?');
    assert.equal(callTemplate(''), '(unnamed)');
    assert.ok(callTemplate(`GET /${'a/'.repeat(200)}`).length <= 160);
  });
});

describe(ProviderDrift.name, () => {
  const recorded = () => {
    const sightings: DriftSighting[] = [];
    return { sightings, sut: new ProviderDrift({ record: (s) => void sightings.push(s) }, 'acme') };
  };

  it('reports an unmatched error by its status, a code-like code and its body shape', () => {
    const { sut, sightings } = recorded();
    sut.unmatchedError('POST /v2/pods', {
      status: 409,
      code: 'pod_conflict',
      json: { title: 'Conflict', detail: 'pod abc123def belongs to ada@example.com', errors: ['x'] },
      text: '',
    });
    sut.unmatchedError('GET /v2/pods', { status: 502, json: null, text: '<html><title>bad gateway</title></html>' });
    sut.unmatchedError('GET /v2/pods', { status: 418, code: 'free text: 10.0.0.1', json: null, text: 'I am a teapot' });
    assert.deepEqual(
      sightings.map((s) => [s.kind, s.where, s.shape]),
      [
        [
          'unmatched_error',
          'POST /v2/pods',
          { status: '409', code: 'pod_conflict', body: { detail: 'string', errors: ['string'], title: 'string' } },
        ],
        ['unmatched_error', 'GET /v2/pods', { status: '502', body: 'html' }],
        ['unmatched_error', 'GET /v2/pods', { status: '418', body: 'text' }],
      ],
    );
  });

  it('hands back the bad_response error to throw, having reported the shape', () => {
    const { sut, sightings } = recorded();
    const err = sut.badPage('GET /v2/pods', { pods: [], pagination: 7 }, 'pagination is not an object', 200);
    assert.equal(err.errorClass, 'bad_response');
    assert.equal(err.status, 200);
    assert.deepEqual(sightings, [
      {
        provider: 'acme',
        kind: 'unknown_page_shape',
        where: 'GET /v2/pods',
        shape: { pagination: 'number', pods: [] },
      },
    ]);
  });

  it('never lets a failing recorder fail the call', () => {
    const sut = new ProviderDrift(
      {
        record() {
          throw new Error('store down');
        },
      },
      'acme',
    );
    assert.doesNotThrow(() => sut.unknownState('pod status', 'NEW'));
    assert.equal(sut.badResponse('GET /x', {}, 'm').errorClass, 'bad_response');
  });
});
