import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import runpodPlugin from '../../plugins/runpod/index.js';
import { offerKey } from '../../plugins/runpod/offers.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec } from '../../src/providers/ssh-probe.js';
import { FakeRunpodApi, NO_INSTANCES_DETAIL } from '../fakes/runpod-api.js';
import { testDataSource } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

const H100 = 'NVIDIA H100 80GB HBM3';

/** RunPod's own MCP server (its `runpod-mcp` bin), as published on npm. */
function officialServerPath(): string {
  const pkg = createRequire(import.meta.url).resolve('@runpod/mcp-server/package.json');
  return join(dirname(pkg), 'dist', 'stdio.mjs');
}

interface ToolAnswer {
  isError: boolean;
  payload: Record<string, unknown>;
}

/**
 * The fake checked against code RunPod wrote: `@runpod/mcp-server` (REST v2 through its generated
 * client, `RUNPOD_API_BASE_URL` as the origin) drives its pod tools against the fake over stdio.
 */
describe('RunPod fake vs. the official @runpod/mcp-server', function () {
  this.timeout(60_000);
  let fake: FakeRunpodApi;
  let client: Client;
  let stderr = '';
  const keys = generateDeploymentKeyPair('runpod-mcp');

  async function call(name: string, args: Record<string, unknown>): Promise<ToolAnswer> {
    const res = (await client.callTool({ name, arguments: args })) as {
      isError?: boolean;
      content: { type: string; text: string }[];
    };
    return { isError: !!res.isError, payload: JSON.parse(res.content[0].text) };
  }

  before(async () => {
    fake = await FakeRunpodApi.start({ bootMs: 200, directSshDelayMs: 100 });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [officialServerPath()],
      // Only what the server needs: every RunPod origin it knows points at the fake, and no
      // analytics key, so nothing leaves this machine.
      env: {
        PATH: process.env.PATH ?? '',
        RUNPOD_API_KEY: fake.apiKey,
        RUNPOD_API_BASE_URL: fake.url,
        RUNPOD_SERVERLESS_API_URL: `${fake.url}/serverless`,
        RUNPOD_PUBLIC_GRAPHQL_URL: `${fake.url}/graphql`,
        RUNPOD_AUTHED_GRAPHQL_URL: `${fake.url}/graphql`,
      },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    client = new Client({ name: 'gpu-rental-fake-check', version: '1.0.0' });
    await client.connect(transport);
  });

  after(async () => {
    await client?.close();
    await fake?.close();
  });

  it('serves the pod tools this check drives', async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const t of ['create-pod', 'get-pod', 'list-pods', 'delete-pod', 'list-gpu-types'])
      assert.ok(names.includes(t), `${t} in ${names.join(', ')}`);
  });

  it('reads the GPU catalog with pod availability', async () => {
    const res = await call('list-gpu-types', { include: ['AVAILABILITY'], product: ['POD'], cloud: 'SECURE' });
    assert.equal(res.isError, false, JSON.stringify(res.payload));
    const gpus = res.payload.gpus as { id: string; availability: string; price: { secure: number } }[];
    assert.deepEqual(
      gpus.map((g) => [g.id, g.availability]),
      fake.gpus.map((g) => [g.id, g.availability]),
    );
    const last = fake.calls.at(-1)!;
    assert.deepEqual(
      [
        last.method,
        last.path,
        new URLSearchParams(last.query).get('include'),
        new URLSearchParams(last.query).get('product'),
      ],
      ['GET', '/v2/catalog/gpus', 'AVAILABILITY', 'POD'],
    );
  });

  it('creates, gets, lists and deletes a pod; the pod lets in the key given in env.PUBLIC_KEY', async () => {
    const before = fake.calls.length;
    const created = await call('create-pod', {
      body: {
        name: 'mcp-check',
        image: 'runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04',
        gpu: { id: H100, count: 1 },
        cloud: 'SECURE',
        disk: 20,
        ports: ['22/tcp'],
        env: { PUBLIC_KEY: keys.publicKey },
      },
    });
    assert.equal(created.isError, false, JSON.stringify(created.payload));
    const id = created.payload.id as string;
    assert.deepEqual([created.payload.name, created.payload.status], ['mcp-check', 'PROVISIONING']);

    const got = await call('get-pod', { id });
    assert.equal(got.isError, false, JSON.stringify(got.payload));
    assert.equal(got.payload.id, id);

    const listed = await call('list-pods', {});
    assert.equal(listed.isError, false, JSON.stringify(listed.payload));
    assert.deepEqual(
      (listed.payload.pods as { id: string }[]).map((p) => p.id),
      [id],
    );

    const direct = await waitFor(
      async () => {
        const p = await call('get-pod', { id });
        return (
          (p.payload.ssh as { direct: { host: string; port: number; username: string } | null }).direct ?? undefined
        );
      },
      { timeoutMs: 5000, what: 'ssh.direct through get-pod' },
    );
    const out = await sshExec(
      { host: direct.host, port: direct.port, user: direct.username, privateKey: keys.privateKey },
      'echo in-by-env-key',
    );
    assert.equal(out.stdout, 'in-by-env-key\n');

    const deleted = await call('delete-pod', { id });
    assert.equal(deleted.isError, false, JSON.stringify(deleted.payload));
    assert.deepEqual(deleted.payload, { status: 204 });
    const after = await call('get-pod', { id });
    assert.equal(after.isError, true);
    assert.equal(after.payload.detail, 'pod not found');

    const seen = fake.calls.slice(before).map((c) => `${c.method} ${c.path}`);
    for (const want of ['POST /v2/pods', `GET /v2/pods/${id}`, 'GET /v2/pods', `DELETE /v2/pods/${id}`])
      assert.ok(seen.includes(want), `${want} in ${seen.join(', ')}`);
    assert.ok(
      fake.calls
        .slice(before)
        .every((c) => /^runpod-mcp-server\/4\.0\.0 \(caller=mcp; surface=v2;/.test(c.userAgent ?? '')),
      'every call came from the official server',
    );
    assert.equal(fake.instances().length, 0);
  });

  it('sees the pods our plugin makes as our plugin does, and our plugin sees its deletes', async () => {
    const deps = {
      logger: createLogger('silent'),
      clock: systemClock,
      dataSource: await testDataSource(),
      production: false,
      labelPrefix: 'mcp-',
      drift: IGNORE_DRIFT,
    };
    const provider = await runpodPlugin.create(
      runpodPlugin.validateOptions({ API_KEY: fake.apiKey, API_URL: fake.url }),
      deps,
    );
    const res = await provider.create(
      'mcp-plugin-pod',
      { id: 'o1', key: offerKey('NVIDIA A100 80GB PCIe', 2), name: 'NVIDIA A100 80GB PCIe', gpuCount: 2 },
      keys.publicKey,
    );
    assert.equal(res.kind, 'created');
    const id = (res as { instanceId: string }).instanceId;
    const seen = await call('get-pod', { id });
    assert.equal(seen.isError, false, JSON.stringify(seen.payload));
    assert.deepEqual(
      [seen.payload.name, seen.payload.gpu, seen.payload.ports],
      ['mcp-plugin-pod', { id: 'NVIDIA A100 80GB PCIe', count: 2 }, ['22/tcp']],
    );
    assert.deepEqual(seen.payload.env, { PUBLIC_KEY: keys.publicKey.trim() });
    assert.equal((await call('delete-pod', { id })).isError, false);
    assert.equal((await provider.get(id)).state, 'gone');
    assert.deepEqual(await provider.listInstances(), []);
  });

  it('retries a 429 after the Retry-After the fake sends, as RunPod clients do', async () => {
    const lists = () => fake.calls.filter((c) => c.method === 'GET' && c.path === '/v2/pods').length;
    const before = lists();
    fake.failNext('list', '429');
    const res = await call('list-pods', {});
    assert.equal(res.isError, false, JSON.stringify(res.payload));
    assert.equal(lists(), before + 2);
  });

  it('sees the documented failures as RunPod documents them', async () => {
    const noCount = await call('create-pod', {
      body: { name: 'no-count', image: 'runpod/pytorch', gpu: { id: H100 } },
    });
    assert.equal(noCount.isError, true);
    assert.deepEqual([noCount.payload.status, noCount.payload.detail], [400, NO_INSTANCES_DETAIL]);

    const unknown = await call('create-pod', {
      body: { name: 'bogus', image: 'runpod/pytorch', gpu: { id: H100, count: 1 }, bogus: true },
    });
    assert.equal(unknown.isError, true);
    assert.deepEqual(
      [unknown.payload.status, unknown.payload.errors],
      [422, ["$: additional properties 'bogus' not allowed"]],
    );
    assert.equal(fake.instances().length, 0);
    assert.doesNotMatch(stderr, /Failed to start/);
  });
});
