import assert from 'node:assert/strict';
import { FakeVastApi } from '../fakes/vast-api.js';
import { parseEnvString } from '../fakes/vast-machine.js';
import { waitFor } from '../helpers/wait.js';

/** The fake Vast checks a create's machine fields as the create document says, and runs `onstart` as Vast does. */
describe('FakeVastApi machine fields', () => {
  let fake: FakeVastApi;
  const ask = 7100001;

  beforeEach(async () => {
    fake = await FakeVastApi.start({ bootMs: 20 });
  });
  afterEach(async () => fake.close());

  async function call(method: string, path: string, body?: unknown) {
    const res = await fetch(`${fake.url}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${fake.apiKey}`,
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- wire bodies of many shapes, read field by field
    return { status: res.status, json: (await res.json()) as any };
  }
  const create = (extra: Record<string, unknown>) =>
    call('PUT', `/api/v0/asks/${ask}/`, {
      client_id: 'me',
      image: 'vastai/base-image:cuda-12.4',
      label: 'm',
      disk: 10,
      ...extra,
    });
  const show = async (id: number) => (await call('GET', `/api/v0/instances/${id}/`)).json.instances;

  it('keeps env as Vast does (pairs in extra_env), in the object form and the documented flag string', async () => {
    const a = await create({ env: { HF_TOKEN: 'hf_x', '-p 8000:8000': '1' }, onstart: 'echo hi' });
    assert.equal(a.status, 200);
    const inst = await show(a.json.new_contract);
    assert.deepEqual(
      [inst.extra_env, inst.onstart, inst.disk_space],
      [
        [
          ['HF_TOKEN', 'hf_x'],
          ['-p 8000:8000', '1'],
        ],
        'echo hi',
        10,
      ],
    );
    assert.deepEqual(fake.createBodyOf(String(a.json.new_contract))?.env, { HF_TOKEN: 'hf_x', '-p 8000:8000': '1' });
    const b = await create({ env: '-e TZ=UTC -e MODEL="Qwen/Qwen2.5 3B" -p 8081:8081 -p 8082:8082/udp' });
    assert.deepEqual((await show(b.json.new_contract)).extra_env, [
      ['TZ', 'UTC'],
      ['MODEL', 'Qwen/Qwen2.5 3B'],
      ['-p 8081:8081', '1'],
      ['-p 8082:8082/udp', '1'],
    ]);
    assert.deepEqual(parseEnvString('-e A=b=c -h host'), { A: 'b=c' });
  });

  it('maps each requested TCP port to a host port once running, beside its own 22 and 8080', async () => {
    const { json } = await create({ env: { '-p 8000:8000': '1', '-p 7000:7000/udp': '1' } });
    const ports = await waitFor(async () => (await show(json.new_contract)).ports, {
      intervalMs: 20,
      what: 'the instance to be running with its ports',
    });
    assert.deepEqual(Object.keys(ports).sort(), ['22/tcp', '8000/tcp', '8080/tcp']);
    assert.match(ports['8000/tcp'][0].HostPort, /^\d+$/);
  });

  it('refuses what the create document refuses, with 400 invalid_args', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ env: ['A=b'] }, /env must be an object/],
      [{ env: { A: 1 } }, /env A must be a string/],
      [{ env: { A: 'x'.repeat(257) } }, /longer than 256 characters/],
      [{ env: { ['K'.repeat(257)]: 'x' } }, /longer than 256 characters/],
      [{ env: Object.fromEntries(Array.from({ length: 130 }, (_, i) => [`V${i}`, 'x'.repeat(256)])) }, /over 32768/],
      [{ env: { '-p 8000': '1' } }, /is not -p N:N/],
      [
        { env: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`-p ${9000 + i}:${9000 + i}`, '1'])) },
        /65 ports, at most 64/,
      ],
      [{ onstart: 'x'.repeat(4097) }, /onstart and args are 4097 characters, over 4096/],
      [{ onstart: 'x'.repeat(4000), args_str: 'y'.repeat(100) }, /over 4096/],
      [{ onstart: 42 }, /onstart must be a string/],
      [{ disk: 7 }, /under the minimum of 8 GB/],
      [{ disk: 501 }, /more than the 500 GB this machine has free/],
      [{ disk: '32' }, /disk must be a number/],
    ];
    for (const [extra, msg] of cases) {
      const r = await create(extra);
      assert.equal(r.status, 400, JSON.stringify(extra).slice(0, 80));
      assert.equal(r.json.error, 'invalid_args');
      assert.match(r.json.msg, /^error 400\/3467: Invalid args: /);
      assert.match(r.json.msg, msg);
    }
    assert.equal(fake.instances().length, 0);
    assert.equal((await create({ env: { A: 'x'.repeat(256) }, onstart: 'x'.repeat(4096), disk: 500 })).status, 200);
  });

  it('runs onstart as root in the machine with the env, at every container start', async () => {
    const onstart =
      'printf "%s|%s|%s\\n" "$(id -un)" "$GREETING" "${MISSING-unset}" >> "$HOME/onstart.log"; cat "$HOME/onstart.log"';
    const { json } = await create({ env: { GREETING: "hello 'world'", '-p 8000:8000': '1' }, onstart });
    const id = String(json.new_contract);
    await waitFor(async () => (await show(json.new_contract)).actual_status === 'running', {
      intervalMs: 20,
      what: 'the instance to be running',
    });
    assert.equal((await fake.onstartRuns(id)).length, 1);
    fake.restartContainer(id);
    const runs = await fake.onstartRuns(id);
    assert.equal(runs.length, 2);
    const [, second] = runs as { code: number; stdout: string }[];
    assert.equal(second.code, 0);
    assert.match(second.stdout, /^\w+\|hello 'world'\|unset\n\w+\|hello 'world'\|unset\n$/);
  });
});
