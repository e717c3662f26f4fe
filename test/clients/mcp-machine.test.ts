import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { buildClients, GPR_MCP_BIN } from './helpers/build.js';
import { RENTAL_ID, RentalService } from './helpers/rental-service.js';

type ToolResult = {
  isError?: boolean;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- read field by field against the tool's output schema
  structuredContent?: any;
  content: { type: string; text?: string }[];
};
type JsonSchema = {
  type?: string;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: unknown;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  propertyNames?: { pattern?: string };
};

const TOKEN = `gpr_AAAAAAAA.${'B'.repeat(43)}`;
const HF_TOKEN = 'hf_Secret_Value_0123456789';
const SCRIPT = '#!/bin/bash\necho "serving $MODEL_ID" # script-body-marker\n';
const INTENT = { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 300, budgetMinor: 1000 };

/** create_rental's machine, lease and capacity parameters, and get_rental's phase and endpoints, against a recording service. */
describe('gpr-mcp: machine settings, leases and phases (stdio, official MCP client)', function () {
  this.timeout(60_000);
  const service = new RentalService();
  let client: Client;
  let stderr = '';
  const seen: string[] = [];
  /** Every progress notification the server wrote, in order, as it reached the client's transport. */
  const progressWritten: { progress: number; message?: string }[] = [];

  before(async () => {
    buildClients();
    await service.start();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [GPR_MCP_BIN],
      env: {
        PATH: process.env.PATH ?? '',
        XDG_CONFIG_HOME: mkdtempSync(join(tmpdir(), 'gpr-mcp-machine-')),
        GPR_BASE_URL: service.baseUrl,
        GPR_TOKEN: TOKEN,
        GPR_RETRIES: '0',
        GPR_MCP_ALLOW_SPEND: '1',
      },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (d) => (stderr += d));
    client = new Client({ name: 'gpr-mcp-machine-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(transport);
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    // The SDK's client hands a notification to its handler a microtask later, but an answer at
    // once: a last progress notification read in the same chunk as the call's answer reaches no
    // handler. What the server sent is read here, ahead of that.
    const deliver = transport.onmessage!;
    transport.onmessage = (m) => {
      if ('method' in m && m.method === 'notifications/progress') {
        const { progress, message } = m.params as { progress: number; message?: string };
        progressWritten.push({ progress, message });
      }
      deliver(m);
    };
  });
  after(async () => {
    await client?.close();
    await service.stop();
    // Nothing the server returned or logged carried a variable's value or the script.
    for (const text of [...seen, stderr]) {
      for (const secret of [HF_TOKEN, 'script-body-marker'])
        assert.ok(!text.includes(secret), `leaked ${secret}: ${text.slice(0, 300)}`);
    }
  });
  beforeEach(() => service.reset());

  const call = async (name: string, args: Record<string, unknown>): Promise<ToolResult> => {
    const res = (await client.callTool({ name, arguments: args })) as ToolResult;
    seen.push(JSON.stringify(res));
    return res;
  };

  it("declares machine, terminateAfterSeconds and waitForCapacitySeconds with the service's bounds", async () => {
    const { tools } = await client.listTools();
    const create = tools.find((t) => t.name === 'create_rental')!;
    const props = create.inputSchema.properties as Record<string, JsonSchema>;
    const machine = props.machine;
    assert.equal(machine.type, 'object');
    assert.equal(machine.additionalProperties, false, 'unknown settings are refused');
    assert.deepEqual(Object.keys(machine.properties!).sort(), ['diskGb', 'env', 'image', 'ports', 'startupScript']);
    assert.equal(machine.properties!.env.propertyNames?.pattern, '^[A-Z_][A-Z0-9_]*$');
    assert.equal(machine.properties!.ports.maxItems, 5);
    assert.deepEqual(
      [props.terminateAfterSeconds.minimum, props.waitForCapacitySeconds.minimum, props.waitForCapacitySeconds.maximum],
      [60, 60, 86_400],
    );
    assert.match(create.description!, /machine/);
    assert.match(create.description!, /never returned/);
    assert.match(tools.find((t) => t.name === 'get_rental')!.description!, /ACTIVE means usable/);
  });

  it("accepts them and sends them as given; the answer shows names and the script's hash, never the values", async () => {
    const machine = {
      image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
      env: { HF_TOKEN, MODEL_ID: 'meta-llama/Llama-3.1-8B' },
      startupScript: SCRIPT,
      ports: [8000],
      diskGb: 200,
    };
    const res = await call('create_rental', {
      ...INTENT,
      machine,
      terminateAfterSeconds: 7200,
      waitForCapacitySeconds: 1800,
    });
    assert.ok(!res.isError, JSON.stringify(res));
    assert.deepEqual(service.creates[0].body, {
      ...INTENT,
      machine,
      terminateAfterSeconds: 7200,
      waitForCapacitySeconds: 1800,
    });
    const { rental } = res.structuredContent;
    assert.deepEqual(rental.machine.envNames, ['HF_TOKEN', 'MODEL_ID']);
    assert.match(rental.machine.startupScriptSha256, /^[0-9a-f]{64}$/);
    assert.equal(rental.phase, 'waiting_for_capacity');
    assert.equal(rental.leaseSeconds, 7200);
    assert.ok(rental.waitForCapacityUntil);
  });

  it('refuses what the service would refuse, before sending anything, without repeating a value', async () => {
    const refused: Record<string, unknown>[] = [
      { ...INTENT, machine: { env: { hf_token: HF_TOKEN } } },
      { ...INTENT, machine: { env: { OK: `${HF_TOKEN}${'x'.repeat(4096)}` } } },
      { ...INTENT, machine: { ports: [8000, 8001, 8002, 8003, 8004, 8005] } },
      { ...INTENT, machine: { ports: [0] } },
      { ...INTENT, machine: { diskGb: 0 } },
      { ...INTENT, machine: { startupScript: '' } },
      { ...INTENT, machine: { shell: 'bash' } },
      { ...INTENT, terminateAfterSeconds: 30 },
      { ...INTENT, waitForCapacitySeconds: 90_000 },
      { offerId: 'offer-1', budgetMinor: 1000, waitForCapacitySeconds: 600 },
    ];
    for (const args of refused) {
      const res = await call('create_rental', args);
      assert.equal(res.isError, true, JSON.stringify(args).slice(0, 200));
      assert.ok(!res.content[0].text!.includes(HF_TOKEN), res.content[0].text);
    }
    assert.equal(service.creates.length, 0, 'nothing was sent');
    const offer = await call('create_rental', { offerId: 'offer-1', budgetMinor: 1000, waitForCapacitySeconds: 600 });
    assert.match(offer.content[0].text!, /waitForCapacitySeconds needs gpuModel/);
  });

  it("a refusal naming a setting or the key's longest rental gets its next step; a secret echoed back is blanked", async () => {
    service.refuse = {
      status: 422,
      code: 'VALIDATION_FAILED',
      message: `Invalid request: machine.image: offer "NVIDIA H100 SXM" (local) cannot run a custom image; got env ${HF_TOKEN}.`,
    };
    const image = await call('create_rental', { ...INTENT, machine: { image: 'nginx:1', env: { HF_TOKEN } } });
    assert.equal(image.isError, true);
    assert.match(
      image.content[0].text!,
      /^VALIDATION_FAILED \(HTTP 422\): Invalid request: machine\.image: .*\[redacted\].*Next: Give machine\.image as registry\/path:tag.*list_offers shows each offer's capabilities/,
    );
    service.refuse = {
      status: 422,
      code: 'VALIDATION_FAILED',
      message:
        'Invalid request: terminateAfterSeconds: 86400 is longer than this key allows: its rentals last at most 3600 seconds (1 hour).',
    };
    const lease = await call('create_rental', { ...INTENT, terminateAfterSeconds: 86_400 });
    assert.match(
      lease.content[0].text!,
      /Next: This key's maxRentalSeconds \(get_account shows key\.maxRentalSeconds\) caps every lease/,
    );
  });

  it('get_rental shows the phase while it starts, the endpoints and endsAt once ACTIVE, and what to do next', async () => {
    assert.ok(
      !(await call('create_rental', { ...INTENT, machine: { ports: [8000] }, terminateAfterSeconds: 3600 })).isError,
    );
    service.states = [
      { status: 'PROVISIONING', phase: 'booting' },
      { status: 'PROVISIONING', phase: 'booting' },
      {
        status: 'ACTIVE',
        phase: null,
        endpoints: [{ port: 8000, url: 'https://8000-abc.proxy.example.net' }],
        endsAt: '2026-01-15T13:00:00.000Z',
      },
    ];
    const starting = await call('get_rental', { rentalId: RENTAL_ID });
    assert.equal(starting.structuredContent.rental.phase, 'booting');
    assert.match(
      starting.structuredContent.next,
      /^Starting \(phase booting\): call get_rental with waitFor \["ACTIVE", "FAILED"\] again/,
    );
    const active = await call('get_rental', { rentalId: RENTAL_ID, waitFor: 'ACTIVE', waitSeconds: 10 });
    assert.equal(active.structuredContent.reachedWaitFor, true);
    assert.deepEqual(active.structuredContent.rental.endpoints, [
      { port: 8000, url: 'https://8000-abc.proxy.example.net' },
    ]);
    assert.equal(active.structuredContent.rental.endsAt, '2026-01-15T13:00:00.000Z');
    assert.match(active.structuredContent.next, /^Usable: reveal_ssh_credentials .*endpoints .*endsAt/);
  });

  it('get_rental waiting for ACTIVE sends a progress notification per change when the call asks for progress', async () => {
    assert.ok(!(await call('create_rental', INTENT)).isError);
    service.states = [
      { status: 'PENDING', phase: 'creating' },
      { status: 'PROVISIONING', phase: 'booting' },
      { status: 'PROVISIONING', phase: 'booting' },
      { status: 'ACTIVE', phase: null },
    ];
    const progress: { progress: number; message?: string }[] = [];
    progressWritten.length = 0;
    const res = (await client.callTool(
      { name: 'get_rental', arguments: { rentalId: RENTAL_ID, waitFor: ['ACTIVE', 'FAILED'], waitSeconds: 20 } },
      { onprogress: (p) => progress.push(p) },
    )) as ToolResult;
    seen.push(JSON.stringify(res));
    assert.equal(res.structuredContent.reachedWaitFor, true);
    // Written before the answer, one per change.
    assert.deepEqual(
      progressWritten.map((p) => p.message),
      ['rental PROVISIONING (phase booting)', 'rental ACTIVE'],
    );
    assert.deepEqual(
      progressWritten.map((p) => p.progress),
      [1, 2],
      'growing',
    );
    // The caller's callback got them, except perhaps the last (see above).
    assert.deepEqual(
      progress.map(({ progress: n, message }) => ({ progress: n, message })),
      progressWritten.slice(0, progress.length),
    );
    assert.ok(progress.length >= 1);
    const reads = service.received.filter((r) => r.method === 'GET').map((r) => decodeURIComponent(r.path));
    assert.ok(
      reads.slice(2).every((p) => /\?waitFor=[A-Z_,]+&waitSeconds=\d+$/.test(p)),
      `waiting reads: ${reads.join(' ')}`,
    );
  });

  it('a rental that failed GPU_MISMATCH says what happened and what to do', async () => {
    assert.ok(!(await call('create_rental', INTENT)).isError);
    service.states = [
      {
        status: 'FAILED',
        phase: null,
        failureCode: 'GPU_MISMATCH',
        failureReason:
          'The machine came up with fewer GPUs than its offer promised, so it was destroyed; your rental was not started.',
      },
    ];
    const res = await call('get_rental', { rentalId: RENTAL_ID, waitFor: 'ACTIVE', waitSeconds: 5 });
    assert.equal(res.structuredContent.reachedWaitFor, false, 'FAILED is not what a wait for ACTIVE alone asked for');
    assert.equal(res.structuredContent.rental.failureCode, 'GPU_MISMATCH');
    assert.match(
      res.structuredContent.next,
      /fewer GPUs than its offer promised and was destroyed.*To go on, call create_rental again, preferably another offer or provider \(list_offers\)/,
    );
  });

  it('get_rental waits for any status of a waitFor list, as the HTTP waiting read does: FAILED ends a wait for ["ACTIVE", "FAILED"] as reached', async () => {
    assert.ok(!(await call('create_rental', INTENT)).isError);
    service.states = [
      { status: 'PROVISIONING', phase: 'booting' },
      {
        status: 'FAILED',
        phase: null,
        failureCode: 'PROVISIONING_FAILED',
        failureReason: 'The machine failed to start; your rental was not started.',
      },
    ];
    const res = await call('get_rental', { rentalId: RENTAL_ID, waitFor: ['ACTIVE', 'FAILED'], waitSeconds: 10 });
    assert.equal(res.isError, undefined);
    assert.equal(res.structuredContent.reachedWaitFor, true);
    assert.equal(res.structuredContent.rental.status, 'FAILED');
  });

  it('create_rental leaves budgetMinor out when the call does, as the API allows on balance accounts', async () => {
    const { budgetMinor: _omitted, ...noBudget } = INTENT;
    assert.ok(!(await call('create_rental', noBudget)).isError);
    assert.deepEqual(service.creates[0].body, noBudget);
  });

  it('reveal_ssh_credentials and terminate_deployment take rentalId or deploymentId, and refuse a call naming both or neither', async () => {
    for (const tool of ['reveal_ssh_credentials', 'terminate_deployment']) {
      for (const args of [{}, { rentalId: RENTAL_ID, deploymentId: RENTAL_ID }]) {
        const res = await call(tool, args);
        assert.equal(res.isError, true);
        assert.match(
          res.content[0].text!,
          new RegExp(`^${tool} needs exactly one of rentalId .* or deploymentId\\. Nothing was done\\.$`),
        );
      }
    }
    assert.equal(service.received.filter((r) => r.method === 'POST').length, 0, 'nothing was sent');
  });
});
