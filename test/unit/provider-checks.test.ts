import assert from 'node:assert/strict';
import type { ProviderCheck } from '../../src/providers/provider-check.js';
import { checkProviders, judgeCheck } from '../../src/providers/provider-checks.js';
import type { RegisteredProvider } from '../../src/providers/provider-registry.js';
import type { Provider } from '../../src/providers/provider.js';

/** A check that found everything in order; each test spoils one part. */
const good = (): ProviderCheck => ({
  calls: [{ name: 'GET /me', ok: true, ms: 3, status: 200, detail: 'the key was accepted' }],
  credentials: { accepted: true, detail: 'the key was accepted' },
  offers: { considered: 10, parsed: 10, dropped: {}, hints: {} },
  userAgent: { sent: 'gpu-rental/1.0.0', accepted: true, detail: 'the API itself answered' },
});

/** A registered provider whose only working method is `check`. */
function registered(id: string, check?: () => Promise<ProviderCheck>): RegisteredProvider {
  const provider = { id, ...(check ? { check } : {}) } as unknown as Provider;
  return { id, description: `${id} cloud`, markupPercent: 0, provider };
}

describe('provider checks (judgeCheck, checkProviders)', () => {
  it('finds no problem in a check that found everything in order', () => {
    assert.deepEqual(judgeCheck('vast', good()), { problems: [], warnings: [] });
  });

  it("says a refused key once, with the plugin's fix, and not again for the call that told it", () => {
    const c = good();
    c.calls = [
      {
        name: 'GET /me',
        ok: false,
        ms: 2,
        status: 401,
        errorClass: 'auth',
        detail: 'the API key was refused (HTTP 401)',
      },
    ];
    c.credentials = {
      accepted: false,
      errorClass: 'auth',
      detail: 'the API key was refused (HTTP 401)',
      fix: 'set X_KEY',
    };
    c.offers = { considered: 0, parsed: 0, dropped: {}, hints: {}, detail: 'not read' };
    assert.deepEqual(judgeCheck('x', c).problems, ['x: the API key was refused (HTTP 401): set X_KEY']);
  });

  it('blames the edge, not the key, for a refused User-Agent', () => {
    const c = good();
    c.calls = [
      { name: 'GET /v2/pods', ok: false, ms: 2, status: 403, errorClass: 'user_agent', detail: 'from the edge' },
    ];
    c.credentials = { accepted: false, errorClass: 'user_agent', detail: 'not checked' };
    c.userAgent = { sent: 'gpu-rental/1.0.0', accepted: false, detail: 'edge', fix: 'ask the cloud' };
    assert.deepEqual(judgeCheck('runpod', c).problems, [
      'runpod: the edge refused our User-Agent "gpu-rental/1.0.0" (GET /v2/pods: HTTP 403): ask the cloud',
    ]);
  });

  it('makes any other failed call a problem, with a fix by its class when the plugin gives none', () => {
    const c = good();
    c.calls.push({
      name: 'GET /ssh-keys',
      ok: false,
      ms: 30000,
      errorClass: 'timeout',
      detail: 'no answer within 30000 ms',
    });
    const [line] = judgeCheck('lambda', c).problems;
    assert.match(
      line,
      /^lambda: GET \/ssh-keys failed \(timeout\): no answer within 30000 ms: the API did not answer in time: .*LAMBDA_PROVIDER_API_URL/,
    );
  });

  it('makes impossible SSH keys and an empty balance problems', () => {
    const c = good();
    c.sshKeys = { possible: false, detail: 'listing failed', fix: 'fix it' };
    c.balance = { amountMinor: -150, currency: 'USD', detail: 'credit' };
    assert.deepEqual(judgeCheck('lambda', c).problems, [
      'lambda: SSH keys: listing failed: fix it',
      "lambda: the account's balance is -$1.50: top the account up at the cloud",
    ]);
    c.sshKeys.possible = true;
    c.balance.amountMinor = null;
    assert.deepEqual(judgeCheck('lambda', c).problems, [], 'a balance the answer did not carry is no problem');
  });

  it('warns of asks dropped while others are offered, and makes a cloud with no offer at all a problem', () => {
    const c = good();
    c.offers = {
      considered: 10,
      parsed: 4,
      dropped: { b: 1, a: 5 },
      hints: { a: 'raise A' },
      detail: 'the search stopped at its limit',
    };
    assert.deepEqual(judgeCheck('vast', c), {
      problems: [],
      warnings: ['vast: 6 of 10 asks dropped: a 5 (raise A); b 1', 'vast: the search stopped at its limit'],
    });
    c.offers.parsed = 0;
    assert.deepEqual(judgeCheck('vast', c).problems, [
      'vast: none of its 10 asks could be offered: a 5 (raise A); b 1',
    ]);
    c.offers = { considered: 0, parsed: 0, dropped: {}, hints: {} };
    assert.deepEqual(judgeCheck('vast', c).problems, ['vast: the cloud answered with no asks at all']);
  });

  it('runs every check at once: a plugin without one is no problem, one that throws or outlives its bound is', async () => {
    let started = 0;
    const report = await checkProviders(
      [
        registered('a', async () => (started++, good())),
        registered('b'),
        registered('c', async () => {
          started++;
          throw new Error('boom');
        }),
        registered('d', () => (started++, new Promise<ProviderCheck>(() => {}))),
      ],
      { now: () => new Date('2026-11-20T10:00:00.000Z'), timeoutMs: 50 },
    );
    assert.equal(started, 3);
    assert.equal(report.checkedAt, '2026-11-20T10:00:00.000Z');
    assert.deepEqual(
      report.providers.map((p) => [p.id, p.supported, p.usable, p.check === null]),
      [
        ['a', true, true, false],
        ['b', false, true, true],
        ['c', true, false, true],
        ['d', true, false, true],
      ],
    );
    assert.equal(report.usable, false);
    assert.deepEqual(report.problems, [
      'c: the check failed: boom: report it with this line',
      'd: the check did not finish within 50 ms: the API did not answer in time: run the check again, and check the network path to D_PROVIDER_API_URL',
    ]);
  });
});
