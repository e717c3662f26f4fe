import { readFileSync } from 'node:fs';
import { ENV_NAME_PATTERN, type MachineSettings, parseDuration } from '@gpu-rental/sdk';
import { keepSecret, UsageError } from './output.js';

/** `gpr rent`'s machine, lease and capacity flags as commander hands them over. */
export interface MachineFlags {
  image?: string;
  env?: string[];
  envFrom?: string;
  script?: string;
  port?: string[];
  disk?: string;
  ttl?: string;
  waitCapacity?: string;
}

/** Commander's collector for a repeatable option: every value, in order. */
export const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** Seconds of a duration flag (`2h`, `90m`, `3600s`, `1h30m`, bare seconds); a usage error otherwise. */
export function durationFlag(flag: string, value: string): number {
  const seconds = parseDuration(value);
  if (seconds === undefined || seconds <= 0) {
    throw new UsageError(
      `${flag} must be a duration such as 2h, 90m, 1h30m or 3600s (a bare number is seconds), got ${JSON.stringify(value)}.`,
    );
  }
  return seconds;
}

/** A variable name, or a usage error that does not repeat it: a bad "name" may be a secret typed in the wrong place. */
function checkedName(name: string, where: string): string {
  if (!ENV_NAME_PATTERN.test(name)) {
    throw new UsageError(
      `${where}: the text before "=" is not a variable name (upper-case letters, digits and _, not starting with a digit); it is not shown, as it may hold a secret.`,
    );
  }
  return name;
}

/**
 * `--env NAME=VALUE`, or `--env NAME` to pass this shell's $NAME without writing the value on the
 * command line. Error messages name the variable, never its value: the value may be a secret, and
 * an argument without `=` may be a value typed by mistake, so it is not repeated either.
 */
function envFlag(arg: string, n: number): [string, string] {
  const eq = arg.indexOf('=');
  const where = `--env (the ${ordinal(n)})`;
  if (eq === -1) {
    if (!ENV_NAME_PATTERN.test(arg))
      throw new UsageError(
        `${where} must be NAME=VALUE, or NAME to pass this shell's $NAME; the argument is not shown, as it may hold a secret.`,
      );
    const value = process.env[arg];
    if (value === undefined)
      throw new UsageError(`${where}: $${arg} is not set in this shell; give --env ${arg}=VALUE or set it first.`);
    return [arg, value];
  }
  return [checkedName(arg.slice(0, eq), where), arg.slice(eq + 1)];
}

function ordinal(n: number): string {
  const tail = n % 100 >= 11 && n % 100 <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${tail}`;
}

/**
 * An env file: `NAME=VALUE` lines, blank lines and `#` comments skipped, an `export ` prefix
 * allowed, one pair of quotes around the value removed, nothing expanded. A bad line is named by
 * its number only: its text may hold a secret.
 */
export function readEnvFile(path: string): [string, string][] {
  const text = readFlagFile('--env-from', path);
  const pairs: [string, string][] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const m = /^(?:export\s+)?([^=\s]+)\s*=\s*(.*)$/.exec(line);
    const where = `--env-from ${path} line ${i + 1}`;
    if (!m) throw new UsageError(`${where} is not NAME=VALUE (the line is not shown: it may hold a secret).`);
    const quoted = /^(["'])([\s\S]*)\1$/.exec(m[2]);
    pairs.push([checkedName(m[1], where), quoted ? quoted[2] : m[2]]);
  });
  return pairs;
}

function readFlagFile(flag: string, path: string): string {
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new UsageError(`Cannot read ${flag} ${path} (${code}): give the path of a readable file.`);
  }
}

function portFlag(value: string): number {
  const port = /^\d{1,5}$/.test(value.trim()) ? Number(value) : NaN;
  if (!(port >= 1 && port <= 65535))
    throw new UsageError(`--port must be a TCP port number from 1 to 65535, got ${JSON.stringify(value)}.`);
  return port;
}

/**
 * The request fields of the flags: `machine` (only the settings given), `terminateAfterSeconds`
 * and `waitForCapacitySeconds`. Every variable value and the script are registered as secrets, so
 * nothing gpr prints can carry them. `--env` wins over `--env-from` for the same name.
 */
export function machineRequest(o: MachineFlags): {
  machine?: MachineSettings;
  terminateAfterSeconds?: number;
  waitForCapacitySeconds?: number;
} {
  const machine: MachineSettings = {};
  if (o.image !== undefined) {
    if (o.image.trim() === '')
      throw new UsageError('--image must name a container image, e.g. pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime.');
    machine.image = o.image;
  }
  if (o.envFrom !== undefined || o.env?.length) {
    const env: Record<string, string> = {};
    for (const [name, value] of o.envFrom === undefined ? [] : readEnvFile(o.envFrom)) env[name] = value;
    (o.env ?? []).forEach((arg, i) => {
      const [name, value] = envFlag(arg, i + 1);
      env[name] = value;
    });
    for (const value of Object.values(env)) keepSecret(value);
    machine.env = env;
  }
  if (o.script !== undefined) {
    const script = readFlagFile('--script', o.script);
    if (script.trim() === '')
      throw new UsageError(`--script ${o.script} is empty: give a file holding the script, or leave out --script.`);
    keepSecret(script);
    machine.startupScript = script;
  }
  if (o.port?.length) machine.ports = o.port.map(portFlag);
  if (o.disk !== undefined) {
    const disk = /^\d{1,7}$/.test(o.disk.trim()) ? Number(o.disk) : 0;
    if (disk < 1)
      throw new UsageError(`--disk must be a whole number of GB, at least 1, got ${JSON.stringify(o.disk)}.`);
    machine.diskGb = disk;
  }
  return {
    ...(Object.keys(machine).length ? { machine } : {}),
    ...(o.ttl === undefined ? {} : { terminateAfterSeconds: durationFlag('--ttl', o.ttl) }),
    ...(o.waitCapacity === undefined
      ? {}
      : { waitForCapacitySeconds: durationFlag('--wait-capacity', o.waitCapacity) }),
  };
}
