import assert from 'node:assert/strict';
import { ConfigError } from '../../src/config-values.js';
import { declareOptions, optionVariable, parseOptions } from '../../src/providers/kit/options.js';
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

const DECL = declareOptions({
  providerId: 'acme',
  options: {
    API_KEY: { kind: 'string', required: true, secret: true, noSpaces: true, hint: 'from the ACME console' },
    API_URL: { kind: 'origin', default: 'https://api.acme.test', appends: '/v1/...' },
    IMAGE: { kind: 'string', default: 'acme/base:1', noSpaces: true, maxLength: 20 },
    DISK_GB: { kind: 'integer', min: 8, max: 1000, default: 32 },
    CLOUD: { kind: 'enum', values: ['SECURE', 'COMMUNITY'], default: 'SECURE' },
    REGIONS: { kind: 'list', item: /^[a-z]+-\d+$/, itemHelp: 'region codes such as us-1' },
    ALLOW: { kind: 'flag' },
  },
});

const parse = (raw: Record<string, string>) => parseOptions(DECL, raw);

describe('kit: option parser', () => {
  it('applies defaults and types every value', () => {
    const o = parse({ API_KEY: ' k1 ' });
    assert.deepEqual(o, {
      API_KEY: 'k1',
      API_URL: 'https://api.acme.test',
      IMAGE: 'acme/base:1',
      DISK_GB: 32,
      CLOUD: 'SECURE',
      REGIONS: null,
      ALLOW: false,
    });
    const all = parse({
      API_KEY: 'k',
      API_URL: 'http://127.0.0.1:9/',
      IMAGE: 'x:2',
      DISK_GB: '64',
      CLOUD: 'community',
      REGIONS: 'us-1, eu-2',
      ALLOW: 'yes',
    });
    assert.deepEqual(all, {
      API_KEY: 'k',
      API_URL: 'http://127.0.0.1:9',
      IMAGE: 'x:2',
      DISK_GB: 64,
      CLOUD: 'COMMUNITY',
      REGIONS: ['us-1', 'eu-2'],
      ALLOW: true,
    });
  });

  it('refuses an unknown name, listing every known variable', () => {
    assert.throws(
      () => parse({ API_KEY: 'k', APIKEY: 'x' }),
      (e: Error) =>
        e.message ===
        'ACME_PROVIDER_APIKEY is not an option of the acme provider (known: ACME_PROVIDER_API_KEY, ACME_PROVIDER_API_URL, ACME_PROVIDER_IMAGE, ACME_PROVIDER_DISK_GB, ACME_PROVIDER_CLOUD, ACME_PROVIDER_REGIONS, ACME_PROVIDER_ALLOW)',
    );
  });

  const bad: [Record<string, string>, RegExp][] = [
    [{}, /^ACME_PROVIDER_API_KEY is required \(from the ACME console\)$/],
    [{ API_KEY: '   ' }, /^ACME_PROVIDER_API_KEY is required/],
    [
      { API_KEY: 'k', API_URL: 'api.acme.test' },
      /^ACME_PROVIDER_API_URL must be an http\(s\) origin without a path such as https:\/\/api.acme.test \(the plugin appends \/v1\/\.\.\.\), got "api.acme.test"$/,
    ],
    [
      { API_KEY: 'k', API_URL: 'https://api.acme.test/v1' },
      /^ACME_PROVIDER_API_URL must be an http\(s\) origin without a path .*appends \/v1\/\.\.\./,
    ],
    [
      { API_KEY: 'k', API_URL: 'ftp://api.acme.test' },
      /^ACME_PROVIDER_API_URL must be an http\(s\) origin without a path/,
    ],
    [{ API_KEY: 'k', IMAGE: 'a b' }, /^ACME_PROVIDER_IMAGE must be a single token without spaces, got "a b"$/],
    [{ API_KEY: 'k', IMAGE: 'x'.repeat(21) }, /^ACME_PROVIDER_IMAGE must be at most 20 characters$/],
    [{ API_KEY: 'k', DISK_GB: '4' }, /^ACME_PROVIDER_DISK_GB must be a whole number from 8 to 1000, got "4"$/],
    [{ API_KEY: 'k', DISK_GB: '32.5' }, /^ACME_PROVIDER_DISK_GB must be a whole number/],
    [{ API_KEY: 'k', DISK_GB: '1e2' }, /^ACME_PROVIDER_DISK_GB must be a whole number/],
    [{ API_KEY: 'k', CLOUD: 'moon' }, /^ACME_PROVIDER_CLOUD must be SECURE or COMMUNITY, got "moon"$/],
    [
      { API_KEY: 'k', REGIONS: 'us-1,Virginia' },
      /^ACME_PROVIDER_REGIONS must be a comma-separated list of region codes such as us-1, got "Virginia"$/,
    ],
    [{ API_KEY: 'k', REGIONS: ' , ' }, /^ACME_PROVIDER_REGIONS must be a comma-separated list/],
    [{ API_KEY: 'k', ALLOW: 'maybe' }, /^ACME_PROVIDER_ALLOW must be true or false, got "maybe"$/],
  ];
  for (const [raw, message] of bad) {
    it(`refuses ${JSON.stringify(raw)} naming the variable`, () => {
      assert.throws(
        () => parse(raw),
        (e: Error) => message.test(e.message),
      );
    });
  }

  it('never echoes a secret value', () => {
    assert.throws(
      () => parse({ API_KEY: 'sk-live secret' }),
      (e: Error) =>
        /^ACME_PROVIDER_API_KEY must be a single token/.test(e.message) &&
        !e.message.includes('secret') &&
        !e.message.includes('sk-live'),
    );
  });

  describe('reads each kind as the service reads its own variables (the tables test/unit/service-config.test.ts runs too)', () => {
    const one = (name: string, value: string) => parse({ API_KEY: 'k', [name]: value }) as Record<string, unknown>;
    const refusal = (name: string, value: string, message: string) =>
      assert.throws(
        () => one(name, value),
        (e: Error) => e instanceof ConfigError && e.message === message,
        `${name}=${JSON.stringify(value)}`,
      );

    it('booleans', () => {
      for (const [value, want] of BOOLEAN_TABLE.accepted) assert.equal(one('ALLOW', value).ALLOW, want, value);
      for (const value of BLANK_VALUES) assert.equal(one('ALLOW', value).ALLOW, false);
      for (const value of BOOLEAN_TABLE.refused)
        refusal('ALLOW', value, booleanRefusal('ACME_PROVIDER_ALLOW', value.trim()));
    });

    it('whole numbers within their bounds', () => {
      const table = integerTable(8, 1000);
      for (const [value, want] of table.accepted) assert.equal(one('DISK_GB', value).DISK_GB, want, value);
      for (const value of BLANK_VALUES) assert.equal(one('DISK_GB', value).DISK_GB, 32);
      for (const value of table.refused)
        refusal('DISK_GB', value, integerRefusal('ACME_PROVIDER_DISK_GB', 8, 1000, value));
    });

    it('lists, naming the item refused', () => {
      const table = listTable('us-1', 'eu-2', 'Virginia');
      for (const [value, want] of table.accepted) assert.deepEqual(one('REGIONS', value).REGIONS, want, value);
      for (const value of BLANK_VALUES) assert.equal(one('REGIONS', value).REGIONS, null);
      for (const [value, item] of table.refused)
        refusal('REGIONS', value, listRefusal('ACME_PROVIDER_REGIONS', 'region codes such as us-1', item));
    });

    it('http(s) URLs', () => {
      for (const value of REFUSED_WEB_URLS)
        assert.throws(
          () => one('API_URL', value),
          (e: Error) =>
            e instanceof ConfigError &&
            e.message.startsWith('ACME_PROVIDER_API_URL must be an http(s) ') &&
            e.message.endsWith(`, got "${value}"`),
          value,
        );
    });

    it('choices, in any case', () => {
      assert.equal(one('CLOUD', ' Community ').CLOUD, 'COMMUNITY');
      refusal('CLOUD', 'moon', 'ACME_PROVIDER_CLOUD must be SECURE or COMMUNITY, got "moon"');
    });
  });

  it('derives the variable name from the provider id', () => {
    assert.equal(optionVariable('runpod', 'API_KEY'), 'RUNPOD_PROVIDER_API_KEY');
  });
});
