import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { classifyLambdaError } from '../../plugins/lambda/errors.js';
import { offersFromInstanceTypes } from '../../plugins/lambda/offers.js';
import { LAMBDA_STATE_TABLE } from '../../plugins/lambda/states.js';
import type { LambdaInstanceTypes } from '../../plugins/lambda/types.js';
import { lambdaRecorded } from '../fakes/lambda-recorded.js';

const DIR = new URL('../fixtures/providers/lambda/', import.meta.url);
const fixtureFiles = () => readdirSync(DIR).filter((f) => f !== 'SOURCES.md');
const fixtureText = (file: string) => readFileSync(new URL(file, DIR), 'utf8');

/**
 * What the plugin must make of each recorded Lambda answer. Every file in the fixture directory
 * needs an entry: a new recording without one fails the suite until someone decides what it means.
 */
const DECISIONS: Record<string, () => void> = {
  // A terminate of an instance already terminating: Lambda does not know what happened. A launch
  // with this answer may have happened (ambiguous); a read is transient, never "gone" or "auth".
  'terminate-global-unknown.txt': () => {
    const { code, message } = lambdaRecorded().globalUnknown;
    assert.equal(code, 'global/unknown');
    for (const status of [400, 500]) {
      const rule = classifyLambdaError(status, code, message);
      assert.equal(rule.create, 'ambiguous', `HTTP ${status}`);
      assert.equal(rule.read, 'unavailable', `HTTP ${status}`);
    }
  },
  // The account's instance limit, told as invalid parameters: a quota, so the next offer is tried.
  'launch-400-invalid-parameters-too-many.txt': () => {
    const { code, message } = lambdaRecorded().tooMany;
    assert.equal(code, 'global/invalid-parameters');
    const rule = classifyLambdaError(400, code, message);
    assert.equal(rule.create, 'unavailable');
    assert.equal(rule.read, 'unavailable');
  },
  // A field the launch refuses: our request is wrong, asking again will not help.
  'launch-invalid-parameters-quantity.txt': () => {
    const { code, message } = lambdaRecorded().quantity;
    const rule = classifyLambdaError(400, code, message);
    assert.equal(rule.create, 'rejected');
    assert.equal(rule.read, 'request');
  },
  'openapi-1.9.3-excerpt.json': () => {
    const doc = JSON.parse(fixtureText('openapi-1.9.3-excerpt.json')) as {
      info: { version: string };
      components: {
        schemas: Record<string, { properties?: { code?: { const?: string } }; enum?: string[]; example?: unknown }>;
      };
    };
    assert.equal(doc.info.version, '1.9.3');
    const schemas = doc.components.schemas;
    // Every error code of the document is decided by its own row, never by the status alone.
    const codes = Object.entries(schemas)
      .filter(([name]) => name.startsWith('ApiError'))
      .map(([, s]) => s.properties?.code?.const);
    assert.ok(codes.length >= 3);
    for (const code of codes) {
      assert.ok(code);
      assert.ok(classifyLambdaError(418, code).match.codes?.includes(code), code);
    }
    assert.equal(classifyLambdaError(404, 'global/not-found').read, 'gone');
    assert.equal(classifyLambdaError(403, 'global/forbidden').read, 'auth');
    // The instance statuses are exactly the table's.
    assert.deepEqual([...(schemas.InstanceStatus.enum ?? [])].sort(), Object.keys(LAMBDA_STATE_TABLE).sort());
    // A type the document lists at 0 cents with zero specs is never offered for free.
    const offers = offersFromInstanceTypes(schemas.InstanceTypes.example as LambdaInstanceTypes, {
      regions: null,
      maximumDurationSeconds: 3600,
    });
    assert.deepEqual(offers, []);
  },
};

describe('Lambda plugin over the recorded fixtures (test/fixtures/providers/lambda)', () => {
  it('has a decision for every fixture file', () => {
    assert.deepEqual(fixtureFiles().sort(), Object.keys(DECISIONS).sort());
  });

  for (const file of fixtureFiles()) {
    it(`decides ${file}`, () => {
      const decide = DECISIONS[file];
      assert.ok(decide, `no decision for ${file}`);
      decide();
    });
  }
});
