import assert from 'node:assert/strict';
import { LAMBDA_ENV_FILE, lambdaUserData, MAX_USER_DATA_BYTES } from '../../plugins/lambda/machine.js';
import { LABEL_TAG_KEY } from '../../plugins/lambda/provider.js';
import { wrapStartupScript } from '../../src/modules/rentals/store/machine-secrets.js';
import { DEFAULT_MACHINE_SETTINGS, type CreateResult, type MachineSettings } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { USER_DATA_MAX_BYTES } from '../fakes/lambda-wire.js';
import { waitFor } from '../helpers/wait.js';
import {
  AWKWARD_ENV,
  FAST_TUNING,
  decodedWrites,
  encodedBlobs,
  makeLambdaHarness,
  pick,
  sourcedEnv,
  type LambdaHarness,
} from './lambda-harness.js';

const settings = (over: Partial<MachineSettings>): MachineSettings => ({
  ...DEFAULT_MACHINE_SETTINGS,
  env: {},
  ports: [],
  ...over,
});

/** An agent's script with secrets of its own in it, as the host hands it over: wrapped. */
const AGENT_SCRIPT =
  '#!/bin/sh\nexport TOKEN=script-secret-8f2c41\ncurl -s -H "Authorization: $TOKEN" https://example.invalid/ready\n';
const SECRET_ENV = { API_TOKEN: 'tok-live-5d0b7c3e9a', DB_PASSWORD: 'p@ss w\'rd "x" 91' };

describe('Lambda plugin: machine settings', function () {
  this.timeout(20_000);
  let h: LambdaHarness;
  const keys = generateDeploymentKeyPair('lambda-machine');

  beforeEach(async () => {
    h = await makeLambdaHarness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  async function created(
    machine?: MachineSettings,
    label = h.label(),
  ): Promise<{ label: string; instanceId: string; body: Record<string, unknown> }> {
    const before = h.fake.launches.length;
    const res = await h.provider.create(label, h.offer(), keys.publicKey, machine);
    assert.equal(res.kind, 'created', JSON.stringify(res));
    assert.equal(h.fake.launches.length, before + 1);
    return { label, instanceId: (res as { instanceId: string }).instanceId, body: h.fake.launches[before] };
  }

  it('declares on every offer what create honours: the startup script (and so the variables), no image, no ports, no disk choice', async () => {
    const offers = await h.provider.listOffers();
    assert.ok(offers.length > 0);
    for (const o of offers)
      assert.deepEqual(o.capabilities, { customImage: false, startupScript: true, ports: 0, maxDiskGb: null }, o.key);
  });

  it('a rental without settings launches with exactly the body it always did: no user_data', async () => {
    for (const machine of [undefined, DEFAULT_MACHINE_SETTINGS, settings({ image: null, diskGb: null })]) {
      const label = h.label();
      const { body } = await created(machine, label);
      assert.deepEqual(body, {
        region_name: 'us-east-1',
        instance_type_name: 'gpu_1x_h100_sxm5',
        ssh_key_names: [label],
        name: label,
        tags: [{ key: LABEL_TAG_KEY, value: label }],
      });
    }
  });

  it('variables travel in user_data as a profile file that sh and bash read back byte for byte, and nothing runs as the user', async () => {
    const { body, instanceId } = await created(settings({ env: AWKWARD_ENV }));
    const userData = body.user_data;
    assert.equal(typeof userData, 'string');
    assert.match(userData as string, /^#!\/bin\/sh\n/);
    assert.equal(h.fake.userDataOf(instanceId), userData);
    const writes = decodedWrites(userData as string);
    assert.deepEqual([...writes.keys()], [LAMBDA_ENV_FILE]);
    const profile = writes.get(LAMBDA_ENV_FILE)!;
    for (const shell of ['/bin/sh', 'bash'])
      assert.deepEqual(pick(sourcedEnv(shell, profile), Object.keys(AWKWARD_ENV)), AWKWARD_ENV, shell);
    // Readable by root and the SSH user's group only: the values are the agent's secrets.
    assert.match(userData as string, /^chown root:"\$\(id -gn ubuntu\)" \/etc\/profile\.d\/gpr-env\.sh$/m);
    assert.match(userData as string, /^chmod 640 \/etc\/profile\.d\/gpr-env\.sh$/m);
    assert.doesNotMatch(userData as string, /\bsu\b/);
  });

  it('the startup script travels in user_data exactly as the host wrapped it, run as ubuntu in a login shell that has the variables', async () => {
    const wrapped = wrapStartupScript(AGENT_SCRIPT);
    const { body } = await created(settings({ env: SECRET_ENV, startupScript: wrapped }));
    const userData = body.user_data as string;
    const writes = decodedWrites(userData);
    assert.equal(writes.get('"$script"'), wrapped);
    assert.deepEqual(pick(sourcedEnv('/bin/sh', writes.get(LAMBDA_ENV_FILE)!), Object.keys(SECRET_ENV)), SECRET_ENV);
    assert.match(userData, /^su - ubuntu -c "\. \/etc\/profile\.d\/gpr-env\.sh; sh \$script"$/m);
    // A script without variables runs the same way, without a profile to read.
    const bare = (await created(settings({ startupScript: wrapped }))).body.user_data as string;
    assert.deepEqual([...decodedWrites(bare).keys()], ['"$script"']);
    assert.match(bare, /^su - ubuntu -c "sh \$script"$/m);
    // Nothing of the agent's text is readable in the body: only its encoding travels.
    assert.ok(!JSON.stringify(body).includes('script-secret-8f2c41'));
    assert.ok(!JSON.stringify(body).includes(SECRET_ENV.API_TOKEN));
  });

  it('user_data is write-only: no read of the instance shows it', async () => {
    const { instanceId, label } = await created(
      settings({ env: SECRET_ENV, startupScript: wrapStartupScript(AGENT_SCRIPT) }),
    );
    const blobs = encodedBlobs(h.fake.userDataOf(instanceId)!);
    for (const path of ['/instances', `/instances/${instanceId}`]) {
      const text = await (
        await fetch(`${h.fake.url}/api/v1${path}`, { headers: { Authorization: `Bearer ${h.fake.apiKey}` } })
      ).text();
      assert.ok(!text.includes('user_data'), path);
      for (const b of blobs) assert.ok(!text.includes(b), path);
    }
    assert.ok(await h.provider.findByLabel(label));
  });

  it('no variable value, script or encoding of them reaches a log line, through a whole lifecycle', async () => {
    const wrapped = wrapStartupScript(AGENT_SCRIPT);
    const { instanceId, label } = await created(
      settings({ env: { ...SECRET_ENV, ...AWKWARD_ENV }, startupScript: wrapped }),
    );
    const blobs = encodedBlobs(h.fake.userDataOf(instanceId)!);
    await waitFor(async () => (await h.provider.get(instanceId)).state === 'running', {
      timeoutMs: 10_000,
      what: 'running',
    });
    await h.provider.destroy(instanceId);
    await waitFor(async () => (await h.provider.get(instanceId)).state === 'gone', { timeoutMs: 10_000, what: 'gone' });
    await h.provider.afterDestroyed(label);
    const log = h.logText();
    assert.match(log, /lambda instance launched/);
    assert.match(log, /"envNames":\["API_TOKEN","DB_PASSWORD"/, 'the names are not secret and say what was asked');
    assert.match(log, /"startupScript":true/);
    for (const secret of [
      ...Object.values(SECRET_ENV),
      AWKWARD_ENV.QUOTES,
      AWKWARD_ENV.UNICODE,
      'script-secret-8f2c41',
      wrapped,
      ...blobs,
    ]) {
      assert.ok(!log.includes(secret), `the log holds ${secret.slice(0, 12)}...`);
    }
  });

  it('settings Lambda refuses are rejected with a reason that holds no secret, and the registered key is deleted', async () => {
    const machine = settings({ env: SECRET_ENV, startupScript: wrapStartupScript(AGENT_SCRIPT) });
    const userData = lambdaUserData(machine, 'ubuntu')!;
    // Worst case: Lambda's message quotes the user_data it refused, and a value decoded.
    const message = `user_data: invalid cloud-init user data: '${userData.slice(0, 400)}' near ${SECRET_ENV.API_TOKEN}`;
    h.fake.failNextWith('create', 400, {
      error: { code: 'global/invalid-parameters', message, suggestion: `Check ${SECRET_ENV.DB_PASSWORD}` },
    });
    const label = h.label();
    const res = (await h.provider.create(label, h.offer(), keys.publicKey, machine)) as Extract<
      CreateResult,
      { kind: 'rejected' }
    >;
    assert.deepEqual([res.kind, res.errorClass], ['rejected', 'request']);
    assert.match(res.reason, /global\/invalid-parameters/);
    assert.match(res.reason, /user_data: invalid cloud-init user data/, "Lambda's own words stay, for the operator");
    for (const secret of [...Object.values(SECRET_ENV), ...encodedBlobs(userData)])
      assert.ok(!res.reason.includes(secret), res.reason);
    for (const b of encodedBlobs(userData))
      assert.ok(!res.reason.includes(b.slice(0, 16)), 'no piece of an encoding either');
    assert.ok(!h.fake.sshKeys().some((k) => k.name === label));
    for (const secret of Object.values(SECRET_ENV)) assert.ok(!h.logText().includes(secret));
  });

  it("only Lambda's words are cleaned, and only for a launch that carried settings: codes and the table's meaning stay", async () => {
    h.fake.failNextWith('create', 400, {
      error: { code: 'global/invalid-parameters', message: 'Instance 0920582c7ff041399e34823a0be62549 is odd.' },
    });
    const plain = (await h.provider.create(h.label(), h.offer(), keys.publicKey)) as { reason: string };
    assert.match(plain.reason, /Instance 0920582c7ff041399e34823a0be62549 is odd\./);
    h.fake.noCapacity('gpu_1x_h100_sxm5');
    const full = await h.provider.create(h.label(), h.offer(), keys.publicKey, settings({ env: SECRET_ENV }));
    assert.equal(full.kind, 'unavailable', JSON.stringify(full));
    assert.match(
      (full as { reason: string }).reason,
      /instance-operations\/launch\/insufficient-capacity: Not enough capacity to fulfill launch request\./,
    );
  });

  it('settings that cannot go into user_data are rejected before any key is registered or launch sent, naming no value', async () => {
    const cases: [MachineSettings, RegExp][] = [
      // Far beyond what the host allows, so only the plugin's own ceiling can refuse it.
      [
        settings({
          env: Object.fromEntries(
            Array.from({ length: 300 }, (_, i) => [`BIG_${i}`, `secret-${i}-`.padEnd(4000, 'x')]),
          ),
        }),
        new RegExp(`over Lambda's ${MAX_USER_DATA_BYTES}`),
      ],
      [settings({ env: { 'lower-case': 'secret-value-1' } }), /"lower-case" is not a shell name/],
      [settings({ env: { 'A;rm -rf /': 'secret-value-2' } }), /is not a shell name/],
      [settings({ env: { NUL_VALUE: 'secret\0value-3' } }), /NUL_VALUE holds a NUL character/],
      [settings({ startupScript: '#!/bin/sh\n\0' }), /startup script holds a NUL character/],
    ];
    for (const [machine, why] of cases) {
      const before = h.fake.calls.length;
      const res = (await h.provider.create(h.label(), h.offer(), keys.publicKey, machine)) as Extract<
        CreateResult,
        { kind: 'rejected' }
      >;
      assert.equal(res.kind, 'rejected', JSON.stringify(res).slice(0, 200));
      assert.match(res.reason, why);
      assert.doesNotMatch(res.reason, /secret/);
      assert.deepEqual(h.fake.calls.slice(before), [], 'nothing was asked of Lambda');
    }
  });

  it('reports startupPhase booting while Lambda boots the machine, none once it is active or unhealthy, and never endpoints', async () => {
    h.fake.setBootMs(60_000);
    const { instanceId, label } = await created(settings({ env: SECRET_ENV }));
    const booting = await h.provider.get(instanceId);
    assert.deepEqual([booting.state, booting.providerState, booting.startupPhase], ['pending', 'booting', 'booting']);
    assert.equal((await h.provider.findByLabel(label))?.startupPhase, 'booting');
    assert.equal((await h.provider.listInstances()).find((i) => i.instanceId === instanceId)?.startupPhase, 'booting');
    for (const status of ['unhealthy', 'active'] as const) {
      h.fake.setStatus(instanceId, status);
      h.advance(FAST_TUNING.listTtlMs!);
      const info = await h.provider.get(instanceId);
      assert.equal(info.providerState, status);
      assert.equal(info.startupPhase, undefined, status);
      assert.equal(info.endpoints, undefined, status);
    }
  });
});

describe('The fake Lambda API checks user_data as documented', () => {
  let h: LambdaHarness;
  const keys = generateDeploymentKeyPair('lambda-user-data');

  beforeEach(async () => {
    h = await makeLambdaHarness();
    await fetch(`${h.fake.url}/api/v1/ssh-keys`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${h.fake.apiKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'k1', public_key: keys.publicKey }),
    });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  async function launch(userData: unknown) {
    const res = await fetch(`${h.fake.url}/api/v1/instance-operations/launch`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${h.fake.apiKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        region_name: 'us-east-1',
        instance_type_name: 'gpu_1x_h100_sxm5',
        ssh_key_names: ['k1'],
        user_data: userData,
      }),
    });
    return {
      status: res.status,
      json: (await res.json()) as { data?: { instance_ids: string[] }; error?: { code: string; message: string } },
    };
  }

  it('takes plain text up to the limit, refuses another type or more as invalid parameters without quoting it', async () => {
    const ok = await launch('#!/bin/sh\n'.padEnd(USER_DATA_MAX_BYTES, '#'));
    assert.equal(ok.status, 200);
    for (const bad of [
      42,
      ['#!/bin/sh'],
      '#!/bin/sh\n'.padEnd(USER_DATA_MAX_BYTES + 1, '#'),
      '#!/bin/sh\n'.padEnd(USER_DATA_MAX_BYTES - 1, '#') + 'é',
    ]) {
      const r = await launch(bad);
      assert.deepEqual(
        [r.status, r.json.error?.code],
        [400, 'global/invalid-parameters'],
        JSON.stringify(bad).slice(0, 40),
      );
      assert.match(r.json.error!.message, /^user_data: /);
      assert.ok(r.json.error!.message.length < 100);
    }
  });
});
