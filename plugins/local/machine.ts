import { spawn } from 'node:child_process';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../src/logger.js';
import type { InstanceInfo, MachineSettings } from '../../src/providers/provider.js';
import { hasMachineNamespaces, liveHolder, machineCommand, startHolder } from './machine-namespaces.js';
import { PortForwards, relayArgv, type PortRoute } from './port-forward.js';
import {
  removeSandbox,
  sandboxShellCommand,
  sessionEnv,
  type SandboxCommand,
  type SandboxOwner,
  type ShellIsolation,
} from './sandbox.js';

/**
 * What the local "cloud" keeps about a machine beside its instance row, from create on: what
 * runs on it. Held in a directory of the service's next to the machine's home (see
 * {@link machineStateDir}), never in the home, which the renter may rearrange.
 */
export interface MachineRecord {
  /** The image asked for; null: {@link DEFAULT_LOCAL_IMAGE}. */
  image: string | null;
  env: Record<string, string>;
  startupScript: string | null;
  ports: number[];
  diskGb: number | null;
  /** GPUs the machine really has, which `nvidia-smi` lists: the offer's count unless the inventory says otherwise. */
  gpuCount: number;
}

/** The image a machine "runs" when the rental chose none. There is no container runtime: the name is recorded, nothing is pulled. */
export const DEFAULT_LOCAL_IMAGE = 'gpu-rental/local-default:latest';

/** The record of `settings` on a machine of `gpuCount` GPUs whose disk is `diskGb` GB unless the settings choose. */
export function machineRecord(settings: MachineSettings, gpuCount: number, diskGb: number | null): MachineRecord {
  return {
    image: settings.image,
    env: { ...settings.env },
    startupScript: settings.startupScript,
    ports: [...new Set(settings.ports)],
    diskGb: settings.diskGb ?? diskGb,
    gpuCount,
  };
}

/** The service's own directory of a machine: its record, its namespaces' holder, its host ports. */
export function machineStateDir(sandboxDir: string): string {
  return `${sandboxDir}.machine`;
}

const recordFile = (sandboxDir: string) => join(machineStateDir(sandboxDir), 'machine.json');
const portsFile = (sandboxDir: string) => join(machineStateDir(sandboxDir), 'ports.json');

async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  await writeFile(tmp, text, { mode: 0o600 });
  await rename(tmp, path);
}

/** Records a new machine, before its instance row exists (the variables and script are the agent's secrets: readable by the service only). */
export async function writeMachineRecord(sandboxDir: string, rec: MachineRecord): Promise<void> {
  await mkdir(machineStateDir(sandboxDir), { recursive: true, mode: 0o700 });
  await writeAtomically(recordFile(sandboxDir), JSON.stringify(rec));
}

/** The machine's record; null for an instance recorded before machines had settings. */
export async function readMachineRecord(sandboxDir: string): Promise<MachineRecord | null> {
  const text = await readFile(recordFile(sandboxDir), 'utf8').catch(() => null);
  return text === null ? null : (JSON.parse(text) as MachineRecord);
}

/** The host port of each exposed port (port number to host port), as its serving process last opened them. */
export async function readHostPorts(sandboxDir: string): Promise<Record<string, number>> {
  const text = await readFile(portsFile(sandboxDir), 'utf8').catch(() => null);
  return text === null ? {} : (JSON.parse(text) as Record<string, number>);
}

/** Removes the machine's state directory. */
export async function removeMachineState(sandboxDir: string): Promise<void> {
  await removeSandbox(machineStateDir(sandboxDir));
}

/** The machine's endpoints once every exposed port has its host port; undefined for a machine that exposes none. */
export function endpointsOf(rec: MachineRecord, hostPorts: Record<string, number>): InstanceInfo['endpoints'] {
  if (rec.ports.length === 0 || !rec.ports.every((p) => hostPorts[String(p)])) return undefined;
  return rec.ports.map((port) => ({ port, url: `http://127.0.0.1:${hostPorts[String(port)]}` }));
}

const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

// What sshd sets for a login whatever the environment says; a rental's variable of these names is not applied.
const SESSION_NAMES = new Set(['HOME', 'USER', 'LOGNAME', 'SHELL', 'PWD']);

/**
 * The machine's files in its home's `etc/`, as an image and a cloud would leave them: `machine`
 * (image, disk, GPUs, ports; `key=value` lines) and `environment` (the variables every session and
 * the startup script get, sourced by {@link SESSION}: `GPR_IMAGE`, `GPR_DISK_GB`, then the rental's).
 * A rental's `PATH` keeps the home's `bin/` first, where `nvidia-smi` is.
 */
export function machineEtc(rec: MachineRecord, home: string): Record<string, string> {
  const image = rec.image ?? DEFAULT_LOCAL_IMAGE;
  const vars: [string, string][] = [['GPR_IMAGE', image]];
  if (rec.diskGb !== null) vars.push(['GPR_DISK_GB', String(rec.diskGb)]);
  for (const [name, value] of Object.entries(rec.env)) {
    if (SESSION_NAMES.has(name)) continue;
    vars.push([name, name === 'PATH' ? `${join(home, 'bin')}:${value}` : value]);
  }
  return {
    machine: [
      `image=${image}`,
      `disk_gb=${rec.diskGb ?? ''}`,
      `gpus=${rec.gpuCount}`,
      `ports=${rec.ports.join(',')}`,
      '',
    ].join('\n'),
    environment: [
      "# The machine's environment, read by every session and by the startup script.",
      ...vars.map(([n, v]) => `${n}=${sq(v)}`),
      '',
    ].join('\n'),
  };
}

// Runs as the renter, first in every session and the startup script: exports the machine's
// environment, then runs the shell asked for. A renter who breaks the file breaks only its own logins.
const SESSION = `if [ -f "$HOME/etc/environment" ]; then set -a; . "$HOME/etc/environment"; set +a; fi
exec /bin/sh "$@"`;

export interface MachineRuntimeOptions {
  instanceId: string;
  sandboxDir: string;
  owner: SandboxOwner | undefined;
  isolation: ShellIsolation;
  record: MachineRecord;
  /** The login name sessions run under. */
  user: string;
  logger: Logger;
  /** Asked for every forwarded connection (see `PortForwards`). */
  isAlive(): Promise<boolean>;
  onDead(): void;
}

/**
 * A machine as the one process serving it runs it: its namespaces (kept by a holder process that
 * outlives a provider's `close()`, so a restarted provider in the same process finds the machine's
 * processes still there), its port forwards, and its startup script, run once in the machine's life.
 */
export class MachineRuntime {
  private holderStart: Promise<number> | null = null;
  private forwards: PortForwards | null = null;
  private readonly log: Logger;

  constructor(private readonly opts: MachineRuntimeOptions) {
    this.log = opts.logger.child({ instanceId: opts.instanceId });
  }

  /** Brings the machine up: its namespaces, its port forwards, and (the first time ever) its startup script. */
  async boot(): Promise<void> {
    const { isolation, record, sandboxDir } = this.opts;
    // An instance recorded before machines had settings has no state directory yet.
    await mkdir(machineStateDir(sandboxDir), { recursive: true, mode: 0o700 });
    if (hasMachineNamespaces(isolation)) await this.holder();
    if (record.ports.length > 0) {
      this.forwards = new PortForwards({
        instanceId: this.opts.instanceId,
        ports: record.ports,
        route: (port) => this.route(port),
        isAlive: this.opts.isAlive,
        onDead: this.opts.onDead,
        logger: this.opts.logger,
      });
      const hostPorts = await this.forwards.open(await readHostPorts(sandboxDir));
      await writeAtomically(portsFile(sandboxDir), JSON.stringify(hostPorts));
    }
    if (record.startupScript !== null && (await this.claimStartup())) await this.runStartup(record.startupScript);
  }

  /** What runs `/bin/sh shArgs` as the renter in the machine, with the machine's environment. */
  async shell(shArgs: string[]): Promise<SandboxCommand> {
    const argv = ['-c', SESSION, 'session', ...shArgs];
    const { isolation, instanceId, sandboxDir, owner } = this.opts;
    if (!hasMachineNamespaces(isolation)) return sandboxShellCommand(isolation, sandboxDir, owner, argv);
    return machineCommand(isolation, await this.holder(), instanceId, sandboxDir, owner, ['/bin/sh', ...argv]);
  }

  /** Stops the port forwards; the machine itself runs on (see {@link stopMachine} to end it). */
  async close(): Promise<void> {
    await this.forwards?.close();
  }

  private async route(port: number): Promise<PortRoute> {
    const { isolation, instanceId, sandboxDir, owner } = this.opts;
    if (isolation.mode === 'none') return { kind: 'direct' };
    if (!hasMachineNamespaces(isolation))
      throw new Error('util-linux `nsenter` was not found: ports cannot reach machines');
    return {
      kind: 'relay',
      command: machineCommand(isolation, await this.holder(), instanceId, sandboxDir, owner, relayArgv(port)),
    };
  }

  /** The pid of the machine's holder, starting one when there is none (first boot, or the last one died). */
  private async holder(): Promise<number> {
    const stateDir = machineStateDir(this.opts.sandboxDir);
    const live = await liveHolder(stateDir);
    if (live !== null) return live;
    if (!this.holderStart) {
      const { isolation } = this.opts;
      if (!hasMachineNamespaces(isolation)) throw new Error('local provider: this host cannot keep machine namespaces');
      this.holderStart = startHolder(isolation, this.opts.instanceId, this.opts.sandboxDir, stateDir).finally(
        () => (this.holderStart = null),
      );
    }
    return this.holderStart;
  }

  /** True for the one caller ever allowed to run the startup script; a restart never runs it again. */
  private async claimStartup(): Promise<boolean> {
    try {
      await writeFile(join(machineStateDir(this.opts.sandboxDir), 'startup-started'), new Date().toISOString(), {
        flag: 'wx',
        mode: 0o600,
      });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    }
  }

  /** Runs the script with `/bin/sh` as the renter, in the background of the machine, fed on stdin (never on a command line other users can read). */
  private async runStartup(script: string): Promise<void> {
    const { sandboxDir, user } = this.opts;
    const cmd = await this.shell(['-s']);
    const child = spawn(cmd.file, cmd.args, {
      cwd: sandboxDir,
      env: sessionEnv(sandboxDir, user),
      ...(cmd.uid !== undefined ? { uid: cmd.uid, gid: cmd.gid } : {}),
      // Not the SSH server's to kill: the script belongs to the machine and outlives the provider.
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    child.on('error', (err) => this.log.warn({ err: err.message }, 'local instance startup script could not start'));
    child.on('exit', (code, signal) => this.log.info({ code, signal }, 'local instance startup script exited'));
    child.stdin.on('error', () => undefined);
    child.stdin.end(script);
    child.unref();
    this.log.info('local instance startup script started');
  }
}
