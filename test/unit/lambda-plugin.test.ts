import assert from 'node:assert/strict';
import { classifyLambdaError, LAMBDA_ERROR_TABLE } from '../../plugins/lambda/errors.js';
import lambdaPlugin from '../../plugins/lambda/index.js';
import { LABEL_TAG_KEY, matchLabel } from '../../plugins/lambda/provider.js';
import type { LambdaInstance } from '../../plugins/lambda/types.js';
import { loadPlugin } from '../../src/providers/provider-registry.js';

/** Every `error.code` the Lambda Cloud API 1.8.3 and 1.9.3 documents list (components.schemas.ApiError*). */
const DOCUMENTED_CODES = [
  'global/conflict',
  'global/forbidden',
  'global/not-found',
  'global/invalid-api-key',
  'global/account-inactive',
  'global/object-does-not-exist',
  'global/invalid-parameters',
  'global/invalid-address',
  'instance-operations/launch/file-system-in-wrong-region',
  'instance-operations/launch/insufficient-capacity',
  'global/quota-exceeded',
  'global/duplicate',
  'filesystems/filesystem-in-use',
  'global/internal-error',
  'firewall-rulesets/firewall-ruleset-in-use',
];

/** Codes the live API answers that no document lists (test/fixtures/providers/lambda/). */
const LIVE_CODES = ['global/unknown'];

describe('Lambda plugin options', () => {
  it('has the documented defaults', () => {
    const o = lambdaPlugin.validateOptions({ API_KEY: 'secret_abc' });
    assert.equal(o.apiUrl, 'https://cloud.lambda.ai');
    assert.equal(o.sshPort, 22);
    assert.equal(o.maximumDurationSeconds, 7 * 86400);
    assert.equal(o.regions, null);
    const all = lambdaPlugin.validateOptions({
      API_KEY: 'k',
      API_URL: 'http://127.0.0.1:9/',
      SSH_PORT: '2222',
      MAX_DURATION_SECONDS: '86400',
      REGIONS: 'us-east-1, us-west-1',
    });
    assert.deepEqual(
      [all.apiUrl, all.sshPort, all.maximumDurationSeconds, all.regions],
      ['http://127.0.0.1:9', 2222, 86400, ['us-east-1', 'us-west-1']],
    );
  });

  const bad: [Record<string, string>, RegExp][] = [
    [{ API_KEY: 'k', APIKEY: 'x' }, /LAMBDA_PROVIDER_APIKEY is not an option/],
    [{ API_KEY: 'k', MARKUP_PERCENT: '10' }, /LAMBDA_PROVIDER_MARKUP_PERCENT is not an option/],
    [{}, /LAMBDA_PROVIDER_API_KEY is required/],
    [{ API_KEY: '  ' }, /LAMBDA_PROVIDER_API_KEY is required/],
    [{ API_KEY: 'k', SSH_PORT: 'ssh' }, /LAMBDA_PROVIDER_SSH_PORT must be a whole number/],
    [{ API_KEY: 'k', SSH_PORT: '70000' }, /LAMBDA_PROVIDER_SSH_PORT must be a whole number from 1 to 65535/],
    [{ API_KEY: 'k', MAX_DURATION_SECONDS: '0' }, /LAMBDA_PROVIDER_MAX_DURATION_SECONDS/],
    [{ API_KEY: 'k', API_URL: 'cloud.lambda.ai' }, /LAMBDA_PROVIDER_API_URL/],
    [
      { API_KEY: 'k', API_URL: 'https://cloud.lambda.ai/api/v1' },
      /LAMBDA_PROVIDER_API_URL must be an http\(s\) origin without a path/,
    ],
    [{ API_KEY: 'k', REGIONS: 'Virginia' }, /LAMBDA_PROVIDER_REGIONS/],
  ];
  for (const [raw, message] of bad) {
    it(`refuses ${JSON.stringify(raw)} naming the variable`, () => {
      assert.throws(() => lambdaPlugin.validateOptions(raw), message);
    });
  }

  it('never puts the API key in an error message', () => {
    assert.throws(
      () => lambdaPlugin.validateOptions({ API_KEY: 'secret_visible', SSH_PORT: 'x' }),
      (err: Error) => !err.message.includes('secret_visible'),
    );
  });
});

describe('the lambda plugin', () => {
  it('is what PROVIDERS=lambda loads', async () => {
    const loaded = await loadPlugin('lambda');
    assert.equal(loaded.id, lambdaPlugin.id);
    assert.equal(loaded.description, lambdaPlugin.description);
    assert.throws(() => loaded.validateOptions({}), /LAMBDA_PROVIDER_API_KEY is required/);
  });
});

describe('Lambda error and state tables', () => {
  it('has a row for every documented and every live error code and no other', () => {
    const named = new Set(LAMBDA_ERROR_TABLE.flatMap((r) => r.match.codes ?? []).filter((c) => !c.endsWith('/*')));
    assert.deepEqual([...named].sort(), [...DOCUMENTED_CODES, ...LIVE_CODES].sort());
    // The code decides, whatever the status says.
    assert.equal(classifyLambdaError(500, 'instance-operations/launch/insufficient-capacity').create, 'unavailable');
    assert.equal(classifyLambdaError(400, 'global/internal-error').create, 'ambiguous');
  });
});

describe('LambdaProvider labels', () => {
  it('falls back on the name only for an instance without our tag', () => {
    const inst = (id: string, name: string, tag?: string): LambdaInstance => ({
      id,
      name,
      status: 'active',
      tags: tag ? [{ key: LABEL_TAG_KEY, value: tag }] : [],
    });
    const list = [inst('1', 'gpr-a', 'gpr-b'), inst('2', 'gpr-a'), inst('3', 'x', 'gpr-c')];
    assert.equal(matchLabel(list, 'gpr-a')?.id, '2');
    assert.equal(matchLabel(list, 'gpr-b')?.id, '1');
    assert.equal(matchLabel([inst('1', 'gpr-a', 'gpr-b')], 'gpr-a'), undefined);
    assert.equal(matchLabel([{ ...inst('4', 'x', 'gpr-d'), status: 'terminated' }], 'gpr-d'), undefined);
  });
});
