import { NodeSSH } from 'node-ssh';

// What the fake Vast does with a create's machine fields (`image`, `disk`, `env`, `onstart`,
// `args`): the checks and limits of the create document (its `x-input-validation`: env entries
// up to 256 characters and 32,768 in all, `onstart` with `args` up to 4,096, disk at least 8 GB),
// the object form of `env` that Vast's CLI sends (`{"NAME": "value", "-p 8000:8000": "1"}`) and
// the documented docker-flag string (`"-e NAME=value -p 8000:8000"`), and running `onstart` in the
// container as root with the env, as Vast's entrypoint does at every container start.

export const ENV_ENTRY_MAX = 256;
export const ENV_TOTAL_MAX = 32_768;
export const ARGS_MAX = 4_096;
/** Vast's documented ceiling of open ports per instance. */
export const PORTS_MAX = 64;

type Refusal = { status: number; body: Record<string, unknown> };

const invalid = (askId: number, msg: string): Refusal => ({
  status: 400,
  body: { success: false, error: 'invalid_args', msg: `error 400/3467: Invalid args: ${msg}`, ask_id: askId },
});
const chars = (s: string) => [...s].length;
const PORT_KEY = /^-p (\d{1,5}):(\d{1,5})(\/(tcp|udp))?$/;

/** The documented docker-flag form read as Vast's CLI reads it: `-e NAME=value` and `-p A:B`, quotes around a value dropped. */
export function parseEnvString(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  const words = s.match(/(?:[^\s"']+|"[^"]*"|'[^']*')+/g) ?? [];
  for (let i = 0; i + 1 < words.length; i += 2) {
    const [flag, arg] = [words[i], words[i + 1]];
    if (flag === '-p' && /^[0-9:tcpud/]+$/.test(arg)) out[`-p ${arg}`] = '1';
    else if (flag === '-e' && arg.includes('='))
      out[arg.slice(0, arg.indexOf('='))] = arg.slice(arg.indexOf('=') + 1).replace(/^['"]|['"]$/g, '');
  }
  return out;
}

/**
 * The refusal for a create whose machine fields break the documented rules, or null. Like many
 * validators it quotes what it refuses, so tests see that the plugin never passes Vast's words on
 * when the request carried secrets.
 */
export function refuseMachineFields(askId: number, b: Record<string, unknown>, diskSpace: number): Refusal | null {
  if (b.disk !== undefined && (typeof b.disk !== 'number' || !Number.isFinite(b.disk)))
    return invalid(askId, `disk must be a number`);
  if (typeof b.disk === 'number' && b.disk < 8) return invalid(askId, `disk ${b.disk} is under the minimum of 8 GB`);
  if (typeof b.disk === 'number' && b.disk > diskSpace)
    return invalid(askId, `disk ${b.disk} GB is more than the ${diskSpace} GB this machine has free`);
  if (b.env !== undefined && b.env !== null) {
    const env = typeof b.env === 'string' ? parseEnvString(b.env) : b.env;
    if (typeof env !== 'object' || Array.isArray(env)) return invalid(askId, 'env must be an object of strings');
    let total = 0;
    let ports = 0;
    for (const [k, v] of Object.entries(env as Record<string, unknown>)) {
      if (typeof v !== 'string') return invalid(askId, `env ${k} must be a string`);
      if (chars(k) > ENV_ENTRY_MAX || chars(v) > ENV_ENTRY_MAX)
        return invalid(
          askId,
          `env entry ${k.slice(0, 40)}=${v.slice(0, 40)} is longer than ${ENV_ENTRY_MAX} characters`,
        );
      total += chars(k) + chars(v);
      if (k.startsWith('-p')) {
        const m = PORT_KEY.exec(k);
        if (!m || Number(m[1]) < 1 || Number(m[1]) > 65_535 || Number(m[2]) < 1 || Number(m[2]) > 65_535)
          return invalid(askId, `env port mapping ${k} is not -p N:N`);
        ports++;
      }
    }
    if (total > ENV_TOTAL_MAX) return invalid(askId, `env is ${total} characters, over ${ENV_TOTAL_MAX}`);
    if (ports > PORTS_MAX) return invalid(askId, `${ports} ports, at most ${PORTS_MAX} per instance`);
  }
  for (const k of ['onstart', 'args_str'] as const)
    if (b[k] !== undefined && b[k] !== null && typeof b[k] !== 'string') return invalid(askId, `${k} must be a string`);
  if (
    b.args !== undefined &&
    b.args !== null &&
    (!Array.isArray(b.args) || !b.args.every((a) => typeof a === 'string'))
  )
    return invalid(askId, 'args must be an array of strings');
  const args = [b.onstart, b.args_str, ...(Array.isArray(b.args) ? b.args : [])].filter(
    (a): a is string => typeof a === 'string',
  );
  const argsLength = args.reduce((n, a) => n + chars(a), 0);
  if (argsLength > ARGS_MAX) return invalid(askId, `onstart and args are ${argsLength} characters, over ${ARGS_MAX}`);
  return null;
}

/** The env a create asked for, as an object (either documented form), or {} without one. */
export function envOf(b: Record<string, unknown>): Record<string, string> {
  if (typeof b.env === 'string') return parseEnvString(b.env);
  return b.env && typeof b.env === 'object' ? { ...(b.env as Record<string, string>) } : {};
}

/** The TCP ports a create's env opens (container side of `-p A:B`). */
export function portsOf(env: Record<string, string>): number[] {
  return Object.keys(env)
    .map((k) => PORT_KEY.exec(k))
    .filter((m): m is RegExpExecArray => m !== null && m[4] !== 'udp')
    .map((m) => Number(m[2]));
}

/** One run of an instance's `onstart`, as the fake saw it end. */
export interface OnstartRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Runs `onstart` in the machine as root with the create's variables in its environment (the
 * container's, which SSH sessions do not inherit). Vast's own agent runs it inside the container;
 * the fake gets in with the machine's first key, which stands for the host's own access and is
 * never given out. The variables and the script travel on standard input, not in a command line.
 */
export async function runOnstart(
  at: { host: string; port: number },
  privateKey: string,
  env: Record<string, string>,
  onstart: string,
): Promise<OnstartRun> {
  const ssh = new NodeSSH();
  await ssh.connect({
    host: at.host,
    port: at.port,
    username: 'root',
    privateKey,
    readyTimeout: 5000,
    tryKeyboard: false,
    hostVerifier: () => true,
  });
  ssh.connection?.on('error', () => undefined);
  try {
    // Docker passes every name; a shell can hold only plain ones (port mappings are not variables).
    const exports = Object.entries(env)
      .filter(([k]) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(k))
      .map(([k, v]) => `${k}=${shellQuote(v)}\nexport ${k}\n`)
      .join('');
    await ssh.execCommand('umask 077; mkdir -p "$HOME/.vast-container" && cat > "$HOME/.vast-container/env"', {
      stdin: exports,
    });
    await ssh.execCommand('cat > "$HOME/.vast-container/onstart.sh"', { stdin: onstart });
    const r = await ssh.execCommand(
      '. "$HOME/.vast-container/env"; sh "$HOME/.vast-container/onstart.sh" < /dev/null',
      { noTrim: true },
    );
    return { code: r.code, stdout: r.stdout, stderr: r.stderr };
  } finally {
    ssh.dispose();
  }
}
