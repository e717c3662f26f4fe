import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync, gzipSync } from 'fflate';
import { centsLookingPrice, effectiveSettings, packagedBaseUrl } from '../../clients/sdk/src/index.js';
import { withTarEntry } from '../../src/http/release-tarball.js';

/** Every file of a tar archive, by name, later entries winning as tar readers do. */
function tarFiles(tar: Uint8Array): Map<string, string> {
  const files = new Map<string, string>();
  for (let at = 0; at + 512 <= tar.length;) {
    const h = Buffer.from(tar.subarray(at, at + 512));
    if (h.every((b) => b === 0)) break;
    const name = h.subarray(0, 100).toString('utf8').replace(/\0.*$/s, '');
    const size = parseInt(h.subarray(124, 136).toString('ascii').replace(/\0.*$/s, ''), 8);
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
    assert.equal(parseInt(h.subarray(148, 156).toString('ascii'), 8), sum, `checksum of ${name}`);
    files.set(name, Buffer.from(tar.subarray(at + 512, at + 512 + size)).toString('utf8'));
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return files;
}

describe('clients: the service they came from, and prices typed in cents', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('settings fall back to the packaged service after the flag, GPR_BASE_URL and the stored address, and to localhost last', () => {
    process.env.XDG_CONFIG_HOME = mkdtempSync(join(tmpdir(), 'gpr-defaults-'));
    delete process.env.GPR_BASE_URL;
    assert.equal(effectiveSettings({}).baseUrl, 'http://localhost:8080');
    assert.equal(effectiveSettings({}, 'https://gpus.example.net/').baseUrl, 'https://gpus.example.net');
    process.env.GPR_BASE_URL = '';
    assert.equal(
      effectiveSettings({}, 'https://gpus.example.net').baseUrl,
      'https://gpus.example.net',
      'an empty variable is no address',
    );
    process.env.GPR_BASE_URL = 'http://127.0.0.1:8081';
    assert.equal(effectiveSettings({}, 'https://gpus.example.net').baseUrl, 'http://127.0.0.1:8081');
    assert.equal(
      effectiveSettings({ baseUrl: 'http://127.0.0.1:8082' }, 'https://gpus.example.net').baseUrl,
      'http://127.0.0.1:8082',
    );
  });

  it('reads the packaged address only when it is an http(s) URL', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpr-packaged-'));
    const file = (text: string) => {
      const path = join(dir, `${Math.random()}.json`);
      writeFileSync(path, text);
      return pathToFileURL(path);
    };
    assert.equal(packagedBaseUrl(file('{"baseUrl":"https://gpus.example.net"}')), 'https://gpus.example.net');
    assert.equal(packagedBaseUrl(file('{"baseUrl":"file:///etc/passwd"}')), undefined);
    assert.equal(packagedBaseUrl(file('{"baseUrl":"https://a b"}')), undefined);
    assert.equal(packagedBaseUrl(file('not json')), undefined);
    assert.equal(packagedBaseUrl(pathToFileURL(join(dir, 'absent.json'))), undefined);
  });

  it('adds a file to a gzipped tar that replaces one of the same name for a reader, keeping the rest', () => {
    const first = withTarEntry(
      withTarEntry(gzipSync(Buffer.alloc(1024)), 'package/a.txt', 'one'),
      'package/service.json',
      '{"baseUrl":"x"}\n',
    );
    const second = withTarEntry(first, 'package/service.json', '{"baseUrl":"y"}\n');
    const files = tarFiles(gunzipSync(second));
    assert.deepEqual(
      [...files],
      [
        ['package/a.txt', 'one'],
        ['package/service.json', '{"baseUrl":"y"}\n'],
      ],
    );
    assert.deepEqual(
      withTarEntry(first, 'package/b', 'z'),
      withTarEntry(first, 'package/b', 'z'),
      'the same bytes each time',
    );
  });

  it('warns of an hourly price that looks typed in cents, and only then', () => {
    assert.equal(
      centsLookingPrice('--max-price', '350'),
      '--max-price 350 is $350.00 an hour: amounts are in dollars. If you meant 350 cents, pass --max-price 3.50.',
    );
    assert.equal(
      centsLookingPrice('--max-price', '$1200'),
      '--max-price 1200 is $1,200.00 an hour: amounts are in dollars. If you meant 1200 cents, pass --max-price 12.00.',
    );
    for (const dollars of ['3', '3.50', '99', '150.00', '2.5'])
      assert.equal(centsLookingPrice('--max-price', dollars), null, dollars);
  });
});
