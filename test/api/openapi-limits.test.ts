import assert from 'node:assert/strict';
import { TOPUP_LIMITS } from '../../src/modules/billing/topup-limits.js';
import {
  AGENT_KEY_LIMITS,
  APPROVAL_LIMITS,
  IDLE_TERMINATE_MINUTES,
  MAX_RENTAL_SECONDS,
  SIGNUP_LIMITS,
  type KeyAmounts,
} from '../../src/modules/keys/key-limits.js';
import {
  MAX_EXPOSED_PORTS,
  MAX_STARTUP_SCRIPT_BYTES,
  MAX_WAIT_FOR_CAPACITY_SECONDS,
  MIN_LEASE_SECONDS,
  MIN_WAIT_FOR_CAPACITY_SECONDS,
} from '../../src/vocabulary/limits.js';
import { createTestContext, type TestContext } from '../helpers/context.js';

/** The request schemas repeat the limits as JSDoc numbers; this holds them to the one declaration. */
describe('OpenAPI minimums and maximums equal the limit constants', () => {
  let ctx: TestContext;
  let schemas: Record<string, { properties: Record<string, { minimum?: number; maximum?: number; default?: number }> }>;
  before(async () => {
    ctx = await createTestContext();
    schemas = (await ctx.api.get('/api/openapi.json')).body.components.schemas;
  });
  after(() => ctx.close());

  const FIELDS = ['maxPerRentalMinor', 'budgetLimitMinor', 'maxConcurrentDeployments'] as const;
  function bounds(schema: string): { minimums: KeyAmounts; maximums: KeyAmounts } {
    const props = schemas[schema].properties;
    const pick = (k: 'minimum' | 'maximum') =>
      Object.fromEntries(FIELDS.map((f) => [f, props[f][k]])) as unknown as KeyAmounts;
    return { minimums: pick('minimum'), maximums: pick('maximum') };
  }

  it('signup: bounds and defaults', () => {
    assert.deepEqual(bounds('SignupRequest'), { minimums: SIGNUP_LIMITS.minimums, maximums: SIGNUP_LIMITS.maximums });
    const props = schemas.SignupRequest.properties;
    assert.deepEqual(Object.fromEntries(FIELDS.map((f) => [f, props[f].default])), SIGNUP_LIMITS.defaults);
  });

  it('approval of an agent authorization', () => {
    assert.deepEqual(bounds('ApproveAuthorizationRequest'), {
      minimums: APPROVAL_LIMITS.minimums,
      maximums: APPROVAL_LIMITS.maximums,
    });
  });

  it('agent keys issued by an owner', () => {
    assert.deepEqual(bounds('IssueAgentKeyRequest'), {
      minimums: AGENT_KEY_LIMITS.minimums,
      maximums: AGENT_KEY_LIMITS.maximums,
    });
  });

  it("a key's longest rental, wherever an owner gives an agent key its limits", () => {
    for (const schema of ['ApproveAuthorizationRequest', 'IssueAgentKeyRequest']) {
      const p = schemas[schema].properties.maxRentalSeconds;
      assert.deepEqual([p.minimum, p.maximum], [MAX_RENTAL_SECONDS.minimum, MAX_RENTAL_SECONDS.maximum], schema);
    }
  });

  it("a key's idle minutes, wherever an owner gives an agent key its limits", () => {
    for (const schema of ['ApproveAuthorizationRequest', 'IssueAgentKeyRequest']) {
      const p = schemas[schema].properties.idleTerminateMinutes;
      assert.deepEqual(
        [p.minimum, p.maximum],
        [IDLE_TERMINATE_MINUTES.minimum, IDLE_TERMINATE_MINUTES.maximum],
        schema,
      );
    }
  });

  it('top-ups', () => {
    const p = schemas.TopupRequest.properties.amountMinor;
    assert.deepEqual([p.minimum, p.maximum], [TOPUP_LIMITS.minimumMinor, TOPUP_LIMITS.maximumMinor]);
  });

  it('a rental: its lease, its wait for capacity and its machine settings', () => {
    type Prop = { minimum?: number; maximum?: number; maxLength?: number; maxItems?: number };
    const props = (name: string) => schemas[name].properties as Record<string, Prop>;
    for (const shape of ['OfferRentalRequest', 'GpuIntentRentalRequest'])
      assert.equal(props(shape).terminateAfterSeconds.minimum, MIN_LEASE_SECONDS, shape);
    const wait = props('GpuIntentRentalRequest').waitForCapacitySeconds;
    assert.deepEqual([wait.minimum, wait.maximum], [MIN_WAIT_FOR_CAPACITY_SECONDS, MAX_WAIT_FOR_CAPACITY_SECONDS]);
    const machine = props('MachineSettingsRequest');
    assert.equal(machine.startupScript.maxLength, MAX_STARTUP_SCRIPT_BYTES);
    assert.equal(machine.ports.maxItems, MAX_EXPOSED_PORTS);
  });
});
