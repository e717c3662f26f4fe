import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fetchClientMetadata, METADATA_LIMITS } from '../../src/modules/oauth/client-metadata.js';
import { DestinationRefused } from '../../src/modules/webhooks/destination.js';

/** The fetch of client metadata documents: the webhook destination rules, and its bounds. */
describe('fetchClientMetadata', () => {
  let server: Server;
  let base: string;
  let body = '{}';
  let status = 200;
  before(async () => {
    server = createServer((_req, res) => {
      res.statusCode = status;
      if (status === 302) res.setHeader('location', 'http://127.0.0.1:1/elsewhere');
      res.setHeader('content-type', 'application/json');
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('refuses a private or loopback destination unless private destinations are allowed, before any connection', async () => {
    const strict = { allowPrivate: false, limits: METADATA_LIMITS };
    // A name that resolves (by the injected resolver) to a private address is refused like the literal one.
    const resolve = async () => [{ address: '10.1.2.3', family: 4 }];
    await assert.rejects(
      fetchClientMetadata('https://app.example/client.json', {}, { ...strict, resolve }),
      DestinationRefused,
    );
    await assert.rejects(fetchClientMetadata(`${base}/client.json`, {}, strict), DestinationRefused);
    body = '{"client_id":"x"}';
    status = 200;
    const ok = await fetchClientMetadata(`${base}/client.json`, {}, { allowPrivate: true, limits: METADATA_LIMITS });
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { client_id: 'x' });
  });

  it('refuses a document larger than its bound, and follows no redirect', async () => {
    const loose = { allowPrivate: true, limits: METADATA_LIMITS };
    status = 200;
    body = JSON.stringify({ padding: 'x'.repeat(METADATA_LIMITS.maxBodyBytes) });
    await assert.rejects(fetchClientMetadata(`${base}/client.json`, {}, loose), /larger than 8192 bytes/);
    status = 302;
    body = '';
    const moved = await fetchClientMetadata(`${base}/client.json`, {}, loose);
    assert.equal(moved.status, 302, 'the answer as given: the library refuses anything but 200');
  });
});
