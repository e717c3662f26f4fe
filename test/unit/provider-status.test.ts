import assert from 'node:assert/strict';
import { ProviderStatus } from '../../src/modules/inventory/provider-status.entity.js';
import {
  providerAdvice,
  providerHealth,
  providerStatuses,
  withDriftCounts,
} from '../../src/modules/inventory/provider-status.js';
import type { RegisteredProvider } from '../../src/providers/provider-registry.js';
import { ScriptedCloud } from '../inventory/scripted-provider.js';

const NOW = new Date('2026-05-01T12:00:00Z');
const MAX_AGE_S = 600;
const ago = (s: number) => new Date(NOW.getTime() - s * 1000);

function status(providerId: string, o: Partial<ProviderStatus> = {}): ProviderStatus {
  return Object.assign(new ProviderStatus(), {
    providerId,
    lastRefreshAt: ago(10),
    lastRefreshOk: true,
    lastSuccessAt: ago(10),
    offerCount: 3,
    lastErrorClass: null,
    lastErrorAt: null,
    ...o,
  });
}

const registered = (...ids: string[]): RegisteredProvider[] =>
  ids.map((id) => ({ id, description: `the ${id} cloud`, markupPercent: 0, provider: new ScriptedCloud(id) }));

describe('provider status', () => {
  it('is ok while the latest refresh succeeded, degraded while its last success is within the offer age, down past it', () => {
    assert.equal(providerHealth(status('p'), NOW, MAX_AGE_S), 'ok');
    assert.equal(providerHealth(status('p', { lastRefreshOk: false }), NOW, MAX_AGE_S), 'degraded');
    assert.equal(
      providerHealth(status('p', { lastRefreshOk: false, lastSuccessAt: ago(599) }), NOW, MAX_AGE_S),
      'degraded',
    );
    assert.equal(
      providerHealth(status('p', { lastRefreshOk: false, lastSuccessAt: ago(600) }), NOW, MAX_AGE_S),
      'down',
    );
    // A success that old is down even if the latest refresh said ok: its offers are stale.
    assert.equal(providerHealth(status('p', { lastSuccessAt: ago(601) }), NOW, MAX_AGE_S), 'down');
    assert.equal(providerHealth(status('p', { lastSuccessAt: null }), NOW, MAX_AGE_S), 'down');
    assert.equal(providerHealth(undefined, NOW, MAX_AGE_S), 'down');
  });

  it('lists the configured providers in configuration order, leaving out rows of providers no longer configured', () => {
    const rows = [
      status('b'),
      status('gone'),
      status('a', { lastRefreshOk: false, lastErrorClass: 'auth', lastErrorAt: ago(5) }),
    ];
    const out = providerStatuses(rows, registered('a', 'b'), new Map([['b', 2]]), NOW, MAX_AGE_S);
    assert.deepEqual(out, [
      {
        id: 'a',
        description: 'the a cloud',
        status: 'degraded',
        lastRefreshAt: ago(10).toISOString(),
        lastSuccessAt: ago(10).toISOString(),
        offerCount: 0,
        lastErrorClass: 'auth',
        lastErrorAt: ago(5).toISOString(),
      },
      {
        id: 'b',
        description: 'the b cloud',
        status: 'ok',
        lastRefreshAt: ago(10).toISOString(),
        lastSuccessAt: ago(10).toISOString(),
        offerCount: 2,
        lastErrorClass: null,
        lastErrorAt: null,
      },
    ]);
  });

  it("adds each provider's shapes in the drift report for the listing, and none for one without", () => {
    const drift = new Map([
      ['a', { shapes: 2, seen: 9 }],
      ['gone', { shapes: 1, seen: 1 }],
    ]);
    const out = withDriftCounts(providerStatuses([], registered('a', 'b'), new Map(), NOW, MAX_AGE_S), drift);
    assert.deepEqual(
      out.map((s) => [s.id, s.status, s.drift]),
      [
        ['a', 'down', { shapes: 2, seen: 9 }],
        ['b', 'down', { shapes: 0, seen: 0 }],
      ],
    );
  });

  it('counts the offers the process serves, not those the last refresh listed', () => {
    const [out] = providerStatuses(
      [status('a', { offerCount: 40 })],
      registered('a'),
      new Map([['a', 7]]),
      NOW,
      MAX_AGE_S,
    );
    assert.equal(out.offerCount, 7);
  });

  it('shows a provider never refreshed as down, with nothing recorded', () => {
    assert.deepEqual(providerStatuses([], registered('new'), new Map(), NOW, MAX_AGE_S), [
      {
        id: 'new',
        description: 'the new cloud',
        status: 'down',
        lastRefreshAt: null,
        lastSuccessAt: null,
        offerCount: 0,
        lastErrorClass: null,
        lastErrorAt: null,
      },
    ]);
  });

  it('tells an operator where to look for a provider that is not ok', () => {
    assert.match(providerAdvice('vast', 'down', 'auth'), /^vast down: VAST_PROVIDER_API_KEY refused \(auth\)$/);
    assert.match(providerAdvice('vast', 'degraded', 'rate_limited'), /recovers by itself/);
    assert.match(providerAdvice('lambda', 'down', null), /is a worker running\?/);
  });
});
