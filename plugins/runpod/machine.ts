import {
  STARTUP_MARKER_PATH,
  type InstanceInfo,
  type MachineCapabilities,
  type MachineSettings,
} from '../../src/providers/provider.js';
import type { RunpodPod } from './client.js';

/**
 * How many ports a rental may expose through RunPod's HTTP proxy. RunPod documents no ceiling of
 * its own for `ports`; five is what the service offers anywhere.
 */
export const RUNPOD_MAX_PORTS = 5;

/** What every RunPod offer can be given: any image, a startup script, proxied ports, a disk up to the configured ceiling. */
export function runpodMachineCapabilities(maxDiskGb: number): MachineCapabilities {
  return { customImage: true, startupScript: true, ports: RUNPOD_MAX_PORTS, maxDiskGb };
}

/** The variable that carries a pod's boot script to its start command (base64); the plugin's own, never an agent's. */
export const BOOT_VARIABLE = 'GPR_MACHINE_BOOT';

/** Variables the plugin sets on every pod it gives settings to: a rental may not name them. */
export const RESERVED_VARIABLES: readonly string[] = ['PUBLIC_KEY', BOOT_VARIABLE];

/** A variable name the boot script may put into shell text. */
const VARIABLE_NAME = /^[A-Z_][A-Z0-9_]*$/;

/**
 * The start command of a pod with variables or a script (`args`, which RunPod runs instead of the
 * image's CMD). It is the same for every pod: it decodes the pod's boot script from
 * {@link BOOT_VARIABLE} and runs it. The words split the same under any shell-like splitting
 * (one single-quoted argument, no quote inside it), and the decoded text never passes through
 * RunPod's parsing of the command.
 */
export const BOOT_ARGS = `sh -c 'f=$(mktemp) && printf %s $${BOOT_VARIABLE} | base64 -d > $f && exec sh $f'`;

/** Where the boot script finds what the image provides; tests point them at a scratch directory. */
export interface BootPaths {
  /** Read by every login shell (`/etc/profile` sources it). */
  profileDir: string;
  /** RunPod's start script in its images: installs `PUBLIC_KEY`, starts sshd, keeps the container up. */
  imageStart: string;
  /** The SSH daemon, started directly when the image has no start script. */
  sshd: string;
}

export const POD_PATHS: BootPaths = Object.freeze({
  profileDir: '/etc/profile.d',
  imageStart: '/start.sh',
  sshd: '/usr/sbin/sshd',
});

/** `s` as one single-quoted shell word. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * What a pod runs instead of the image's CMD when a rental gives it variables or a script, as the
 * container's user (root in RunPod's images, the user SSH logs in as). RunPod puts variables into
 * the container's processes only: SSH logins start from sshd's clean environment, and RunPod's
 * start script copies only its own `RUNPOD_*` names for them. So the script
 * 1. writes the rental's variables to `~/.gpr/env.sh` (values read from its own environment, never
 *    written into this text) and sources that from `/etc/profile.d` (login shells) and the top of
 *    `~/.bashrc` (commands run over SSH);
 * 2. runs the host's wrapped startup script in the background, once (the wrapper's marker says it
 *    ran), with the rental's variables;
 * 3. hands over to the image's own start (`/start.sh`), which installs `PUBLIC_KEY` and starts
 *    sshd; an image without one gets the key installed and sshd started here, then stays up.
 * The agent's script is the only secret in the text; the boot variable is unset before anything runs.
 */
export function bootScript(
  machine: Pick<MachineSettings, 'env' | 'startupScript'>,
  paths: BootPaths = POD_PATHS,
): string {
  const names = Object.keys(machine.env).sort();
  for (const name of names) {
    if (!VARIABLE_NAME.test(name))
      throw new Error(`variable name ${JSON.stringify(name)} is not of the form [A-Z_][A-Z0-9_]*`);
  }
  const lines = ['#!/bin/sh', 'rm -f "$0"', `unset ${BOOT_VARIABLE}`, 'mkdir -p "$HOME/.gpr"'];
  if (names.length > 0) {
    lines.push(
      'gpr_env="$HOME/.gpr/env.sh"',
      '(',
      '  umask 077',
      `  for gpr_name in ${names.join(' ')}; do`,
      '    eval "gpr_value=\\${$gpr_name-}"',
      `    printf "export %s='" "$gpr_name"`,
      // Each ' closes the quote, adds an escaped one and reopens: the value comes back byte for byte.
      `    printf '%s' "$gpr_value" | sed "s/'/'\\\\\\\\''/g"`,
      `    printf "'\\n"`,
      '  done > "$gpr_env"',
      ')',
      'gpr_hook="[ -r \\"$gpr_env\\" ] && . \\"$gpr_env\\""',
      `if [ -d ${shellQuote(paths.profileDir)} ]; then printf '%s\\n' "$gpr_hook" > ${shellQuote(`${paths.profileDir}/gpr-env.sh`)} || :; fi`,
      'if ! grep -qxF "$gpr_hook" "$HOME/.bashrc" 2>/dev/null; then',
      '  { printf \'%s\\n\' "$gpr_hook"; cat "$HOME/.bashrc" 2>/dev/null; } > "$HOME/.gpr/bashrc" && cat "$HOME/.gpr/bashrc" > "$HOME/.bashrc"',
      '  rm -f "$HOME/.gpr/bashrc"',
      'fi',
    );
  }
  if (machine.startupScript !== null) {
    lines.push(
      `if [ ! -e "$HOME/${STARTUP_MARKER_PATH}" ]; then`,
      `  (umask 077; printf '%s' ${shellQuote(machine.startupScript)} > "$HOME/.gpr/startup-wrapper.sh")`,
      '  (cd "$HOME" && sh "$HOME/.gpr/startup-wrapper.sh"; rm -f "$HOME/.gpr/startup-wrapper.sh") < /dev/null >> "$HOME/.gpr/boot.log" 2>&1 &',
      'fi',
    );
  }
  const start = shellQuote(paths.imageStart);
  const sshd = shellQuote(paths.sshd);
  lines.push(
    `if [ -x ${start} ]; then exec ${start}; fi`,
    'if [ -n "${PUBLIC_KEY-}" ]; then',
    '  mkdir -p "$HOME/.ssh" && chmod 700 "$HOME/.ssh"',
    '  printf \'%s\\n\' "$PUBLIC_KEY" >> "$HOME/.ssh/authorized_keys" && chmod 600 "$HOME/.ssh/authorized_keys"',
    'fi',
    `if [ -x ${sshd} ]; then`,
    '  if command -v ssh-keygen > /dev/null 2>&1; then ssh-keygen -A > /dev/null 2>&1 || :; fi',
    `  mkdir -p /run/sshd 2> /dev/null; ${sshd} || :`,
    'fi',
    'while :; do sleep 3600; done',
    '',
  );
  return lines.join('\n');
}

/** What `POST /v2/pods` carries for a rental's settings, beside the name, GPU and cloud. */
export interface PodMachineFields {
  image: string;
  disk: number;
  ports: string[];
  env: Record<string, string>;
  args?: string;
}

/**
 * The body fields for `machine` (absent: the plugin's defaults, the body as it always was). Ports
 * go out as `<port>/http` (RunPod's HTTP proxy) after `22/tcp`; variables and a script add the
 * boot script and its start command. Our `PUBLIC_KEY` wins over anything of the same name.
 */
export function podMachineFields(
  machine: MachineSettings | undefined,
  defaults: { image: string; diskGb: number },
  publicKey: string,
): PodMachineFields {
  const fields: PodMachineFields = {
    image: machine?.image ?? defaults.image,
    disk: machine?.diskGb ?? defaults.diskGb,
    ports: ['22/tcp', ...(machine?.ports ?? []).map((p) => `${p}/http`)],
    env: { ...machine?.env, PUBLIC_KEY: publicKey },
  };
  if (machine && (Object.keys(machine.env).length > 0 || machine.startupScript !== null)) {
    fields.env[BOOT_VARIABLE] = Buffer.from(bootScript(machine), 'utf8').toString('base64');
    fields.args = BOOT_ARGS;
  }
  return fields;
}

/** Why the plugin cannot send `machine` as it is (a name it reserves or cannot put into shell text), or null. */
export function refusedSettings(machine: MachineSettings | undefined): string | null {
  if (!machine) return null;
  const names = Object.keys(machine.env);
  const reserved = names.filter((n) => RESERVED_VARIABLES.includes(n));
  if (reserved.length) return `the rental's variables name ${reserved.join(', ')}, which the RunPod plugin sets itself`;
  const bad = names.filter((n) => !VARIABLE_NAME.test(n));
  if (bad.length) return `the rental's variables have names that are not of the form [A-Z_][A-Z0-9_]* (${bad.length})`;
  return null;
}

/**
 * The texts that must never reach a log line or a reason: variable values, the script and the
 * boot variable that carries it. Values under three characters are left out: hiding every "1" in
 * a message would garble it, and such a value protects nothing.
 */
export function secretsOf(fields: Pick<PodMachineFields, 'env'>, machine: MachineSettings | undefined): string[] {
  if (!machine) return [];
  const values = [...Object.values(machine.env), machine.startupScript ?? '', fields.env[BOOT_VARIABLE] ?? ''];
  return [...new Set(values.filter((v) => v.length >= 3))].sort((a, b) => b.length - a.length);
}

/** The public URL of each port a pod exposes over HTTP: RunPod's proxy, by pod id and port. */
export function podEndpoints(pod: Pick<RunpodPod, 'id' | 'ports'>): NonNullable<InstanceInfo['endpoints']> {
  const ports = Array.isArray(pod.ports) ? pod.ports : [];
  return ports
    .map((p) => (typeof p === 'string' ? /^(\d+)\/http$/.exec(p) : null))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ port: Number(m[1]), url: `https://${pod.id}-${m[1]}.proxy.runpod.net` }));
}

/**
 * What a pod that is not running yet is doing, as far as its status says. RunPod places a pod at
 * create (the answer already names its data center) and then fetches the image while the status
 * stays `PROVISIONING`; `STARTING` is the container starting. A `PROVISIONING` pod without a data
 * center has not been placed: the API says nothing about what it does.
 */
export function podStartupPhase(pod: Pick<RunpodPod, 'status' | 'dataCenterId'>): InstanceInfo['startupPhase'] {
  if (pod.status === 'PROVISIONING') return pod.dataCenterId ? 'pulling_image' : undefined;
  if (pod.status === 'STARTING') return 'booting';
  return undefined;
}
