import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildClients, GPR_BIN, run, type Run } from './helpers/build.js';
import { DEPLOYMENT_ID, RENTAL_ID, RentalService } from './helpers/rental-service.js';

const TOKEN = `gpr_AAAAAAAA.${'B'.repeat(43)}`;
const HF_TOKEN = 'hf_Secret_Value_0123456789';
const DB_PASSWORD = 'p@ss "quoted" value';
const SCRIPT = '#!/bin/bash\necho "starting with $MODEL_ID"\npython3 -m http.server 8000 # script-body-marker\n';
const ENDPOINT = 'https://8000-abc.proxy.example.net';

/** The running states after a create: two phases, then ACTIVE with the port's URL and the lease's end. */
const TO_ACTIVE = [
  { status: 'PROVISIONING', phase: 'booting' },
  { status: 'PROVISIONING', phase: 'checking_gpus' },
  {
    status: 'ACTIVE',
    phase: null,
    phaseSince: null,
    endpoints: [{ port: 8000, url: ENDPOINT }],
    endsAt: '2026-01-15T14:00:00.000Z',
  },
];

/** `gpr rent`'s machine, lease and capacity flags, against a service that records what it is sent. */
describe('gpr rent: machine settings, lease and waiting for capacity (built binary)', function () {
  this.timeout(60_000);
  const service = new RentalService();
  const dir = mkdtempSync(join(tmpdir(), 'gpr-machine-'));
  const scriptFile = join(dir, 'serve.sh');
  const envFrom = join(dir, 'secrets.env');

  before(async () => {
    buildClients();
    await service.start();
    writeFileSync(scriptFile, SCRIPT);
    writeFileSync(envFrom, `# secrets\nexport DB_PASSWORD="${DB_PASSWORD}"\n\nMODEL_ID=file-model\n`);
  });
  after(() => service.stop());
  beforeEach(() => service.reset());

  const gpr = (args: string[], env: Record<string, string> = {}) =>
    run(GPR_BIN, args, {
      HOME: dir,
      XDG_CONFIG_HOME: dir,
      GPR_BASE_URL: service.baseUrl,
      GPR_TOKEN: TOKEN,
      GPR_RETRIES: '0',
      ...env,
    });
  const rentGpu = ['rent', '--gpu', 'H100 SXM', '--max-price', '3', '--budget', '10'];
  /** Nothing gpr printed carries a variable's value or any of the script. */
  const noSecrets = (r: Run) => {
    const printed = r.stdout + r.stderr;
    for (const secret of [
      HF_TOKEN,
      DB_PASSWORD,
      JSON.stringify(DB_PASSWORD).slice(1, -1),
      SCRIPT,
      'script-body-marker',
      JSON.stringify(SCRIPT).slice(1, -1),
    ]) {
      assert.ok(!printed.includes(secret), `printed ${JSON.stringify(secret)}:\n${printed}`);
    }
  };
  const usage = (r: Run, message: RegExp) => {
    assert.equal(r.code, 2, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    assert.match(r.stderr, /^Error USAGE: /m);
    assert.match(r.stderr, message);
    assert.equal(service.creates.length, 0, 'nothing was sent');
  };

  it('sends every flag as the request field it names, shows each phase while waiting, then the endpoint and the lease, and prints no secret', async () => {
    service.states = TO_ACTIVE;
    const r = await gpr(
      [
        ...rentGpu,
        '--image',
        'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
        '--env-from',
        envFrom,
        '--env',
        'MODEL_ID=meta-llama/Llama-3.1-8B',
        '--env',
        'HF_TOKEN',
        '--script',
        scriptFile,
        '--port',
        '8000',
        '--port',
        '8080',
        '--disk',
        '200',
        '--ttl',
        '2h',
        '--wait',
        '--timeout',
        '1m',
      ],
      { HF_TOKEN },
    );
    assert.equal(r.code, 0, r.stderr);
    const [create] = service.creates;
    assert.deepEqual(create.body, {
      gpuModel: 'H100 SXM',
      gpuCount: 1,
      maxHourlyPriceMinor: 300,
      budgetMinor: 1000,
      machine: {
        image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
        // The file's quotes are removed; --env wins over the file for MODEL_ID; HF_TOKEN comes from the shell.
        env: { DB_PASSWORD, MODEL_ID: 'meta-llama/Llama-3.1-8B', HF_TOKEN },
        startupScript: SCRIPT,
        ports: [8000, 8080],
        diskGb: 200,
      },
      terminateAfterSeconds: 7200,
    });
    assert.match(create.idempotencyKey!, /^[0-9a-f-]{36}$/);

    assert.match(
      r.stderr,
      /^Terminated 2 h after it becomes ACTIVE \(the lease you asked for\); endsAt shows when\.$/m,
    );
    assert.match(r.stderr, /^rental PROVISIONING \(booting\)$/m);
    assert.match(r.stderr, /^rental PROVISIONING \(checking_gpus\)$/m);
    assert.match(r.stderr, /^rental ACTIVE$/m);
    assert.equal(r.stderr.match(/^rental PROVISIONING \(booting\)$/gm)?.length, 1, 'one line per change');
    assert.match(r.stdout, /^status\s+ACTIVE$/m);
    assert.match(r.stdout, new RegExp(`^endpoint\\s+8000 ${ENDPOINT.replaceAll('.', '\\.')}$`, 'm'));
    assert.match(r.stdout, /^ends at\s+2026-01-15T14:00:00\.000Z$/m);
    assert.match(r.stdout, /^lease\s+2 h$/m);
    assert.match(r.stdout, /^env\s+DB_PASSWORD, HF_TOKEN, MODEL_ID$/m, 'names only');
    assert.match(r.stdout, new RegExp(`^script sha256\\s+${createHash('sha256').update(SCRIPT).digest('hex')}$`, 'm'));
    assert.match(r.stdout, /^ports\s+8000, 8080$/m);
    assert.match(r.stdout, /^disk\s+200 GB$/m);
    assert.match(r.stdout, new RegExp(`^Connect: gpr ssh ${RENTAL_ID}$`, 'm'));
    noSecrets(r);
  });

  it('--json: the same request, the rental as the API answers it, nothing on stderr and no secret', async () => {
    service.states = TO_ACTIVE;
    const r = await gpr([
      '--json',
      ...rentGpu,
      '--env',
      `HF_TOKEN=${HF_TOKEN}`,
      '--script',
      scriptFile,
      '--port',
      '8000',
      '--ttl',
      '90m',
      '--wait',
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    const out = JSON.parse(r.stdout);
    assert.equal(out.status, 'ACTIVE');
    assert.deepEqual(out.endpoints, [{ port: 8000, url: ENDPOINT }]);
    assert.deepEqual(out.machine.envNames, ['HF_TOKEN']);
    assert.equal((service.creates[0].body as { terminateAfterSeconds: number }).terminateAfterSeconds, 5400);
    noSecrets(r);
  });

  it('--wait-capacity sends waitForCapacitySeconds and shows the deadline and the wait; refused with --offer', async () => {
    usage(await gpr(['rent', '--offer', 'offer-1', '--wait-capacity', '30m']), /--wait-capacity needs --gpu/);
    service.states = [{ status: 'PENDING', phase: 'waiting_for_capacity' }, ...TO_ACTIVE];
    const r = await gpr([...rentGpu, '--wait-capacity', '30m', '--wait']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal((service.creates[0].body as { waitForCapacitySeconds: number }).waitForCapacitySeconds, 1800);
    assert.match(r.stderr, /^Waits for capacity until 2026-01-15T12:30:00\.000Z: .*NO_CAPACITY/m);
    assert.match(r.stderr, /^rental PENDING \(waiting_for_capacity until 2026-01-15T12:30:00\.000Z\)$/m);
    assert.match(r.stdout, /^status\s+ACTIVE$/m);
  });

  it('durations: 2h, 90m, 1h30m, 3600s and bare seconds; anything else exits 2 before a request', async () => {
    for (const [ttl, seconds] of [
      ['2h', 7200],
      ['90m', 5400],
      ['1h30m', 5400],
      ['3600s', 3600],
      ['600', 600],
    ] as const) {
      service.reset();
      const r = await gpr(['--json', ...rentGpu, '--ttl', ttl]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.equal((service.creates[0].body as { terminateAfterSeconds: number }).terminateAfterSeconds, seconds, ttl);
    }
    service.reset();
    usage(
      await gpr([...rentGpu, '--ttl', 'two hours']),
      /--ttl must be a duration such as 2h, 90m, 1h30m or 3600s .*got "two hours"/,
    );
    usage(await gpr([...rentGpu, '--ttl', '0m']), /--ttl must be a duration/);
    usage(await gpr([...rentGpu, '--wait-capacity', '30x']), /--wait-capacity must be a duration/);
    usage(await gpr([...rentGpu, '--wait', '--timeout', 'soon']), /--timeout must be a duration/);
    const json = await gpr(['--json', ...rentGpu, '--ttl', '2 h']);
    assert.equal(json.code, 2);
    assert.equal(JSON.parse(json.stdout).error.code, 'USAGE');
  });

  it('bad variables, files and ports exit 2 before a request, never repeating what may be a secret', async () => {
    usage(
      await gpr([...rentGpu, '--env', HF_TOKEN]),
      /--env \(the 1st\) must be NAME=VALUE, or NAME to pass this shell's \$NAME; the argument is not shown/,
    );
    usage(
      await gpr([...rentGpu, '--env', 'A=1', '--env', `hf_token=${HF_TOKEN}`]),
      /--env \(the 2nd\): the text before "=" is not a variable name .*it is not shown/,
    );
    usage(
      await gpr([...rentGpu, '--env', 'UNSET_IN_THIS_SHELL']),
      /--env \(the 1st\): \$UNSET_IN_THIS_SHELL is not set in this shell; give --env UNSET_IN_THIS_SHELL=VALUE/,
    );
    usage(
      await gpr([...rentGpu, '--script', join(dir, 'missing.sh')]),
      /Cannot read --script .*missing\.sh \(ENOENT\)/,
    );
    usage(
      await gpr([...rentGpu, '--env-from', join(dir, 'missing.env')]),
      /Cannot read --env-from .*missing\.env \(ENOENT\)/,
    );
    assert.equal(service.creates.length, 0);
    const badFile = join(dir, 'bad.env');
    writeFileSync(badFile, `OK=1\n${HF_TOKEN}\n`);
    usage(
      await gpr([...rentGpu, '--env-from', badFile]),
      /--env-from .*bad\.env line 2 is not NAME=VALUE \(the line is not shown/,
    );
    const empty = join(dir, 'empty.sh');
    writeFileSync(empty, '\n');
    usage(await gpr([...rentGpu, '--script', empty]), /--script .*empty\.sh is empty/);
    usage(await gpr([...rentGpu, '--port', 'http']), /--port must be a TCP port number from 1 to 65535, got "http"/);
    usage(await gpr([...rentGpu, '--port', '70000']), /--port must be a TCP port number/);
    usage(await gpr([...rentGpu, '--disk', '1.5']), /--disk must be a whole number of GB/);
    for (const r of service.received) assert.notEqual(r.method, 'POST');
  });

  it('a refusal naming a setting gets its next step; a service echoing a secret back has it blanked', async () => {
    service.refuse = {
      status: 422,
      code: 'VALIDATION_FAILED',
      message: `Invalid request: machine.ports: offer "NVIDIA H100 SXM" (local) cannot expose ports; value ${HF_TOKEN}.`,
    };
    const ports = await gpr([...rentGpu, '--env', `HF_TOKEN=${HF_TOKEN}`, '--port', '8000']);
    assert.equal(ports.code, 1, ports.stderr);
    assert.match(
      ports.stderr,
      /^Error VALIDATION_FAILED \(HTTP 422\): Invalid request: machine\.ports: .*\[redacted\]/m,
    );
    assert.match(
      ports.stderr,
      /^Next: Expose at most 5 ports \(--port\), .*capabilities\.ports .*see `gpr offers --json`/m,
    );
    noSecrets(ports);
    const json = await gpr(['--json', ...rentGpu, '--env', `HF_TOKEN=${HF_TOKEN}`, '--port', '8000']);
    assert.equal(JSON.parse(json.stdout).error.code, 'VALIDATION_FAILED');
    noSecrets(json);

    service.refuse = {
      status: 422,
      code: 'VALIDATION_FAILED',
      message:
        "Invalid request: terminateAfterSeconds: 86400 is longer than this key allows: its rentals last at most 3600 seconds (1 hour); send at most 3600, or ask the key's owner for a longer maximum.",
    };
    const lease = await gpr([...rentGpu, '--ttl', '1d']);
    assert.equal(lease.code, 1);
    assert.match(
      lease.stderr,
      /^Next: This key's maxRentalSeconds \(see `gpr whoami`\) caps every lease: give --ttl of at most that/m,
    );
  });

  it('a rental that fails GPU_MISMATCH while waiting says what happened and what to do', async () => {
    service.states = [
      { status: 'PROVISIONING', phase: 'checking_gpus' },
      {
        status: 'FAILED',
        phase: null,
        failureCode: 'GPU_MISMATCH',
        failureReason:
          'The machine came up with fewer GPUs than its offer promised, so it was destroyed; your rental was not started.',
      },
    ];
    const r = await gpr([...rentGpu, '--wait']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      /^Error GPU_MISMATCH: Rental .* will not become ACTIVE \(GPU_MISMATCH: The machine came up with fewer GPUs/m,
    );
    assert.match(
      r.stderr,
      /^Next: The machine came up with fewer GPUs than its offer promised and was destroyed .*To go on, rent with `gpr rent` again, preferably another offer or provider/m,
    );
  });

  it('gpr status and gpr wait show the phase, then the endpoints', async () => {
    service.states = [
      { status: 'PROVISIONING', phase: 'pulling_image', phaseSince: '2026-01-15T12:01:00.000Z' },
      ...TO_ACTIVE,
    ];
    assert.equal((await gpr(['--json', ...rentGpu, '--port', '8000'])).code, 0);
    const status = await gpr(['status', RENTAL_ID]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^phase\s+pulling_image since 2026-01-15T12:01:00\.000Z$/m);
    assert.match(status.stdout, new RegExp(`^Wait: gpr wait ${RENTAL_ID}$`, 'm'));
    const waited = await gpr(['wait', RENTAL_ID, '--timeout', '30s']);
    assert.equal(waited.code, 0, waited.stderr);
    assert.match(waited.stderr, /^rental PROVISIONING \(checking_gpus\)$/m);
    assert.match(waited.stdout, new RegExp(`^endpoint\\s+8000 ${ENDPOINT.replaceAll('.', '\\.')}$`, 'm'));
    assert.match(waited.stdout, new RegExp(`^deployment\\s+${DEPLOYMENT_ID}$`, 'm'));
  });
});
