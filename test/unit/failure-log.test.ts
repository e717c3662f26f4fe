import assert from 'node:assert/strict';
import { createLogger } from '../../src/logger.js';
import { ProviderFailureLog, providerFailureCause } from '../../src/providers/provider-failures.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';

/** A logger whose lines are kept, parsed. */
function captured(): {
  lines: { msg: string; err?: { stack?: string }; errorClass?: string }[];
  log: ProviderFailureLog;
} {
  const lines: { msg: string; err?: { stack?: string } }[] = [];
  const logger = createLogger('info', {
    write: (chunk: string) =>
      void String(chunk)
        .split('\n')
        .filter(Boolean)
        .forEach((l) => lines.push(JSON.parse(l))),
  });
  return { lines, log: new ProviderFailureLog(logger) };
}

describe('provider failures in the log', () => {
  it('names the class and the setting in one line, with the stack the first time a kind is seen and never again until it recovers', () => {
    const { lines, log } = captured();
    const refused = new ProviderApiError('auth', 'list offers: 401 Unauthorized');
    for (let i = 0; i < 3; i++) log.failed('vast', 'inventory refresh', refused);
    assert.deepEqual(
      lines.map((l) => l.msg),
      Array(3).fill('inventory refresh failed for vast: VAST_PROVIDER_API_KEY refused (auth)'),
    );
    assert.ok(lines[0].err?.stack, 'the first carries the stack');
    assert.ok(
      lines.slice(1).every((l) => l.err === undefined),
      'repeats are one line each',
    );
    log.failed(
      'vast',
      'inventory refresh',
      new ProviderApiError('unavailable', 'list offers: fetch failed (connect ECONNREFUSED 127.0.0.1:1)'),
    );
    assert.equal(lines[3].msg, 'inventory refresh failed for vast: VAST_PROVIDER_API_URL unreachable (unavailable)');
    assert.ok(lines[3].err?.stack, 'another kind shows its stack once');
    log.succeeded('vast', 'inventory refresh');
    log.failed('vast', 'inventory refresh', refused);
    assert.ok(lines[4].err?.stack, 'after a recovery, the next outage shows its stack again');
  });

  it('tells a port the HTTP client refuses apart from an unreachable cloud', () => {
    assert.match(
      providerFailureCause('runpod', 'unavailable', 'list pods: fetch failed (bad port)'),
      /^RUNPOD_PROVIDER_API_URL names a port the HTTP client refuses to call/,
    );
    assert.equal(providerFailureCause('lambda', 'timeout'), 'LAMBDA_PROVIDER_API_URL unreachable (timeout)');
    assert.equal(providerFailureCause('vast', null), 'no successful refresh yet: is a worker running?');
  });
});
