import assert from 'node:assert/strict';
import { formatDuration, parseDuration, rentalRefusalNext } from '../../clients/sdk/src/index.js';

describe('GprClient (SDK): durations and the next step of a refusal', () => {
  it("durations and the hints for refusals naming a setting, the lease or the key's longest rental", () => {
    assert.deepEqual(
      ['2h', '90m', '1h30m', '3600s', '1d', '45', ' 2H '].map(parseDuration),
      [7200, 5400, 5400, 3600, 86_400, 45, 7200],
    );
    for (const bad of ['', 'h', '2 h', '1.5h', '30m2h', '-5', '2hours'])
      assert.equal(parseDuration(bad), undefined, bad);
    assert.deepEqual([7200, 5400, 45, 90_061].map(formatDuration), ['2 h', '1 h 30 min', '45 s', '1 d 1 h 1 min 1 s']);
    const names = {
      image: 'IMG',
      env: 'ENV',
      startupScript: 'SCRIPT',
      ports: 'PORTS',
      diskGb: 'DISK',
      lease: 'LEASE',
      waitForCapacity: 'WAIT',
      offers: 'OFFERS',
      account: 'ACCOUNT',
    };
    const next = (code: string, message: string) => rentalRefusalNext(code, message, names);
    assert.match(
      next('VALIDATION_FAILED', "Invalid request: machine.ports: 22 is SSH's port")!,
      /^Expose at most 5 ports \(PORTS\).*\(OFFERS\)/,
    );
    assert.match(next('VALIDATION_FAILED', 'Invalid request: body.machine.env: too many')!, /^Variables \(ENV\)/);
    assert.match(
      next(
        'NO_MATCHING_OFFER',
        'None of the 3 offers of 1 x H100 at or under 400 cents per hour can honour machine.image (none runs a custom image).',
      )!,
      /^Give IMG as/,
    );
    assert.match(
      next(
        'VALIDATION_FAILED',
        'Invalid request: terminateAfterSeconds: 7200 is longer than this key allows: its rentals last at most 3600 seconds (1 hour)',
      )!,
      /^This key's maxRentalSeconds \(ACCOUNT\) caps every lease: give LEASE/,
    );
    assert.match(
      next(
        'VALIDATION_FAILED',
        "Invalid request: terminateAfterSeconds: 900000 is longer than this offer's maximum duration of 86400 seconds (1 day)",
      )!,
      /^LEASE is at least 60 s and at most the offer's maximumDurationSeconds \(OFFERS\)/,
    );
    assert.match(
      next('VALIDATION_FAILED', 'Invalid request: waitForCapacitySeconds: only accounts billed by usage')!,
      /^WAIT is 60 s to 24 h/,
    );
    assert.equal(next('VALIDATION_FAILED', 'Invalid request: budgetMinor: must be at most 5'), undefined);
    assert.equal(next('KEY_LIMIT_EXCEEDED', 'machine.ports'), undefined);
  });
});
