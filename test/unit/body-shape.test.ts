import assert from 'node:assert/strict';
import type { Request, Response } from 'express';
import { AppError } from '../../src/errors/app-error.js';
import { rejectUnknownProperties } from '../../src/http/body-shape.js';
import { ROUTE_BODIES } from '../../src/http/body-schemas.js';

const OFFER = 'abcdef00-0000-4000-8000-000000000000';

/** What the name check answers a body sent to `path`: the refusal's message, or null when it lets the body through. */
function namesCheck(body: unknown, path = '/api/v1/rentals', method = 'POST'): string | null {
  let passed: unknown = 'not called';
  rejectUnknownProperties()({ method, path, body } as Request, {} as Response, (err?: unknown) => {
    passed = err;
  });
  if (passed === undefined) return null;
  assert.ok(passed instanceof AppError, `expected an AppError, got ${String(passed)}`);
  assert.equal(passed.code, 'VALIDATION_FAILED');
  assert.equal(passed.status, 422);
  return passed.message;
}

describe('body names at the edge (body-shape.ts)', () => {
  it('lets through any body whose names one form admits, whatever its values', () => {
    for (const body of [
      { offerId: OFFER },
      { offerId: 7, budgetMinor: 'lots', machine: { ports: ['8000:8000'], env: ['A=1'] } },
      { gpuModel: 'H100', gpuCount: 3, maxHourlyPriceMinor: 1.5, machine: { image: 'ubuntu', env: { ANY_NAME: '1' } } },
      { budgetMinor: 600 },
      { offerId: OFFER, machine: null },
      [OFFER],
    ])
      assert.equal(namesCheck(body), null, JSON.stringify(body));
  });

  it('refuses a name no form admits, at the top, naming what the route accepts', () => {
    assert.equal(
      namesCheck({ offerId: OFFER, colour: 'red' }),
      'Invalid request: unknown property "colour"; this route accepts offerId, budgetMinor, machine, terminateAfterSeconds, gpuModel, gpuCount, maxHourlyPriceMinor, waitForCapacitySeconds.',
    );
  });

  it('refuses an unknown property inside machine, naming what it accepts', () => {
    const message = namesCheck({ offerId: OFFER, machine: { image: 'ubuntu', gpus: 2 } });
    assert.equal(
      message,
      'Invalid request: machine: unknown property "gpus"; machine accepts image, env, startupScript, ports, diskGb.',
    );
    assert.equal(namesCheck({ gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 1, machine: { gpus: 2 } }), message);
  });

  it('answers thousands of unknown names inside machine with a short refusal naming five', () => {
    const machine = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, 1]));
    const message = namesCheck({ offerId: OFFER, machine })!;
    assert.match(message, /^Invalid request: machine: unknown properties "k0", "k1", "k2", "k3", "k4" and 19995 more;/);
    assert.ok(message.length < 200, message);
  });

  it('refuses a body mixing the fields of both rental forms, saying which belongs to which', () => {
    assert.equal(
      namesCheck({ offerId: OFFER, gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 }),
      'Invalid request: send either {offerId, …} or {gpuModel, gpuCount, maxHourlyPriceMinor, …}, not fields of both: offerId belongs to the first; gpuModel, gpuCount, maxHourlyPriceMinor belong to the second.',
    );
    assert.match(
      namesCheck({ offerId: OFFER, waitForCapacitySeconds: 600, machine: { gpus: 1 } })!,
      /not fields of both: offerId belongs to the first; waitForCapacitySeconds belongs to the second\.$/,
    );
  });

  it('checks every route with a closed JSON body, and only its own method and path', () => {
    assert.match(namesCheck({ freeCredits: 1 }, '/api/v1/signup')!, /unknown property "freeCredits"/);
    assert.match(namesCheck({ freeCredits: 1 }, '/API/v1/signup/')!, /unknown property "freeCredits"/);
    assert.equal(namesCheck({ freeCredits: 1 }, '/api/v1/signup', 'GET'), null);
    assert.equal(namesCheck({ anything: 1 }, '/api/v1/not-a-route'), null);
    const closed = ROUTE_BODIES.filter((r) => r.names);
    assert.ok(closed.length >= 10, `${closed.length} routes with closed bodies`);
    for (const r of closed) {
      const path = r.expressPath.replace(/:\w+/g, 'x');
      assert.match(namesCheck({ notAField: 1 }, path, r.method)!, /unknown property "notAField"/, path);
    }
  });
});
