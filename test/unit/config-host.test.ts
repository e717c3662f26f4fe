import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config.js';

describe('HOST', () => {
  const production = {
    NODE_ENV: 'production',
    SECRETS_KEY: randomBytes(32).toString('base64'),
    STRIPE_WEBHOOK_SECRET: 'whsec_test',
  };

  it('is 127.0.0.1 in development and 0.0.0.0 in production unless set', () => {
    assert.equal(loadConfig({}).http.host, '127.0.0.1');
    assert.equal(loadConfig({ NODE_ENV: 'development' }).http.host, '127.0.0.1');
    assert.equal(loadConfig(production).http.host, '0.0.0.0');
  });

  it('binds what HOST says in either mode', () => {
    assert.equal(loadConfig({ HOST: '0.0.0.0' }).http.host, '0.0.0.0');
    assert.equal(loadConfig({ ...production, HOST: '10.0.0.5' }).http.host, '10.0.0.5');
    assert.equal(loadConfig({ HOST: '  ::1 ' }).http.host, '::1');
  });
});
