import assert from 'node:assert/strict';
import {
  BOOT_ARGS,
  BOOT_VARIABLE,
  podEndpoints,
  podMachineFields,
  podStartupPhase,
  RUNPOD_MAX_PORTS,
} from '../../plugins/runpod/machine.js';
import { RUNPOD_DEFAULTS } from '../../plugins/runpod/options.js';
import { wrapStartupScript } from '../../src/modules/rentals/store/machine-secrets.js';
import { DEFAULT_MACHINE_SETTINGS, type MachineSettings } from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import type { FakePodStatus } from '../fakes/runpod-api.js';
import { waitFor } from '../helpers/wait.js';
import { H100, makeRunpodHarness, type RunpodHarness } from './runpod-harness.js';
import { waitForRunning } from './provider-contract.js';

const keys = generateDeploymentKeyPair('runpod-machine');

/** Settings as the host hands them over: defaults, with `over` on top. */
const settings = (over: Partial<MachineSettings>): MachineSettings => ({
  ...DEFAULT_MACHINE_SETTINGS,
  env: {},
  ports: [],
  ...over,
});

/** The body the plugin has always sent for a rental that asks for nothing. */
const plainBody = (label: string) => ({
  name: label,
  image: RUNPOD_DEFAULTS.image,
  gpu: { id: H100, count: 1, minCudaVersion: '12.4' },
  cloud: 'SECURE',
  disk: 50,
  ports: ['22/tcp'],
  env: { PUBLIC_KEY: keys.publicKey.trim() },
});

const SECRET = 'hf_Sup3rSecretTokenValue';
const SCRIPT_SECRET = 'echo script-only-secret-7781';

describe('RunPod machine settings', () => {
  let h: RunpodHarness;
  beforeEach(async () => {
    h = await makeRunpodHarness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  const posts = () =>
    h.fake.calls
      .filter((c) => c.method === 'POST' && c.path === '/v2/pods')
      .map((c) => c.body as Record<string, unknown>);

  async function create(machine?: MachineSettings, label = h.label()): Promise<{ id: string; label: string }> {
    const res = await h.provider.create(label, h.offer(), keys.publicKey, machine);
    assert.equal(res.kind, 'created', JSON.stringify(res));
    return { id: (res as { instanceId: string }).instanceId, label };
  }

  it('declares on every offer what create honours: any image, a script, five proxied ports, the configured disk ceiling', async () => {
    const offers = await h.provider.listOffers();
    assert.ok(offers.length > 0);
    for (const o of offers)
      assert.deepEqual(
        o.capabilities,
        { customImage: true, startupScript: true, ports: RUNPOD_MAX_PORTS, maxDiskGb: 500 },
        o.key,
      );
    const p = await h.newProvider({}, { MAX_DISK_GB: '2000' });
    assert.ok((await p.listOffers()).every((o) => o.capabilities?.maxDiskGb === 2000));
  });

  it('sends the body exactly as before for a rental without settings, and for the default settings', async () => {
    const a = await create();
    const b = await create(settings({}));
    assert.deepEqual(posts(), [plainBody(a.label), plainBody(b.label)]);
  });

  it('maps the image, the disk and the ports; the CUDA floor follows the image tag', async () => {
    const image = 'ghcr.io/acme/trainer:1.2-cuda12.8.1-ubuntu22.04';
    const { id, label } = await create(settings({ image, diskGb: 200, ports: [8888, 7860] }));
    assert.deepEqual(posts()[0], {
      ...plainBody(label),
      image,
      gpu: { id: H100, count: 1, minCudaVersion: '12.8' },
      disk: 200,
      ports: ['22/tcp', '8888/http', '7860/http'],
    });
    const pod = h.fake.instances().find((i) => i.id === id)!;
    assert.deepEqual(
      [pod.image, pod.disk, pod.ports, pod.args],
      [image, 200, ['22/tcp', '8888/http', '7860/http'], ''],
    );

    // A tag that names no CUDA keeps the default image's floor; an operator's setting holds for every image.
    await create(settings({ image: 'docker.io/library/python:3.12' }));
    assert.deepEqual(posts()[1].gpu, { id: H100, count: 1, minCudaVersion: '12.4' });
    const pinned = await h.newProvider({}, { CUDA_VERSIONS: '12.4,12.6' });
    assert.equal((await pinned.create(h.label(), h.offer(), keys.publicKey, settings({ image }))).kind, 'created');
    assert.deepEqual(posts()[2].gpu, { id: H100, count: 1, allowedCudaVersions: ['12.4', '12.6'] });
  });

  it('puts variables into the pod env and a boot script that carries their names only, started by the boot command', async () => {
    const env = { HF_TOKEN: SECRET, MODE: 'it\'s "quoted"\nand two lines' };
    const { id } = await create(settings({ env }));
    const body = posts()[0];
    const sent = body.env as Record<string, string>;
    assert.deepEqual(Object.keys(sent).sort(), [BOOT_VARIABLE, 'HF_TOKEN', 'MODE', 'PUBLIC_KEY']);
    assert.deepEqual([sent.HF_TOKEN, sent.MODE, sent.PUBLIC_KEY], [SECRET, env.MODE, keys.publicKey.trim()]);
    assert.equal(body.args, BOOT_ARGS);
    const boot = Buffer.from(sent[BOOT_VARIABLE], 'base64').toString('utf8');
    assert.match(boot, /for gpr_name in HF_TOKEN MODE; do/);
    assert.ok(!boot.includes(SECRET), 'values stay in the environment, out of the script');
    assert.match(boot, /exec '\/start\.sh'/);
    assert.equal(h.fake.instances().find((i) => i.id === id)!.args, BOOT_ARGS);
  });

  it('carries the wrapped startup script in the boot script, to run once as the SSH user', async () => {
    const wrapped = wrapStartupScript(`#!/bin/sh\n${SCRIPT_SECRET}\n`);
    await create(settings({ startupScript: wrapped }));
    const sent = posts()[0].env as Record<string, string>;
    assert.deepEqual(Object.keys(sent).sort(), [BOOT_VARIABLE, 'PUBLIC_KEY']);
    const boot = Buffer.from(sent[BOOT_VARIABLE], 'base64').toString('utf8');
    assert.ok(boot.includes(wrapped.replace(/'/g, `'\\''`)), 'the wrapper as given, single-quoted');
    assert.match(boot, /if \[ ! -e "\$HOME\/\.gpr\/startup-started" \]; then/);
    assert.ok(!boot.includes('gpr_name'), 'no variables, no env file');
  });

  it('reports the proxy URL of each port once the pod runs, from get, findByLabel and listInstances', async () => {
    h.fake.setBootMs(0, 0);
    const { id, label } = await create(settings({ ports: [8888, 3000] }));
    const running = await waitForRunning(h.provider, id);
    const want = [8888, 3000].map((port) => ({ port, url: `https://${id}-${port}.proxy.runpod.net` }));
    assert.deepEqual(running.endpoints, want);
    assert.deepEqual((await h.provider.findByLabel(label))?.endpoints, want);
    assert.deepEqual((await h.provider.listInstances()).find((i) => i.instanceId === id)?.endpoints, want);
    // Not while it is not running, and never for a pod without HTTP ports.
    h.fake.setStatus(id, 'EXITED');
    await waitFor(async () => (await h.provider.get(id)).state === 'stopped', {
      timeoutMs: 5000,
      what: 'the stopped pod',
    });
    assert.equal((await h.provider.get(id)).endpoints, undefined);
    const plain = await create();
    assert.equal((await waitForRunning(h.provider, plain.id)).endpoints, undefined);
    assert.deepEqual(podEndpoints({ id: 'x', ports: ['22/tcp', '8888/http', 'junk', 5 as unknown as string] }), [
      { port: 8888, url: 'https://x-8888.proxy.runpod.net' },
    ]);
  });

  it('reports the startup phase while the pod is not running: pulling the image, then booting', async () => {
    const { id } = await create();
    const cases: [FakePodStatus | undefined, string | undefined][] = [
      ['PROVISIONING', 'pulling_image'],
      ['STARTING', 'booting'],
      ['RUNNING', undefined],
      ['EXITED', undefined],
      ['ERROR', undefined],
    ];
    const p = await h.newProvider({ pollTtlMs: 0 });
    for (const [status, phase] of cases) {
      h.fake.setStatus(id, status);
      const info = await p.get(id);
      assert.deepEqual([info.providerState, info.startupPhase], [status, phase]);
    }
    // A pod not placed yet says nothing of what it does.
    assert.equal(podStartupPhase({ status: 'PROVISIONING', dataCenterId: null }), undefined);
    assert.equal(podStartupPhase({ status: 'PROVISIONING', dataCenterId: 'EU-RO-1' }), 'pulling_image');
  });

  describe('refusals', () => {
    it("the rental's own image refused by RunPod is rejected with a reason about that image, not the operator's", async () => {
      const r = await makeRunpodHarness({ fake: { behaviour: 'recorded' } });
      try {
        const image = 'ghcr.io/acme/missing:1.0';
        r.fake.missingImage(image);
        const res = await r.provider.create(
          r.label(),
          r.offer(),
          keys.publicKey,
          settings({ image, env: { HF_TOKEN: SECRET } }),
        );
        assert.equal(res.kind, 'rejected', JSON.stringify(res));
        assert.match((res as { reason: string }).reason, /^the rental's image: RunPod refused it .*manifest unknown/);
        assert.equal((res as { errorClass?: string }).errorClass, 'request');
        assert.ok(!/RUNPOD_PROVIDER_IMAGE/.test((res as { reason: string }).reason));
        assert.ok(r.logs.some((l) => l.level === 'warn' && l.result === 'rejected'));
        assert.ok(!r.logs.some((l) => l.level === 'error'), 'nothing for the operator to fix');
        assert.equal(r.fake.instances().length, 0);
      } finally {
        await r.cleanup();
      }
    });

    it('ports RunPod cannot publish are rejected with its reason; a disk no host has is no capacity', async () => {
      const bad = await h.provider.create(h.label(), h.offer(), keys.publicKey, settings({ ports: [70000] }));
      assert.equal(bad.kind, 'rejected', JSON.stringify(bad));
      assert.match((bad as { reason: string }).reason, /machine settings .*70000/);
      const big = await makeRunpodHarness({ fake: { hostDiskGb: 300 } });
      try {
        const res = await big.provider.create(big.label(), big.offer(), keys.publicKey, settings({ diskGb: 400 }));
        assert.equal(res.kind, 'unavailable', JSON.stringify(res));
        assert.equal(
          (await big.provider.create(big.label(), big.offer(), keys.publicKey, settings({ diskGb: 300 }))).kind,
          'created',
        );
      } finally {
        await big.cleanup();
      }
    });

    it('variables named as the plugin names its own are refused before anything is sent', async () => {
      for (const name of ['PUBLIC_KEY', BOOT_VARIABLE]) {
        const res = await h.provider.create(h.label(), h.offer(), keys.publicKey, settings({ env: { [name]: 'x' } }));
        assert.equal(res.kind, 'rejected');
        assert.match(
          (res as { reason: string }).reason,
          new RegExp(`name ${name}, which the RunPod plugin sets itself`),
        );
      }
      assert.equal(posts().length, 0);
    });
  });

  it('never lets a variable value or the script into a log line or a reason, even when RunPod quotes them back', async () => {
    const wrapped = wrapStartupScript(`#!/bin/sh\n${SCRIPT_SECRET}\n`);
    const machine = settings({ env: { HF_TOKEN: SECRET, SHORT: 'ab' }, startupScript: wrapped, ports: [8888] });
    const reasons: string[] = [];
    const tryCreate = async () => {
      const res = await h.provider.create(h.label(), h.offer(), keys.publicKey, machine);
      if ('reason' in res) reasons.push(res.reason);
      return res;
    };
    const boot = podMachineFields(machine, RUNPOD_DEFAULTS, keys.publicKey.trim()).env[BOOT_VARIABLE];
    h.fake.answerNext('create', {
      status: 422,
      detail: 'Request validation failed.',
      errors: [`$.env.HF_TOKEN: value "${SECRET}" rejected`, `$.env.${BOOT_VARIABLE}: too long: ${boot}`],
    });
    const echoed = await tryCreate();
    assert.equal(echoed.kind, 'rejected');
    assert.match((echoed as { reason: string }).reason, /\$\.env\.HF_TOKEN: value "\[redacted\]" rejected/);
    h.fake.answerNext('create', { status: 400, detail: `env: HF_TOKEN=${SECRET} is too long` });
    assert.equal((await tryCreate()).kind, 'rejected');
    h.fake.failNext('create', '5xx');
    assert.equal((await tryCreate()).kind, 'ambiguous');
    h.fake.noCapacity(H100);
    assert.equal((await tryCreate()).kind, 'unavailable');
    h.fake.noCapacity(H100, false);
    h.fake.setBootMs(0, 0);
    const ok = await tryCreate();
    assert.equal(ok.kind, 'created');
    await waitForRunning(h.provider, (ok as { instanceId: string }).instanceId);
    await h.provider.listInstances();

    assert.equal((posts().at(-1)!.env as Record<string, string>)[BOOT_VARIABLE], boot);
    const seen = JSON.stringify(h.logs) + JSON.stringify(reasons);
    assert.ok(h.logs.length >= 3, 'the failures were logged');
    for (const secret of [SECRET, SCRIPT_SECRET, wrapped, boot, boot.slice(0, 40)])
      assert.ok(!seen.includes(secret), `leaked: ${secret.slice(0, 30)}`);
  });
});
