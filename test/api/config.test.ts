import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({});
    assert.equal(c.port, 8080);
    assert.equal(c.databaseUrl, 'mysql://root@127.0.0.1:3306/gpu_rental');
    assert.equal(c.publicBaseUrl, 'http://localhost:8080');
    assert.deepEqual(c.providers, [{ id: 'local', options: {}, markupPercent: 0 }]);
    assert.equal(c.inventoryRefreshSeconds, 30);
    assert.equal(c.agentV1Enabled, true);
    assert.equal(c.signupRatePerMinute, 30);
    assert.equal(c.logLevel, 'info');
    assert.equal(c.defaultBillingModel, 'ACCOUNT_BALANCE');
  });

  it('derives PUBLIC_BASE_URL from PORT and trims a trailing slash', () => {
    assert.equal(loadConfig({ PORT: '9000' }).publicBaseUrl, 'http://localhost:9000');
    assert.equal(loadConfig({ PUBLIC_BASE_URL: 'https://gpu.example/' }).publicBaseUrl, 'https://gpu.example');
  });

  it('passes <ID>_PROVIDER_* variables to the named plugin', () => {
    const c = loadConfig({ PROVIDERS: 'local', LOCAL_PROVIDER_INVENTORY: '/tmp/inv.json', OTHER_PROVIDER_X: '1' });
    assert.deepEqual(c.providers, [{ id: 'local', options: { INVENTORY: '/tmp/inv.json' }, markupPercent: 0 }]);
  });

  const bad: [Record<string, string>, RegExp][] = [
    [{ PORT: 'eighty' }, /^PORT /],
    [{ PORT: '70000' }, /^PORT /],
    [{ DATABASE_URL: 'postgres://x/y' }, /^DATABASE_URL /],
    [{ DATABASE_URL: 'not a url' }, /^DATABASE_URL /],
    [{ PUBLIC_BASE_URL: 'ftp://x' }, /^PUBLIC_BASE_URL /],
    [{ PROVIDERS: 'Local!' }, /^PROVIDERS /],
    [{ PROVIDERS: 'local,local' }, /^PROVIDERS /],
    [{ INVENTORY_REFRESH_SECONDS: '0' }, /^INVENTORY_REFRESH_SECONDS /],
    [{ AGENT_V1_ENABLED: 'maybe' }, /^AGENT_V1_ENABLED /],
    [{ SIGNUP_RATE_PER_MINUTE: '-1' }, /^SIGNUP_RATE_PER_MINUTE /],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL /],
    [{ DEFAULT_BILLING_MODEL: 'FREE' }, /^DEFAULT_BILLING_MODEL /],
    [{ SECRETS_KEY: 'c2hvcnQ=' }, /^SECRETS_KEY /],
    [{ NODE_ENV: 'production' }, /^SECRETS_KEY /],
    [{ STRIPE_SECRET_KEY: 'sk_test_x' }, /^STRIPE_WEBHOOK_SECRET /],
  ];
  for (const [env, re] of bad) {
    it(`rejects ${JSON.stringify(env)} naming the variable`, () => {
      assert.throws(
        () => loadConfig(env),
        (err: Error) => err instanceof ConfigError && re.test(err.message),
      );
    });
  }

  it('accepts AGENT_V1_ENABLED=false and LEGACY_PREPAID', () => {
    const c = loadConfig({ AGENT_V1_ENABLED: 'false', DEFAULT_BILLING_MODEL: 'LEGACY_PREPAID' });
    assert.equal(c.agentV1Enabled, false);
    assert.equal(c.defaultBillingModel, 'LEGACY_PREPAID');
  });
});
