import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { VastProvider } from '../../plugins/vast/provider.js';
import { createLogger } from '../../src/logger.js';
import { wrapStartupScript } from '../../src/modules/rentals/store/machine-secrets.js';
import { DEFAULT_MACHINE_SETTINGS, type MachineSettings } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, type SshTarget } from '../../src/providers/ssh-probe.js';
import { FAKE_VAST_OFFERS } from '../fakes/vast-api.js';
import { offer } from '../fakes/vast-fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { waitForRunning } from './provider-contract.js';
import { FAST_TUNING, makeVastHarness, type VastHarness } from './vast-harness.js';

/** The Vast plugin with a rental's machine settings, against the fake. */
describe('vast plugin: machine settings', () => {
  let h: VastHarness;
  const keys = generateDeploymentKeyPair('vast-machine');
  const h100 = FAKE_VAST_OFFERS[0].id;
  const puts = () => h.fake.calls.filter((c) => c.method === 'PUT' && /^\/api\/v0\/asks\/\d+\/$/.test(c.path));
  const settings = (s: Partial<MachineSettings>): MachineSettings => ({
    ...DEFAULT_MACHINE_SETTINGS,
    env: {},
    ports: [],
    ...s,
  });

  /** A provider on the same fake whose every log line is kept. */
  function logged(): { provider: VastProvider; lines: string[] } {
    const lines: string[] = [];
    const logger = createLogger('debug', { write: (l: string) => void lines.push(l) });
    return { provider: new VastProvider(h.options, { ...h.deps, logger }, FAST_TUNING), lines };
  }

  async function create(machine?: MachineSettings, provider = h.provider, askId: number = h100, cost?: number) {
    const label = h.label();
    const res = await provider.create(label, h.offer(askId, cost), keys.publicKey, machine);
    assert.equal(res.kind, 'created', JSON.stringify(res));
    return { label, instanceId: (res as { instanceId: string }).instanceId };
  }

  async function running(instanceId: string, provider = h.provider) {
    const info = await waitForRunning(provider, instanceId);
    return { info, target: { ...info.ssh, privateKey: keys.privateKey } as SshTarget };
  }

  beforeEach(async () => {
    h = await makeVastHarness();
  });
  afterEach(async () => h.cleanup());

  it('a rental that asked for nothing sends exactly the body it always did', async () => {
    const { label } = await create(settings({}));
    assert.deepEqual(puts()[0].body, {
      client_id: 'me',
      image: 'vastai/base-image:cuda-12.4.1-auto',
      disk: 32,
      label,
      runtype: 'ssh_direct',
      cancel_unavail: true,
    });
  });

  it('sends the image and disk the rental chose; the instance runs them', async () => {
    const { instanceId } = await create(
      settings({ image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime', diskGb: 120 }),
    );
    const body = puts()[0].body as Record<string, unknown>;
    assert.deepEqual(
      [body.image, body.disk, body.env, body.onstart],
      ['pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime', 120, undefined, undefined],
    );
    const { info } = await running(instanceId);
    assert.equal(info.endpoints, undefined);
  });

  it('delivers every variable to the startup script and to SSH login shells, runs the script once, and reports the ports', async () => {
    const hostEnvironment = readFileSync('/etc/environment', 'utf8');
    const env = {
      HF_TOKEN: `hf_${randomBytes(12).toString('hex')}`,
      QUOTED: `it's "quoted" $HOME \`id\` \\ end`,
      LINES: 'first line\nsecond line\n',
      UNICODE: 'grüße 😀',
      EMPTY: '',
      LONG: randomBytes(2048).toString('hex'),
    };
    const script = wrapStartupScript(
      '#!/bin/sh\nprintf "%s" "$LONG|$QUOTED|$LINES" > "$HOME/seen"\necho run >> "$HOME/runs"\n',
    );
    const { instanceId } = await create(settings({ env, startupScript: script, ports: [8000, 7860] }));
    const body = puts()[0].body as { env: Record<string, string>; onstart: string };
    assert.equal(body.env.HF_TOKEN, env.HF_TOKEN);
    assert.deepEqual([body.env['-p 8000:8000'], body.env['-p 7860:7860']], ['1', '1']);
    assert.ok(body.onstart.length <= 4096);

    const { info, target } = await running(instanceId);
    assert.equal((await h.fake.onstartRuns(instanceId)).length, 1, 'Vast ran the onstart as the container started');
    const ports = (await h.provider.get(instanceId)).endpoints;
    assert.deepEqual(
      ports?.map((e) => e.port),
      [8000, 7860],
    );
    for (const e of ports!) assert.match(e.url, new RegExp(`^http://${info.ssh.host}:\\d+$`));
    const marker = await waitFor(
      async () =>
        (await sshExec(target, 'cat "$HOME/.gpr/startup-started" "$HOME/runs" "$HOME/seen"')).stdout || undefined,
      { timeoutMs: 5000, what: 'the script to run' },
    );
    assert.match(marker, /^\d{4}-\d\d-\d\dT[\d:]+Z\nrun\n/);
    assert.equal(marker.replace(/^.*\nrun\n/, ''), `${env.LONG}|${env.QUOTED}|${env.LINES}`);
    // One login shell prints every variable, base64 so that any byte survives.
    const names = Object.keys(env);
    const printed = await sshExec(
      target,
      `sh -lc 'for n in ${names.join(' ')}; do eval "v=\\\${$n-unset}"; printf "%s" "$v" | base64 -w0; echo; done'`,
    );
    const seen = printed.stdout
      .split('\n')
      .slice(0, names.length)
      .map((b) => Buffer.from(b, 'base64').toString('utf8'));
    assert.deepEqual(Object.fromEntries(names.map((n, i) => [n, seen[i]])), env);
    // Another container start (a host reboot) sets the variables up again but never reruns the script.
    h.fake.restartContainer(instanceId);
    const runs = await h.fake.onstartRuns(instanceId);
    assert.deepEqual(
      runs.map((r) => (r instanceof Error ? r.message : r.code)),
      [0, 0],
    );
    assert.equal(
      (await sshExec(target, 'cat "$HOME/runs"; ls -A "$HOME/.gpr"')).stdout,
      'run\nenv.sh\nstartup-started\nstartup.log\nstartup.sh\nvast-startup-ran\n',
    );
    assert.equal(readFileSync('/etc/environment', 'utf8'), hostEnvironment, 'the fake machine is not this host');
  });

  it('never writes a variable value or the script into a log line', async () => {
    const secret = `s3cr3t-${randomBytes(16).toString('hex')}`;
    const scriptSecret = `script-${randomBytes(16).toString('hex')}`;
    const machine = settings({
      env: { TOKEN: secret, BIG: secret.repeat(20) },
      startupScript: wrapStartupScript(`echo ${scriptSecret}\n`),
    });
    const { provider, lines } = logged();
    h.fake.failNext('attach', '5xx');
    const { instanceId } = await create(machine, provider);
    await running(instanceId, provider);
    // The host logs a failed create's reason: it is held to the same rule.
    h.fake.respondNext('create', 400, {
      success: false,
      error: 'invalid_args',
      msg: `error 400/3467: Invalid args: env TOKEN=${secret} refused`,
    });
    const refused = await provider.create(h.label(), h.offer(h100), keys.publicKey, machine);
    h.fake.respondNext('create', 500, {
      success: false,
      error: 'server_error',
      msg: `could not start with TOKEN=${secret}`,
    });
    const failed = await provider.create(h.label(), h.offer(h100), keys.publicKey, machine);
    assert.deepEqual([refused.kind, failed.kind], ['rejected', 'ambiguous']);
    lines.push((refused as { reason: string }).reason, (failed as { reason: string }).reason);
    assert.ok(lines.length > 2, 'the provider logged');
    for (const l of lines) {
      assert.ok(
        !l.includes(secret) &&
          !l.includes(scriptSecret) &&
          !l.includes(Buffer.from(`echo ${scriptSecret}`).toString('base64').slice(0, 20)),
        l,
      );
    }
  });

  it('a setting Vast refuses is rejected with a reason naming it and quoting nothing of the rental', async () => {
    const secret = `hf_${randomBytes(16).toString('hex')}`;
    // The ask has 500 GB free; Vast refuses more.
    const res = await h.provider.create(
      h.label(),
      h.offer(h100),
      keys.publicKey,
      settings({ diskGb: 900, env: { HF_TOKEN: secret } }),
    );
    assert.equal(res.kind, 'rejected');
    const { reason, errorClass } = res as { reason: string; errorClass?: string };
    assert.equal(errorClass, 'request');
    assert.match(reason, /^the rental's disk: Vast refused the create \(the request is malformed/);
    assert.match(
      reason,
      /HTTP 400 invalid_args \(Vast's message withheld: the request carried the rental's secrets; it names disk\)$/,
    );
    assert.ok(!reason.includes(secret));
    assert.equal(h.fake.instances().length, 0);

    // Without secrets Vast's words are quoted as before, and the rental's image is named.
    h.fake.respondNext('create', 400, {
      success: false,
      error: 'invalid_args',
      msg: "error 400/3467: Invalid args: 'image' is not a valid image",
    });
    const image = await h.provider.create(
      h.label(),
      h.offer(h100),
      keys.publicKey,
      settings({ image: 'not a reference' }),
    );
    assert.match((image as { reason: string }).reason, /^the rental's image: .*'image' is not a valid image$/);
    // Vast quoting a variable back: the reason names the field, never the value.
    h.fake.respondNext('create', 400, {
      success: false,
      error: 'invalid_args',
      msg: `error 400/3467: Invalid args: env HF_TOKEN=${secret}`,
    });
    const quoted = await h.provider.create(
      h.label(),
      h.offer(h100),
      keys.publicKey,
      settings({ env: { HF_TOKEN: secret } }),
    );
    assert.match(
      (quoted as { reason: string }).reason,
      /^the rental's variables, startup script or ports: .*it names env\)$/,
    );
    assert.ok(!(quoted as { reason: string }).reason.includes(secret));
  });

  it('what Vast limits cannot carry is rejected without calling Vast', async () => {
    const big = randomBytes(2048).toString('hex');
    const res = await h.provider.create(
      h.label(),
      h.offer(h100),
      keys.publicKey,
      settings({ env: Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`V${i}`, big])) }),
    );
    assert.equal(res.kind, 'rejected');
    assert.match(
      (res as { reason: string }).reason,
      /^vast cannot carry the rental's machine settings: .* over its limit of 32768; nothing was sent$/,
    );
    assert.equal(h.fake.calls.length, 0);
  });

  it('offers no more disk than its price covers, and a disk of its own is no repricing', async () => {
    // 0.15 USD per GB and month, priced in the search for the plugin's 32 GB: a larger disk would be storage nobody pays for.
    h.fake.offers = [offer(7200001, 'L40S', 1, 46_068, 0.8, { storage_cost: 0.15 })];
    const [listed] = await h.provider.listOffers();
    assert.deepEqual(listed.capabilities, { customImage: true, startupScript: true, ports: 5, maxDiskGb: 32 });
    const { instanceId } = await create(settings({ diskGb: 20 }), h.provider, 7200001, listed.pricePerHourMinor);
    const info = await h.provider.get(instanceId);
    assert.notEqual(info.state, 'failed', info.providerState);
    // A host raising the price itself is still caught.
    h.fake.reprice('L40S', 0.95);
    const raised = await h.provider.create(
      h.label(),
      h.offer(7200001, listed.pricePerHourMinor),
      keys.publicKey,
      settings({ diskGb: 20 }),
    );
    assert.equal(raised.kind, 'unavailable', JSON.stringify(raised));
  });

  it('reports pulling_image while Vast loads the image, nothing once it runs', async () => {
    h.fake.setBootMs(60_000);
    const { instanceId } = await create(settings({ image: 'vllm/vllm-openai:latest' }));
    const loading = await h.provider.get(instanceId);
    assert.deepEqual([loading.state, loading.startupPhase], ['pending', 'pulling_image']);
    h.fake.setStatus(instanceId, 'running');
    const up = await waitFor(
      async () => {
        const i = await h.provider.get(instanceId);
        return i.state === 'running' ? i : undefined;
      },
      { timeoutMs: 3000, what: 'running' },
    );
    assert.equal(up.startupPhase, undefined);
  });
});
