import assert from 'node:assert/strict';
import { AppError } from '../../src/errors/app-error.js';
import {
  APPROVAL_LIMITS,
  keyLimitsOf,
  limitsBeyond,
  parseKeyLimits,
  type KeyLimits,
  type KeyLimitsInput,
} from '../../src/modules/keys/key-limits.js';

const AMOUNTS = { maxPerRentalMinor: 500, budgetLimitMinor: 500, maxConcurrentDeployments: 1 };
const LIMITS: KeyLimits = { ...AMOUNTS, maxRentalSeconds: null, idleTerminateMinutes: null };

describe("a key's limits as one value (key-limits.ts)", () => {
  it('takes a longest rental or idle minutes left out as none, and keeps nothing else', () => {
    assert.deepEqual(keyLimitsOf(AMOUNTS), LIMITS);
    const given = { ...AMOUNTS, maxRentalSeconds: 3600, idleTerminateMinutes: 30, name: 'trainer' };
    assert.deepEqual(keyLimitsOf(given), { ...AMOUNTS, maxRentalSeconds: 3600, idleTerminateMinutes: 30 });
  });

  // [what is given, the fields the refusal names; none when it is accepted]
  const CASES: [KeyLimitsInput, string[]][] = [
    [AMOUNTS, []],
    [{ ...AMOUNTS, maxRentalSeconds: 60, idleTerminateMinutes: 1440 }, []],
    [APPROVAL_LIMITS.maximums, []],
    [{ ...AMOUNTS, maxPerRentalMinor: 499 }, ['maxPerRentalMinor']],
    [{ ...AMOUNTS, budgetLimitMinor: APPROVAL_LIMITS.maximums.budgetLimitMinor + 1 }, ['budgetLimitMinor']],
    [{ ...AMOUNTS, maxConcurrentDeployments: 1.5 }, ['maxConcurrentDeployments']],
    [{ ...AMOUNTS, maxPerRentalMinor: Number.NaN, maxRentalSeconds: 59 }, ['maxPerRentalMinor', 'maxRentalSeconds']],
    [{ ...AMOUNTS, idleTerminateMinutes: 0 }, ['idleTerminateMinutes']],
  ];

  for (const [given, named] of CASES) {
    it(`${JSON.stringify(given)} is ${named.length ? `refused naming ${named.join(', ')}` : 'accepted'}`, () => {
      if (named.length === 0) {
        assert.deepEqual(parseKeyLimits(given, APPROVAL_LIMITS), keyLimitsOf(given));
        return;
      }
      assert.throws(
        () => parseKeyLimits(given, APPROVAL_LIMITS),
        (err: unknown) => {
          assert.ok(err instanceof AppError);
          assert.equal(err.code, 'VALIDATION_FAILED');
          assert.deepEqual(
            [...err.message.matchAll(/(\w+) must be/g)].map((m) => m[1]),
            named,
          );
          return true;
        },
      );
    });
  }

  it('names what an agent key would hold beyond its issuer, amounts first', () => {
    const own: KeyLimits = { ...LIMITS, maxPerRentalMinor: 1000, maxRentalSeconds: 3600 };
    assert.deepEqual(limitsBeyond({ ...LIMITS, maxRentalSeconds: 3600 }, own), []);
    assert.deepEqual(limitsBeyond({ ...LIMITS, budgetLimitMinor: 501, maxRentalSeconds: 60 }, own), [
      'budgetLimitMinor',
    ]);
    // An issuer with a longest rental hands out none longer, and none without one.
    assert.deepEqual(limitsBeyond({ ...LIMITS, maxConcurrentDeployments: 2 }, own), [
      'maxConcurrentDeployments',
      'maxRentalSeconds',
    ]);
    assert.deepEqual(limitsBeyond({ ...LIMITS, maxRentalSeconds: 3601 }, own), ['maxRentalSeconds']);
    // Without one of its own, any length (or none) is within; idle minutes are the agent key's own.
    assert.deepEqual(limitsBeyond({ ...LIMITS, maxRentalSeconds: 86_400, idleTerminateMinutes: 5 }, LIMITS), []);
  });
});
