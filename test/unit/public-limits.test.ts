import assert from 'node:assert/strict';
import { redactUrl } from '../../src/app.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { addressBucket } from '../../src/http/client-address.js';

describe('per-address limits of public creates', () => {
  it('addressBucket: IPv4 itself, IPv4-mapped as IPv4, IPv6 by /64', () => {
    assert.equal(addressBucket('192.0.2.1'), '192.0.2.1');
    assert.equal(addressBucket('::ffff:192.0.2.1'), '192.0.2.1');
    assert.equal(addressBucket('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(addressBucket('2001:db8:0:0:1:2:3:4'), '2001:db8:0:0::/64');
    assert.equal(addressBucket('::1'), '0:0:0:0::/64');
    assert.equal(addressBucket('fe80::1%eth0'), 'fe80:0:0:0::/64');
  });
});

describe('TRUST_PROXY', () => {
  it('defaults to trusting no forwarded header and takes hop counts, addresses and ranges', () => {
    assert.equal(loadConfig({}).http.trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: 'false' }).http.trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: '1' }).http.trustProxy, 1);
    assert.deepEqual(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8,2001:db8::/32' }).http.trustProxy, [
      'loopback',
      '10.0.0.0/8',
      '2001:db8::/32',
    ]);
  });

  it('refuses true (every client trusted) and anything that is not an address', () => {
    assert.throws(
      () => loadConfig({ TRUST_PROXY: 'true' }),
      (e: Error) => e instanceof ConfigError && /hop|addresses/.test(e.message),
    );
    assert.throws(
      () => loadConfig({ TRUST_PROXY: 'loopback,proxy.example' }),
      /TRUST_PROXY must be a comma-separated list of the proxies' .*, got "proxy.example"$/,
    );
    assert.throws(() => loadConfig({ TRUST_PROXY: '10.0.0.0/33' }), /TRUST_PROXY .*, got "10.0.0.0\/33"/);
    assert.throws(() => loadConfig({ TRUST_PROXY: '99' }), /hop count/);
  });
});

describe('approval codes never reach the request log', () => {
  it('redacts the code whatever the spelling of the target', () => {
    for (const url of [
      '/approve/apr_SECRET',
      '/Approve/apr_SECRET',
      '/APPROVE/apr_SECRET?x=1',
      '//approve/apr_SECRET',
      'http://gpu.test/approve/apr_SECRET',
      'HTTP://gpu.test:8080/Approve/apr_SECRET#x',
      '/%61pprove/apr_SECRET',
    ]) {
      assert.equal(redactUrl(url), '/approve/[redacted]', url);
    }
    assert.equal(redactUrl('/api/v1/me?token=x'), '/api/v1/me');
  });
});
