import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { NodeSSH } from 'node-ssh';
import { defaultInventory } from '../../plugins/local/default-inventory.js';
import { parseInventory, type LocalInventoryOffer } from '../../plugins/local/inventory.js';
import type { LocalProvider } from '../../plugins/local/local-provider.js';
import { DEFAULT_LOCAL_IMAGE } from '../../plugins/local/machine.js';
import { sandboxDirFor } from '../../plugins/local/sandbox.js';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { wrapStartupScript } from '../../src/modules/rentals/store/machine-secrets.js';
import {
  DEFAULT_MACHINE_SETTINGS,
  STARTUP_MARKER_PATH,
  type InstanceInfo,
  type MachineSettings,
} from '../../src/providers/provider.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import { sshExec, type SshTarget } from '../../src/providers/ssh-probe.js';
import { waitFor } from '../helpers/wait.js';
import { makeLocalHarness, TEST_OFFERS, type LocalHarness } from './local-harness.js';
import { waitForRunning } from './provider-contract.js';

const common = {
  category: 'datacenter',
  cpuCores: 8,
  memoryGb: 32,
  storageGb: 100,
  pricePerHourMinor: 100,
  maximumDurationSeconds: 86400,
  provisionSeconds: 0,
};

const OFFERS: LocalInventoryOffer[] = [
  ...TEST_OFFERS,
  { ...common, key: 'short', name: 'NVIDIA A100 80GB', vramGb: 80, gpuCount: 4, actualGpuCount: 3 },
  { ...common, key: 'no-gpu', name: 'NVIDIA L4', vramGb: 24, gpuCount: 1, actualGpuCount: 0 },
  { ...common, key: 'slow', name: 'NVIDIA L4', vramGb: 24, gpuCount: 1, provisionSeconds: 10 },
  {
    ...common,
    key: 'plain',
    name: 'NVIDIA L4',
    vramGb: 24,
    gpuCount: 1,
    storageGb: null,
    capabilities: { customImage: false, startupScript: false, ports: 0, maxDiskGb: null },
  },
  {
    ...common,
    key: 'no-storage',
    name: 'NVIDIA L4',
    vramGb: 24,
    gpuCount: 1,
    storageGb: null,
    capabilities: { ports: 2 },
  },
];

const settings = (m: Partial<MachineSettings>): MachineSettings => ({ ...DEFAULT_MACHINE_SETTINGS, ...m });

/** A shell line that serves `text` (after the machine's GREETING) over HTTP on the machine's `port`. */
const serve = (port: number, text: string) =>
  `${process.execPath} -e "require('http').createServer((q, r) => r.end(process.env.GREETING + ' ${text}')).listen(${port}, '127.0.0.1')"`;

/** What an HTTP GET of `url` answers, or the error code of a connection that failed. */
async function get(url: string): Promise<{ status: number; body: string } | { error: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    return { error: cause?.code ?? (err as Error).message };
  }
}

async function answered(url: string): Promise<string> {
  return waitFor(
    async () => {
      const r = await get(url);
      return 'status' in r && r.status === 200 ? r.body : undefined;
    },
    // A node server inside the machine may take seconds to start on a loaded machine.
    { what: `${url} to answer` },
  );
}

/** Command lines of every process on the host. */
function commandLines(): string[] {
  const lines: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      lines.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '));
    } catch {
      // The process ended while we looked.
    }
  }
  return lines;
}

describe('local machines: image, environment, startup script, ports, disk, GPUs', () => {
  let h: LocalHarness;
  const keys = generateDeploymentKeyPair('local-machine');

  beforeEach(async () => {
    h = await makeLocalHarness({ offers: OFFERS });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  async function start(offerKey: string, machine: MachineSettings, provider: LocalProvider = h.provider) {
    const label = h.label();
    const res = await provider.create(label, h.offer(offerKey), keys.publicKey, machine);
    assert.equal(res.kind, 'created');
    const instanceId = (res as { instanceId: string }).instanceId;
    const info = await waitForRunning(provider, instanceId, 3000);
    const target: SshTarget = { ...info.ssh, privateKey: keys.privateKey };
    return { label, instanceId, info, target };
  }

  async function run(target: SshTarget, command: string): Promise<string> {
    const r = await sshExec(target, command);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  }

  describe('offers', () => {
    it('declare what local machines honour, with the disk up to the offer storage unless the inventory says otherwise', async () => {
      const offers = new Map((await h.provider.listOffers()).map((o) => [o.key, o]));
      assert.deepEqual(offers.get('h100-1x')?.capabilities, {
        customImage: true,
        startupScript: true,
        ports: 5,
        maxDiskGb: 100,
      });
      assert.deepEqual(offers.get('plain')?.capabilities, {
        customImage: false,
        startupScript: false,
        ports: 0,
        maxDiskGb: null,
      });
      assert.deepEqual(offers.get('no-storage')?.capabilities, {
        customImage: true,
        startupScript: true,
        ports: 2,
        maxDiskGb: 200,
      });
      assert.equal(offers.get('short')?.gpuCount, 4, 'the offer still promises its count');
      for (const o of defaultInventory.offers)
        assert.equal(parseInventory({ offers: [o] }, 'built-in').offers.length, 1);
    });

    it('refuses capabilities and GPU counts it cannot read, naming the offer and field', () => {
      const base = TEST_OFFERS[0];
      const bad = (o: object) => () => parseInventory({ offers: [{ ...base, ...o }] }, 'inv.json');
      assert.throws(bad({ capabilities: { port: 2 } }), /offers\[0\] capabilities: unknown field "port"/);
      assert.throws(
        bad({ capabilities: { ports: -1 } }),
        /offers\[0\] capabilities: "ports" must be a non-negative integer/,
      );
      assert.throws(bad({ capabilities: { customImage: 'yes' } }), /"customImage" must be true or false/);
      assert.throws(bad({ capabilities: { maxDiskGb: 0 } }), /"maxDiskGb" must be a positive integer or null/);
      assert.throws(bad({ capabilities: [] }), /offers\[0\] capabilities: must be an object/);
      assert.throws(bad({ actualGpuCount: 1.5 }), /offers\[0\].*"actualGpuCount" must be a non-negative integer/);
    });
  });

  describe('environment and image', () => {
    it('puts every variable into SSH sessions, login shells included, with the image and disk recorded in the machine', async () => {
      const env = {
        GREETING: 'hello world',
        QUOTES: `it's "quoted" $HOME \`id\` \\n`,
        MULTI: 'line one\nline two',
        UNICODE: 'ünïcødé ✓',
        PATH: '/opt/tool/bin:/usr/bin:/bin',
        HOME: '/not/the/home',
      };
      const { target, instanceId } = await start(
        'instant',
        settings({ env, image: 'pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime', diskGb: 80 }),
      );
      const dir = sandboxDirFor(instanceId);
      const out = await run(
        target,
        `printf '%s|' "$GREETING" "$QUOTES" "$MULTI" "$UNICODE" "$HOME" "$GPR_IMAGE" "$GPR_DISK_GB" "$PATH" "$(command -v nvidia-smi)"`,
      );
      assert.equal(
        out,
        [
          env.GREETING,
          env.QUOTES,
          env.MULTI,
          env.UNICODE,
          dir,
          'pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime',
          '80',
          `${dir}/bin:/opt/tool/bin:/usr/bin:/bin`,
          `${dir}/bin/nvidia-smi`,
          '',
        ].join('|'),
      );
      assert.equal(await run(target, `sh -l -c 'printf %s "$GREETING"'`), 'hello world');
      assert.equal(
        await run(target, 'cat etc/machine'),
        'image=pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime\ndisk_gb=80\ngpus=1\nports=\n',
      );

      const ssh = new NodeSSH();
      await ssh.connect({ host: target.host, port: target.port, username: target.user, privateKey: keys.privateKey });
      ssh.connection?.on('error', () => undefined);
      try {
        const shell = await ssh.requestShell(false);
        let seen = '';
        shell.on('data', (d: Buffer) => (seen += d.toString()));
        await new Promise<void>((resolve) => {
          shell.on('close', () => resolve());
          shell.end('echo "$GREETING/$UNICODE"; exit\n');
        });
        assert.equal(seen, 'hello world/ünïcødé ✓\n');
      } finally {
        ssh.dispose();
      }
    });

    it('records the default image and the offer storage as the disk when the rental chose neither', async () => {
      const { target } = await start('instant', DEFAULT_MACHINE_SETTINGS);
      assert.equal(
        await run(target, 'echo "$GPR_IMAGE $GPR_DISK_GB"; cat etc/machine'),
        `${DEFAULT_LOCAL_IMAGE} 100\nimage=${DEFAULT_LOCAL_IMAGE}\ndisk_gb=100\ngpus=1\nports=\n`,
      );
    });
  });

  describe('startup script', () => {
    it('runs once after boot as the machine user with the environment, and never again when the provider restarts', async () => {
      const script = wrapStartupScript(
        [
          'echo "$GREETING" > "$HOME/seen"',
          'id -u > "$HOME/uid"',
          'echo ran >> "$HOME/runs"',
          serve(8080, 'from the script'),
          '',
        ].join('\n'),
      );
      const first = await h.newProvider();
      const { target, instanceId, info } = await start(
        'instant',
        settings({ env: { GREETING: 'hi' }, startupScript: script, ports: [8080] }),
        first,
      );
      const url = info.endpoints?.[0]?.url ?? '';
      assert.equal(await answered(url), 'hi from the script');
      assert.equal(
        await run(target, `cat seen runs; test -s ${STARTUP_MARKER_PATH} && echo marked`),
        'hi\nran\nmarked\n',
      );
      assert.equal(await run(target, 'cat uid'), await run(target, 'id -u'));

      await first.close();
      const logged: string[] = [];
      const second = await h.newProvider({
        logger: createLogger('info', { write: (l: string) => void logged.push(l) }),
      });
      const back = await waitForRunning(second, instanceId, 3000);
      assert.deepEqual(back.endpoints, info.endpoints, 'the machine keeps its addresses');
      assert.equal(await answered(url), 'hi from the script', 'the machine kept running through the restart');
      // The restarted provider says it serves the machine once it has brought it up, startup script decided.
      await waitFor(() => logged.some((l) => l.includes('ssh server listening') && l.includes(instanceId)), {
        what: 'the restarted provider to serve the machine',
      });
      assert.ok(!logged.some((l) => l.includes('startup script started')), 'the script was not started again');
      assert.equal(await run({ ...back.ssh, privateKey: keys.privateKey }, 'cat runs'), 'ran\n');
    });

    it('runs a script that is not wrapped as it is, with /bin/sh', async () => {
      const { target } = await start(
        'instant',
        settings({ env: { WHO: 'agent' }, startupScript: 'echo "raw $WHO $0" > "$HOME/raw"\n' }),
      );
      assert.equal(
        await waitFor(async () => (await sshExec(target, 'cat raw')).stdout || undefined, {
          timeoutMs: 5000,
          what: 'the script',
        }),
        'raw agent /bin/sh\n',
      );
    });
  });

  describe('ports', () => {
    it('answers each endpoint from whatever the machine serves on its port, from the script or a session, until destroy', async () => {
      const marker = `gpr-test-${Date.now()}`;
      const script = wrapStartupScript(`${serve(8080, marker)}\n`);
      const { target, instanceId, info } = await start(
        'instant',
        settings({ env: { GREETING: 'hello' }, startupScript: script, ports: [8080, 9090] }),
      );
      const endpoints = info.endpoints ?? [];
      assert.deepEqual(
        endpoints.map((e) => e.port),
        [8080, 9090],
      );
      for (const e of endpoints) assert.match(e.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.notEqual(endpoints[0].url, endpoints[1].url);
      assert.equal(await answered(endpoints[0].url), `hello ${marker}`);

      const idle = await get(endpoints[1].url);
      assert.ok('status' in idle && idle.status === 502, JSON.stringify(idle));
      assert.match((idle as { body: string }).body, /nothing is listening on port 9090/);
      // A server a session starts shares the machine's loopback with the script's and the forwards.
      await run(target, `setsid ${serve(9090, 'from a session')} </dev/null >/dev/null 2>&1 &`);
      assert.equal(await answered(endpoints[1].url), 'hello from a session');
      assert.equal(
        await run(
          target,
          `${process.execPath} -e "fetch('http://127.0.0.1:8080').then((r) => r.text()).then((t) => process.stdout.write(t))"`,
        ),
        `hello ${marker}`,
      );
      assert.ok(commandLines().some((l) => l.includes(marker)));

      await h.provider.destroy(instanceId);
      for (const e of endpoints) assert.equal(((await get(e.url)) as { error?: string }).error, 'ECONNREFUSED');
      assert.ok(!commandLines().some((l) => l.includes(marker)), 'the machine processes are gone');
      assert.equal((await h.provider.get(instanceId)).endpoints, undefined);
    });

    it('keeps two machines serving the same port apart', async () => {
      const machine = (text: string) =>
        settings({
          env: { GREETING: text },
          startupScript: wrapStartupScript(`${serve(8080, 'on 8080')}\n`),
          ports: [8080],
        });
      const a = await start('instant', machine('first'));
      const b = await start('instant', machine('second'));
      assert.equal(await answered(a.info.endpoints?.[0]?.url ?? ''), 'first on 8080');
      assert.equal(await answered(b.info.endpoints?.[0]?.url ?? ''), 'second on 8080');
    });

    it('moves an endpoint to a new host port when a restarted provider finds its old one taken', async () => {
      const first = await h.newProvider();
      const { instanceId, info } = await start('instant', settings({ ports: [8080] }), first);
      const old = new URL(info.endpoints?.[0]?.url ?? '');
      await first.close();
      const squatter = createServer((s) => s.end('squatter'));
      await new Promise<void>((resolve) => squatter.listen(Number(old.port), '127.0.0.1', resolve));
      try {
        const second = await h.newProvider();
        const back = await waitForRunning(second, instanceId, 3000);
        const url = back.endpoints?.[0]?.url ?? '';
        assert.notEqual(url, old.href.replace(/\/$/, ''));
        const r = await get(url);
        assert.ok('status' in r && r.status === 502, JSON.stringify(r));
      } finally {
        squatter.close();
      }
    });

    it('shows no endpoints for a machine that exposes no port, nor before it runs', async () => {
      const { info } = await start('instant', DEFAULT_MACHINE_SETTINGS);
      assert.equal(info.endpoints, undefined);
      const res = await h.provider.create(h.label(), h.offer('slow'), keys.publicKey, settings({ ports: [8080] }));
      const pending = await h.provider.get((res as { instanceId: string }).instanceId);
      assert.equal(pending.state, 'pending');
      assert.equal(pending.endpoints, undefined);
    });
  });

  describe('GPUs', () => {
    it('lists the GPUs the machine really has, fewer than its offer promised when the inventory says so', async () => {
      const { target } = await start('short', DEFAULT_MACHINE_SETTINGS);
      const lines = (await run(target, 'nvidia-smi -L')).trim().split('\n');
      assert.equal(lines.length, 3);
      assert.match(lines[2], /^GPU 2: NVIDIA A100 80GB /);
      assert.equal(await run(target, 'nvidia-smi --query-gpu=count --format=csv,noheader'), '3\n3\n3\n');
    });

    it('answers as the real tool does on a machine with no GPU it can see', async () => {
      const { target } = await start('no-gpu', DEFAULT_MACHINE_SETTINGS);
      const r = await sshExec(target, 'nvidia-smi -L');
      assert.deepEqual([r.code, r.stdout], [6, 'No devices were found\n']);
    });
  });

  describe('startup phase', () => {
    it('says pulling_image for the first half of provisioning a custom image, then booting, then nothing once running', async () => {
      const clock = new ManualClock(new Date('2030-01-01T00:00:00.000Z'));
      const p = await h.newProvider({ clock });
      const phase = async (id: string): Promise<InstanceInfo['startupPhase']> => (await p.get(id)).startupPhase;
      const custom = (await p.create(
        h.label(),
        h.offer('slow'),
        keys.publicKey,
        settings({ image: 'ubuntu:22.04' }),
      )) as { instanceId: string };
      const plain = (await p.create(h.label(), h.offer('slow'), keys.publicKey, DEFAULT_MACHINE_SETTINGS)) as {
        instanceId: string;
      };
      assert.equal(await phase(custom.instanceId), 'pulling_image');
      assert.equal(await phase(plain.instanceId), 'booting');
      clock.advance(5000);
      assert.equal(await phase(custom.instanceId), 'booting');
      clock.advance(5000);
      const running = await p.get(custom.instanceId);
      assert.equal(running.state, 'running');
      assert.equal(running.startupPhase, undefined);
    });
  });
});
