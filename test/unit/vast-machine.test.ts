import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { isVastOfferDrop, mapVastOffer, type VastOffer } from '../../plugins/vast/offers.js';
import {
  VAST_ENV_ENTRY_MAX,
  VAST_ENV_TOTAL_MAX,
  VAST_ONSTART,
  VAST_ONSTART_MAX,
  VAST_SETUP_PREFIX,
  vastEndpoints,
  vastMachineFields,
  vastStartupPhase,
  withoutEnvValues,
} from '../../plugins/vast/machine.js';
import { readVastState } from '../../plugins/vast/states.js';
import { wrapStartupScript } from '../../src/modules/rentals/store/machine-secrets.js';
import { DEFAULT_MACHINE_SETTINGS, type MachineSettings } from '../../src/providers/provider.js';
import { fixtureJson } from '../fakes/recorded.js';

const DEFAULTS = { image: 'vastai/base-image:cuda-12.4.1-auto', diskGb: 32 };
const settings = (s: Partial<MachineSettings>): MachineSettings => ({
  ...DEFAULT_MACHINE_SETTINGS,
  env: {},
  ports: [],
  ...s,
});
const fieldsOf = (s: Partial<MachineSettings>) => {
  const f = vastMachineFields(settings(s), DEFAULTS);
  if ('kind' in f) throw new Error(f.reason);
  return f;
};
/** The setup text the numbered variables carry, joined as the onstart joins it. */
const setupOf = (env: Record<string, string>) => {
  const parts: string[] = [];
  for (let i = 0; `${VAST_SETUP_PREFIX}${i}` in env; i++) parts.push(env[`${VAST_SETUP_PREFIX}${i}`]);
  return parts.join('');
};

describe('vast machine settings: the create fields', () => {
  it('a rental without settings sends the plugin image and disk and nothing else', () => {
    assert.deepEqual(fieldsOf({}), {
      image: DEFAULTS.image,
      disk: 32,
      sent: { image: false, disk: false, ports: false, secrets: false },
    });
  });

  it('sends the rental image and disk as they are', () => {
    const f = fieldsOf({ image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime', diskGb: 200 });
    assert.deepEqual(
      [f.image, f.disk, f.env, f.onstart],
      ['pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime', 200, undefined, undefined],
    );
    assert.deepEqual(f.sent, { image: true, disk: true, ports: false, secrets: false });
  });

  it('opens each port with the documented -p mapping and needs no onstart for ports alone', () => {
    const f = fieldsOf({ ports: [8000, 7860] });
    assert.deepEqual(f.env, { '-p 8000:8000': '1', '-p 7860:7860': '1' });
    assert.equal(f.onstart, undefined);
  });

  it('puts variables that fit under their own names; longer values, the names and the script go in the setup text', () => {
    const long = 'v'.repeat(4096);
    const script = wrapStartupScript(`echo ${'x'.repeat(16_000)}\n`);
    const f = fieldsOf({ env: { HF_TOKEN: 'hf_abc', EMPTY: '', LONG: long }, startupScript: script, ports: [8000] });
    const env = f.env!;
    assert.equal(env.HF_TOKEN, 'hf_abc');
    assert.equal(env.EMPTY, '');
    assert.equal(env.LONG, undefined, 'a value over the entry limit is not sent under its name');
    assert.equal(env['-p 8000:8000'], '1');
    assert.equal(f.onstart, VAST_ONSTART);
    for (const [k, v] of Object.entries(env))
      assert.ok(k.length <= VAST_ENV_ENTRY_MAX && [...v].length <= VAST_ENV_ENTRY_MAX, k);
    const setup = setupOf(env);
    assert.ok(setup.startsWith("gpr_names='HF_TOKEN EMPTY LONG'\n"), setup.slice(0, 60));
    assert.ok(setup.includes(`LONG='${long}'\nexport LONG\n`));
    assert.ok(setup.includes(`gpr_script='${script.replace(/'/g, `'\\''`)}'\n`));
    assert.deepEqual(f.sent, { image: false, disk: false, ports: true, secrets: true });
  });

  it('never cuts a character in two', () => {
    const f = fieldsOf({ env: { U: '€😀'.repeat(200) } });
    for (const [k, v] of Object.entries(f.env!))
      if (k.startsWith(VAST_SETUP_PREFIX)) assert.ok(!/^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/.test(v), k);
    assert.ok(setupOf(f.env!).includes(`U='${'€😀'.repeat(200)}'`));
  });

  it('the onstart fits Vast limit and is one text for every rental, holding no value', () => {
    assert.ok(VAST_ONSTART.length < VAST_ONSTART_MAX, String(VAST_ONSTART.length));
    assert.equal(fieldsOf({ env: { SECRET: 'hunter2-secret' } }).onstart, VAST_ONSTART);
  });

  it('refuses, before anything is sent, what Vast limits cannot carry, naming sizes and never a value', () => {
    const secret = randomBytes(2048).toString('hex');
    const env = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`V${i}`, secret]));
    const over = vastMachineFields(settings({ env }), DEFAULTS);
    assert.equal('kind' in over && over.kind, 'rejected');
    const reason = (over as { reason: string }).reason;
    assert.match(reason, new RegExp(`over its limit of ${VAST_ENV_TOTAL_MAX}; nothing was sent$`));
    assert.ok(!reason.includes(secret.slice(0, 16)));
    const cases: [Partial<MachineSettings>, RegExp][] = [
      [{ env: { 'BAD-NAME': 'x' } }, /"BAD-NAME" is not a shell variable name/],
      [{ env: { 'A;rm -rf /': 'x' } }, /is not a shell variable name/],
      [{ env: { [`${VAST_SETUP_PREFIX}0`]: 'x' } }, /is reserved by this plugin/],
      [{ ports: [1, 2, 3, 4, 5, 6] }, /6 ports asked, at most 5/],
      [{ ports: [0] }, /port 0 is not a TCP port/],
    ];
    for (const [s, why] of cases) {
      const r = vastMachineFields(settings(s), DEFAULTS);
      assert.ok('kind' in r && r.kind === 'rejected' && r.errorClass === 'request', JSON.stringify(s));
      assert.match(r.reason, why);
    }
  });
});

describe('vast machine settings: offers and instances', () => {
  it('offers a custom image, a startup script, five ports and the disk the ask has free, up to the disk its price covers', () => {
    const raw = fixtureJson<VastOffer[]>('vast', 'search-offers-raw-rtx4090.json')[0];
    const mapped = mapVastOffer(raw, 32);
    assert.deepEqual(!isVastOfferDrop(mapped) && mapped.capabilities, {
      customImage: true,
      startupScript: true,
      ports: 5,
      maxDiskGb: 32,
    });
    const priced = mapVastOffer(raw, 5000);
    assert.equal(!isVastOfferDrop(priced) && priced.capabilities?.maxDiskGb, 1607, 'the ask has only 1607 GB free');
    const small = mapVastOffer({ ...raw, disk_space: 7.5 }, 32);
    assert.equal(!isVastOfferDrop(small) && small.capabilities?.maxDiskGb, null);
    const unknown = mapVastOffer({ ...raw, disk_space: null }, 32);
    assert.equal(!isVastOfferDrop(unknown) && unknown.capabilities?.maxDiskGb, null);
  });

  it('reports an endpoint for each requested port Vast mapped, on the public address', () => {
    // The documented list item: a mapped 8888 and 22, the create's env kept as pairs.
    const doc = {
      public_ipaddr: '192.0.2.45',
      ports: {
        '8888/tcp': [{ HostIp: '0.0.0.0', HostPort: '8888' }],
        '22/tcp': [{ HostIp: '0.0.0.0', HostPort: '20000' }],
      },
    };
    assert.deepEqual(
      vastEndpoints({
        ...doc,
        extra_env: [
          ['DOG', 'CAT'],
          ['-p 8888:8888', '1'],
        ],
      }),
      [{ port: 8888, url: 'http://192.0.2.45:8888' }],
    );
    // The documented example's own mapping names a port no TCP port can be.
    assert.equal(
      vastEndpoints({
        ...doc,
        extra_env: [
          ['DOG', 'CAT'],
          ['-p 70001:70001', '1'],
        ],
      }),
      undefined,
    );
    // Ports the image opened itself are not the rental's; unmapped ones are not reported yet.
    assert.equal(vastEndpoints({ ...doc, extra_env: [] }), undefined);
    assert.deepEqual(
      vastEndpoints({
        ...doc,
        extra_env: [
          ['-p 9000:9000', '1'],
          ['-p 8888:8888', '1'],
        ],
      }),
      [{ port: 8888, url: 'http://192.0.2.45:8888' }],
    );
    assert.equal(vastEndpoints({ ...doc, public_ipaddr: null, extra_env: [['-p 8888:8888', '1']] }), undefined);
    assert.equal(vastEndpoints({ ...doc, ports: null, extra_env: [['-p 8888:8888', '1']] }), undefined);
  });

  it('reads the startup phase from actual_status and status_msg', () => {
    const table: [string | null, string | null, string | undefined][] = [
      [null, null, undefined],
      ['loading', null, 'pulling_image'],
      ['loading', 'Pulling from vastai/base-image', 'pulling_image'],
      ['loading', 'Downloading [=====>      ] 1.2GB/3.4GB', 'pulling_image'],
      ['loading', 'Extracting layer sha256:1a2b', 'pulling_image'],
      ['loading', 'success, running nvidia/cuda_11.0.3-devel-ubuntu18.04/ssh', 'booting'],
      ['created', null, 'booting'],
      ['rebooting', null, 'booting'],
      ['running', null, undefined],
    ];
    for (const [actual, msg, phase] of table)
      assert.equal(vastStartupPhase({ actual_status: actual, status_msg: msg }), phase, `${actual} ${msg}`);
  });

  it('takes the instance variables out of Vast messages before they reach a log', () => {
    const inst = {
      extra_env: [
        ['HF_TOKEN', 'hf_secretvalue'],
        ['SHORT', 'abc'],
        ['-p 8000:8000', '1'],
        [`${VAST_SETUP_PREFIX}0`, "gpr_script='echo hi'"],
      ],
    };
    const msg = "Error response from daemon: invalid env HF_TOKEN=hf_secretvalue near gpr_script='echo hi' abc";
    assert.equal(
      withoutEnvValues(msg, inst),
      'Error response from daemon: invalid env HF_TOKEN=[withheld] near [withheld] abc',
    );
    assert.equal(withoutEnvValues(msg, {}), msg);
  });

  it('a recorded start that failed while loading is a failure, not an image pull', () => {
    const f = fixtureJson<{ actual_status: string; intended_status: string; status_msg: string }>(
      'vast',
      'show-instance-loading-intended-stopped.json',
    );
    assert.equal(readVastState(f).kind === 'known' && (readVastState(f) as { state: string }).state, 'failed');
  });

  it('the onstart is a program sh reads', () => {
    const r = spawnSync('sh', ['-n'], { input: VAST_ONSTART });
    assert.equal(r.status, 0, r.stderr.toString());
  });
});
