import assert from 'node:assert/strict';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { FakeLambdaApi } from '../fakes/lambda-api.js';

/** The fake answers as the Lambda Cloud API 1.8.3 document says, so the plugin's tests mean something. */
describe(FakeLambdaApi.name, () => {
  let fake: FakeLambdaApi;
  const keys = generateDeploymentKeyPair('fake-check');

  async function call(method: string, path: string, body?: unknown, auth = `Bearer ${fake.apiKey}`) {
    const res = await fetch(`${fake.url}/api/v1${path}`, {
      method,
      headers: { Authorization: auth, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return {
      status: res.status,
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- wire bodies of many shapes, read field by field
      json: (await res.json()) as { data?: any; error?: { code: string; message: string } },
    };
  }

  const launchBody = (extra: Record<string, unknown> = {}) => ({
    region_name: 'us-east-1',
    instance_type_name: 'gpu_1x_h100_sxm5',
    ssh_key_names: ['k1'],
    ...extra,
  });

  beforeEach(async () => {
    fake = await FakeLambdaApi.start({ bootMs: 20 });
  });
  afterEach(async () => {
    await fake.close();
  });

  it('accepts Bearer and both documented Basic forms, and refuses anything else with global/invalid-api-key', async () => {
    assert.equal(
      (await call('GET', '/instances', undefined, `Basic ${Buffer.from(`${fake.apiKey}:`).toString('base64')}`)).status,
      200,
    );
    assert.equal((await call('GET', '/instances', undefined, `Basic ${fake.apiKey}`)).status, 200);
    const wrong = await call('GET', '/instances', undefined, 'Bearer secret_nope');
    assert.equal(wrong.status, 401);
    assert.equal(wrong.json.error?.code, 'global/invalid-api-key');
  });

  it('lists instance types with specs and the regions that have capacity', async () => {
    const { json } = await call('GET', '/instance-types');
    assert.deepEqual(json.data.gpu_1x_a100_sxm4.instance_type.gpu_description, 'A100 (40 GB SXM4)');
    assert.equal(json.data.gpu_1x_h100_sxm5.instance_type.price_cents_per_hour, 329);
    assert.deepEqual(json.data.gpu_8x_a100.regions_with_capacity_available, []);
  });

  it('validates launches as documented', async () => {
    assert.equal(
      (await call('POST', '/instance-operations/launch', launchBody())).json.error?.code,
      'global/object-does-not-exist',
    );
    await call('POST', '/ssh-keys', { name: 'k1', public_key: keys.publicKey });
    await call('POST', '/ssh-keys', { name: 'k2', public_key: keys.publicKey });
    const cases: [Record<string, unknown>, number, string][] = [
      [{ ssh_key_names: ['k1', 'k2'] }, 400, 'global/invalid-parameters'],
      [{ name: 'x'.repeat(65) }, 400, 'global/invalid-parameters'],
      [{ tags: [{ key: 'Bad Key', value: 'v' }] }, 400, 'global/invalid-parameters'],
      [{ region_name: 'mars-1' }, 400, 'global/invalid-parameters'],
      [{ instance_type_name: 'gpu_99x_nothing' }, 404, 'global/object-does-not-exist'],
      [{ instance_type_name: 'gpu_8x_a100' }, 400, 'instance-operations/launch/insufficient-capacity'],
      [{ region_name: 'us-west-1' }, 400, 'instance-operations/launch/insufficient-capacity'],
    ];
    for (const [extra, status, code] of cases) {
      const r = await call('POST', '/instance-operations/launch', launchBody(extra));
      assert.deepEqual([r.status, r.json.error?.code], [status, code], JSON.stringify(extra));
    }
    const ok = await call(
      'POST',
      '/instance-operations/launch',
      launchBody({ name: 'n', tags: [{ key: 'gpr-label', value: 'n' }] }),
    );
    assert.equal(ok.status, 200);
    assert.match(ok.json.data.instance_ids[0], /^[0-9a-f]{32}$/);
  });

  it('fails a whole terminate batch for one unknown id', async () => {
    await call('POST', '/ssh-keys', { name: 'k1', public_key: keys.publicKey });
    const id = (await call('POST', '/instance-operations/launch', launchBody())).json.data.instance_ids[0];
    const r = await call('POST', '/instance-operations/terminate', {
      instance_ids: [id, 'ffffffffffffffffffffffffffffffff'],
    });
    assert.deepEqual([r.status, r.json.error?.code], [404, 'global/object-does-not-exist']);
    assert.notEqual(fake.instances()[0].status, 'terminating');
    const one = await call('POST', '/instance-operations/terminate', { instance_ids: [id] });
    assert.equal(one.json.data.terminated_instances[0].status, 'terminating');
  });

  it('generates a key pair when public_key is left out, and refuses a name twice', async () => {
    const gen = await call('POST', '/ssh-keys', { name: 'generated' });
    assert.match(gen.json.data.private_key, /PRIVATE KEY/);
    const dup = await call('POST', '/ssh-keys', { name: 'generated', public_key: keys.publicKey });
    assert.deepEqual([dup.status, dup.json.error?.code], [400, 'global/invalid-parameters']);
    assert.equal((await call('DELETE', `/ssh-keys/${gen.json.data.id}`)).status, 200);
    assert.deepEqual(fake.sshKeys(), []);
  });
});
