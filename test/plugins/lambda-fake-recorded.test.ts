import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { FakeLambdaApi } from '../fakes/lambda-api.js';

const printed = (file: string) =>
  readFileSync(new URL(`../fixtures/providers/lambda/${file}`, import.meta.url), 'utf8').trim();
const PRODUCT_UA = 'gpu-rental/1.0.0';

/** The fake's recorded mode serves the live errors kept in test/fixtures/providers/lambda/, quirk by quirk. */
describe('FakeLambdaApi recorded mode', () => {
  let fake: FakeLambdaApi;
  const keys = generateDeploymentKeyPair('lambda-recorded');

  afterEach(async () => {
    await fake?.close();
  });

  async function call(method: string, path: string, body?: unknown, userAgent: string | null = PRODUCT_UA) {
    const res = await fetch(`${fake.url}/api/v1${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${fake.apiKey}`,
        ...(userAgent === null ? {} : { 'User-Agent': userAgent }),
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- wire bodies of many shapes, read field by field
    return { status: res.status, type, text, json: (type.includes('json') ? JSON.parse(text) : null) as any };
  }

  const launchBody = (extra: Record<string, unknown> = {}) => ({
    region_name: 'us-east-1',
    instance_type_name: 'gpu_1x_h100_sxm5',
    ssh_key_names: ['k1'],
    ...extra,
  });
  const printedAs = (r: { json: { error: { code: string; message: string } } }) =>
    `${r.json.error.code}: ${r.json.error.message}`;

  it('answers a request without a product User-Agent with an HTML 403 from the edge', async () => {
    fake = await FakeLambdaApi.start({ behaviour: 'recorded' });
    const blocked = await call('GET', '/instances', undefined, null);
    assert.equal(blocked.status, 403);
    assert.match(blocked.type, /^text\/html/);
    assert.match(blocked.text, /^<!DOCTYPE html>/);
    for (const ua of ['python-requests/2.31.0', 'curl/8.5.0', 'undici'])
      assert.equal((await call('GET', '/instances', undefined, ua)).status, 403, ua);
    assert.equal((await call('GET', '/instances')).status, 200);
    // Documented mode answers Node's default User-Agent as any other.
    await fake.close();
    fake = await FakeLambdaApi.start();
    assert.equal((await call('GET', '/instances', undefined, null)).status, 200);
  });

  it('answers a second terminate of a terminating instance with global/unknown, as printed live', async () => {
    fake = await FakeLambdaApi.start({ behaviour: 'recorded', bootMs: 10, terminateMs: 5000 });
    await call('POST', '/ssh-keys', { name: 'k1', public_key: keys.publicKey });
    const id = (await call('POST', '/instance-operations/launch', launchBody())).json.data.instance_ids[0];
    const first = await call('POST', '/instance-operations/terminate', { instance_ids: [id] });
    assert.equal(first.json.data.terminated_instances[0].status, 'terminating');
    const again = await call('POST', '/instance-operations/terminate', { instance_ids: [id] });
    assert.equal(again.status, 500);
    assert.ok(printed('terminate-global-unknown.txt').endsWith(printedAs(again)), printedAs(again));
    assert.equal(again.json.error.code, 'global/unknown');
    fake.setQuirk('globalUnknown', 400);
    assert.equal((await call('POST', '/instance-operations/terminate', { instance_ids: [id] })).status, 400);
    fake.setQuirk('globalUnknown', false);
    assert.equal((await call('POST', '/instance-operations/terminate', { instance_ids: [id] })).status, 200);
  });

  it('refuses quantity above 1 and launches past the instance limit with the recorded invalid-parameters texts', async () => {
    fake = await FakeLambdaApi.start({ behaviour: 'recorded', bootMs: 10, quirks: { instanceLimit: 1 } });
    await call('POST', '/ssh-keys', { name: 'k1', public_key: keys.publicKey });
    const many = await call('POST', '/instance-operations/launch', launchBody({ quantity: 2 }));
    assert.deepEqual(
      [many.status, many.json.error.code, many.json.error.message],
      [400, 'global/invalid-parameters', printed('launch-invalid-parameters-quantity.txt')],
    );
    assert.equal((await call('POST', '/instance-operations/launch', launchBody({ quantity: 1 }))).status, 200);
    const over = await call('POST', '/instance-operations/launch', launchBody());
    assert.equal(over.status, 400);
    assert.equal(printedAs(over), printed('launch-400-invalid-parameters-too-many.txt'));
  });

  it('keeps the documented answers when no quirk is on', async () => {
    fake = await FakeLambdaApi.start({ bootMs: 10, terminateMs: 5000 });
    assert.ok(Object.values(fake.quirks).every((q) => q === false));
    await call('POST', '/ssh-keys', { name: 'k1', public_key: keys.publicKey });
    const id = (await call('POST', '/instance-operations/launch', launchBody({ quantity: 2 }))).json.data
      .instance_ids[0];
    await call('POST', '/instance-operations/terminate', { instance_ids: [id] });
    assert.equal((await call('POST', '/instance-operations/terminate', { instance_ids: [id] })).status, 200);
  });
});
