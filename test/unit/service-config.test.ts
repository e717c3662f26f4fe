import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';
import {
  BLANK_VALUES,
  BOOLEAN_TABLE,
  booleanRefusal,
  integerRefusal,
  integerTable,
  listRefusal,
  listTable,
  REFUSED_WEB_URLS,
} from '../helpers/env-values.js';

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({});
    assert.equal(c.http.port, 8080);
    assert.equal(c.db.url, 'mysql://root@127.0.0.1:3306/gpu_rental');
    assert.equal(c.http.publicBaseUrl, 'http://localhost:8080');
    assert.deepEqual(c.providers, [{ id: 'local', options: {}, markupPercent: 0 }]);
    assert.equal(c.inventory.refreshSeconds, 30);
    assert.equal(c.agents.v1Enabled, true);
    assert.equal(c.signup.ratePerMinute, 30);
    assert.equal(c.logLevel, 'info');
    assert.equal(c.billing.defaultModel, 'ACCOUNT_BALANCE');
  });

  it('derives PUBLIC_BASE_URL from PORT and trims a trailing slash', () => {
    assert.equal(loadConfig({ PORT: '9000' }).http.publicBaseUrl, 'http://localhost:9000');
    assert.equal(loadConfig({ PUBLIC_BASE_URL: 'https://gpu.example/' }).http.publicBaseUrl, 'https://gpu.example');
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

  it('groups the settings by concern', () => {
    assert.deepEqual(Object.keys(loadConfig({})).sort(), [
      'agents',
      'billing',
      'db',
      'developmentRun',
      'http',
      'inventory',
      'jobs',
      'logLevel',
      'machines',
      'metrics',
      'nodeEnv',
      'providers',
      'push',
      'releases',
      'rentals',
      'secrets',
      'signup',
      'stripe',
      'telegram',
      'webhooks',
    ]);
  });

  describe('reads each kind as the plugin kit reads options (the tables test/unit/kit-options.test.ts runs too)', () => {
    const refusal = (env: Record<string, string>, message: string) =>
      assert.throws(
        () => loadConfig(env),
        (e: Error) => e instanceof ConfigError && e.message === message,
        JSON.stringify(env),
      );

    it('booleans', () => {
      for (const [value, want] of BOOLEAN_TABLE.accepted)
        assert.equal(loadConfig({ AGENT_V1_ENABLED: value }).agents.v1Enabled, want, value);
      for (const value of BLANK_VALUES) assert.equal(loadConfig({ AGENT_V1_ENABLED: value }).agents.v1Enabled, true);
      for (const value of BOOLEAN_TABLE.refused)
        refusal({ AGENT_V1_ENABLED: value }, booleanRefusal('AGENT_V1_ENABLED', value.trim()));
    });

    it('whole numbers within their bounds', () => {
      const table = integerTable(1, 100_000);
      for (const [value, want] of table.accepted)
        assert.equal(loadConfig({ MACHINE_MAX_DISK_GB: value }).machines.maxDiskGb, want, value);
      for (const value of BLANK_VALUES)
        assert.equal(loadConfig({ MACHINE_MAX_DISK_GB: value }).machines.maxDiskGb, 1000);
      for (const value of table.refused)
        refusal({ MACHINE_MAX_DISK_GB: value }, integerRefusal('MACHINE_MAX_DISK_GB', 1, 100_000, value));
    });

    it('lists, naming the item refused', () => {
      const table = listTable('pytorch/pytorch:*', 'nvcr.io/nvidia/*', 'bad image');
      const help = 'image patterns (letters, digits, . _ - / : @, and * for any run of characters)';
      for (const [value, want] of table.accepted)
        assert.deepEqual(loadConfig({ MACHINE_IMAGE_ALLOWLIST: value }).machines.imageAllowlist, want, value);
      for (const value of BLANK_VALUES)
        assert.deepEqual(loadConfig({ MACHINE_IMAGE_ALLOWLIST: value }).machines.imageAllowlist, []);
      for (const [value, item] of table.refused)
        refusal({ MACHINE_IMAGE_ALLOWLIST: value }, listRefusal('MACHINE_IMAGE_ALLOWLIST', help, item));
    });

    it('http(s) URLs', () => {
      for (const value of REFUSED_WEB_URLS)
        refusal({ PUBLIC_BASE_URL: value }, `PUBLIC_BASE_URL must be an http(s) URL, got "${value}"`);
      // A password in a refused URL is not quoted.
      refusal(
        { DATABASE_URL: 'postgres://app:hunter2@db.example/x' },
        'DATABASE_URL must be a mysql: or mariadb: URL, got "postgres://app:…@db.example/x"',
      );
    });

    it('choices, in any case', () => {
      assert.equal(loadConfig({ LOG_LEVEL: ' Debug ' }).logLevel, 'debug');
      assert.equal(loadConfig({ DEFAULT_BILLING_MODEL: 'legacy_prepaid' }).billing.defaultModel, 'LEGACY_PREPAID');
      refusal({ JOBS_CLAIM: 'lock' }, 'JOBS_CLAIM must be skip-locked or update, got "lock"');
    });

    it('never quotes a secret', () => {
      assert.throws(
        () => loadConfig({ ADMIN_JOBS_PASSWORD: 'hunter2' }),
        (e: Error) =>
          /^ADMIN_JOBS_PASSWORD must be at least 12 characters/.test(e.message) && !e.message.includes('hunter2'),
      );
    });
  });

  it('accepts AGENT_V1_ENABLED=false and LEGACY_PREPAID', () => {
    const c = loadConfig({ AGENT_V1_ENABLED: 'false', DEFAULT_BILLING_MODEL: 'LEGACY_PREPAID' });
    assert.equal(c.agents.v1Enabled, false);
    assert.equal(c.billing.defaultModel, 'LEGACY_PREPAID');
  });
});
