import assert from 'node:assert/strict';
import {
  decideCreateStep,
  type CreateStep,
  type CreateStepInput,
} from '../../src/modules/rentals/lifecycle/create-step.js';

const timing = { pollMs: 1000, adoptBoundMs: 60_000, activeBoundMs: 900_000 };
const base: CreateStepInput = {
  requestKind: 'INTENT',
  last: null,
  foundByLabel: false,
  sinceAttemptMs: 0,
  retryInMs: 0,
  candidatesLeft: 3,
  timing,
};

/** One row per case: what is on record, and the step the create loop must take. */
const CASES: Array<[string, Partial<CreateStepInput>, CreateStep['kind'], Partial<CreateStep>?]> = [
  ['no attempt yet, candidates left', {}, 'next-candidate'],
  [
    'no attempt yet, explicit offer gone from the order',
    { requestKind: 'OFFER', candidatesLeft: 0 },
    'fail',
    { code: 'OFFER_NOT_FOUND' },
  ],
  ['no attempt yet, no intent candidate', { candidatesLeft: 0 }, 'fail', { code: 'NO_CAPACITY' }],
  ['crashed mid-call and the label turns up', { last: 'STARTED', foundByLabel: true }, 'adopt'],
  ['crashed mid-call and nothing carries the label', { last: 'STARTED' }, 'retry-same-label', { delayMs: 0 }],
  ['ambiguous and the label turns up', { last: 'AMBIGUOUS', foundByLabel: true }, 'adopt'],
  [
    'ambiguous, not found, within the adoption bound',
    { last: 'AMBIGUOUS', sinceAttemptMs: 59_999 },
    'wait',
    { delayMs: 1000 },
  ],
  [
    'ambiguous, not found, at the adoption bound',
    { last: 'AMBIGUOUS', sinceAttemptMs: 60_000 },
    'fail',
    { code: 'PROVISIONING_FAILED', attemptOutcome: 'NOT_FOUND' },
  ],
  [
    'ambiguous past the bound with candidates left: never another create',
    { last: 'AMBIGUOUS', sinceAttemptMs: 120_000, candidatesLeft: 2 },
    'fail',
    { code: 'PROVISIONING_FAILED' },
  ],
  [
    'throttled, the provider’s wait not over',
    { last: 'THROTTLED', retryInMs: 4000 },
    'retry-same-label',
    { delayMs: 4000 },
  ],
  ['throttled, the wait over', { last: 'THROTTLED', retryInMs: -5 }, 'retry-same-label', { delayMs: 0 }],
  [
    'throttled past the provisioning bound, candidates left',
    { last: 'THROTTLED', sinceAttemptMs: 900_000, candidatesLeft: 1 },
    'next-candidate',
  ],
  [
    'throttled past the provisioning bound, none left',
    { last: 'THROTTLED', sinceAttemptMs: 900_000, candidatesLeft: 0 },
    'fail',
    { code: 'NO_CAPACITY' },
  ],
  [
    'throttled: a label that turns up is not looked at (nothing was created)',
    { last: 'THROTTLED', foundByLabel: true, retryInMs: 10 },
    'retry-same-label',
    { delayMs: 10 },
  ],
  ['unavailable, candidates left', { last: 'UNAVAILABLE', candidatesLeft: 1 }, 'next-candidate'],
  ['unavailable, none left (intent)', { last: 'UNAVAILABLE', candidatesLeft: 0 }, 'fail', { code: 'NO_CAPACITY' }],
  [
    'unavailable, none left (offer)',
    { requestKind: 'OFFER', last: 'UNAVAILABLE', candidatesLeft: 0 },
    'fail',
    { code: 'OFFER_NOT_FOUND' },
  ],
  [
    'rejected: fail at once, no further candidates',
    { last: 'REJECTED', candidatesLeft: 2 },
    'fail',
    { code: 'PROVIDER_REJECTED' },
  ],
  ['too few GPUs (destroyed), candidates left', { last: 'GPU_MISMATCH', candidatesLeft: 1 }, 'next-candidate'],
  [
    'too few GPUs (destroyed): the label, still listed while it dies, is never adopted',
    { last: 'GPU_MISMATCH', foundByLabel: true, candidatesLeft: 1 },
    'next-candidate',
  ],
  ['too few GPUs, none left', { last: 'GPU_MISMATCH', candidatesLeft: 0 }, 'fail', { code: 'GPU_MISMATCH' }],
  [
    'too few GPUs on an explicit offer',
    { requestKind: 'OFFER', last: 'GPU_MISMATCH', candidatesLeft: 0 },
    'fail',
    { code: 'GPU_MISMATCH' },
  ],
  ['created and still there', { last: 'CREATED', foundByLabel: true }, 'adopt'],
  ['created but gone before it was recorded', { last: 'CREATED' }, 'fail', { code: 'PROVISIONING_FAILED' }],
  ['adopted but gone', { last: 'ADOPTED' }, 'fail', { code: 'PROVISIONING_FAILED' }],
  ['not found after the bound, then it turns up', { last: 'NOT_FOUND', foundByLabel: true }, 'adopt'],
  ['not found after the bound', { last: 'NOT_FOUND' }, 'fail', { code: 'PROVISIONING_FAILED' }],
  ['failed', { last: 'FAILED', candidatesLeft: 2 }, 'fail', { code: 'PROVISIONING_FAILED' }],
];

describe('decideCreateStep (the create loop’s next step)', () => {
  for (const [name, input, kind, extra] of CASES) {
    it(name, () => {
      const step = decideCreateStep({ ...base, ...input });
      assert.equal(step.kind, kind);
      if (extra) assert.deepEqual({ ...step, ...extra }, step, JSON.stringify(step));
      if (step.kind === 'fail') assert.ok(!/gpr-|local|label/i.test(step.reason), 'customer-safe reason');
    });
  }

  it('has a row for every attempt outcome', () => {
    const covered = new Set(CASES.map(([, input]) => input.last ?? null));
    for (const o of [
      null,
      'STARTED',
      'CREATED',
      'UNAVAILABLE',
      'AMBIGUOUS',
      'ADOPTED',
      'NOT_FOUND',
      'FAILED',
      'THROTTLED',
      'REJECTED',
      'GPU_MISMATCH',
    ])
      assert.ok(covered.has(o as never), String(o));
  });
});
