import type { MachineCapabilities, MachineSettings } from '../../src/providers/provider.js';

/**
 * What a Lambda offer's machine can be given. Lambda runs its own machine image (no container
 * image of ours), sizes the disk by instance type, and opens ports only through firewall rulesets,
 * which are account objects outside any one rental: so only the startup script (and `env`, which
 * every provider honours) travels, through cloud-init `user_data`.
 */
export const LAMBDA_MACHINE_CAPABILITIES: MachineCapabilities = Object.freeze({
  customImage: false,
  startupScript: true,
  ports: 0,
  maxDiskGb: null,
});

/** Where the rental's variables live: every login shell reads `/etc/profile.d/*.sh`. */
export const LAMBDA_ENV_FILE = '/etc/profile.d/gpr-env.sh';

/**
 * Lambda's ceiling on `user_data` ("cannot exceed 1MB", plain text), read as the smaller megabyte
 * so that either reading of the document holds.
 */
export const MAX_USER_DATA_BYTES = 1_000_000;

/** Names a POSIX shell can export; the host checks the same pattern, the shell text depends on it. */
const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

/** What the SSH user's ~/.bashrc gets as its first line, so non-login SSH commands have the variables too. */
const BASHRC_LINE = `[ -r ${LAMBDA_ENV_FILE} ] && . ${LAMBDA_ENV_FILE}`;

const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

/** `value` as one single-quoted shell word: nothing inside single quotes is special but the quote itself. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** The profile file that exports the rental's variables, as sh and bash read it. */
export function envFileText(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([name, value]) => `export ${name}=${shellQuote(value)}\n`)
    .join('');
}

/**
 * Why `machine` cannot go into `user_data`, naming the variable but never a value; null when it can.
 * The host checks names and sizes first; these are the conditions the shell text itself relies on.
 */
export function userDataProblem(machine: MachineSettings): string | null {
  for (const [name, value] of Object.entries(machine.env)) {
    if (!ENV_NAME.test(name))
      return `environment variable name ${JSON.stringify(name.slice(0, 64))} is not a shell name`;
    // A process environment cannot carry a NUL byte: the value would be cut short without a word.
    if (value.includes('\0')) return `environment variable ${name} holds a NUL character`;
  }
  if (machine.startupScript?.includes('\0')) return 'the startup script holds a NUL character';
  return null;
}

/**
 * The cloud-init `user_data` for `machine`, or null when it asks for nothing Lambda must be told
 * (the launch then carries no `user_data`, exactly as before settings existed).
 *
 * cloud-init runs a `#!` user-data script once per instance, as root, late in the first boot.
 * The script writes the variables to {@link LAMBDA_ENV_FILE}, readable by root and the `ubuntu`
 * group only (the values are the agent's secrets), so every login shell of `ubuntu` (an SSH login,
 * `su -`) exports them, and makes the user's ~/.bashrc read it first, so a command given to `ssh`
 * (bash without a login shell) has them too. It then runs the host's wrapped startup script as
 * `ubuntu` in a login shell that has read the same file, so the script sees the same environment;
 * the wrapper records its start and puts the agent's script in the background, so cloud-init is
 * not held up. Values and the script travel base64-encoded: no byte of them is ever read as shell
 * syntax here.
 */
export function lambdaUserData(machine: MachineSettings, sshUser: string): string | null {
  const names = Object.keys(machine.env);
  if (names.length === 0 && machine.startupScript === null) return null;
  const lines = [
    '#!/bin/sh',
    "# The rental's machine settings, run once by cloud-init at first boot.",
    'set -eu',
    'umask 077',
  ];
  if (names.length > 0) {
    lines.push(
      `echo '${base64(envFileText(machine.env))}' | base64 -d > ${LAMBDA_ENV_FILE}`,
      `chown root:"$(id -gn ${sshUser})" ${LAMBDA_ENV_FILE}`,
      `chmod 640 ${LAMBDA_ENV_FILE}`,
      // \`ssh host cmd\` starts no login shell, but Ubuntu's bash reads ~/.bashrc for it, and
      // the image's .bashrc stops early for non-interactive shells: the line goes first.
      `rc="$(getent passwd ${sshUser} | cut -d: -f6)/.bashrc"`,
      `if [ -s "$rc" ]; then sed -i '1i ${BASHRC_LINE}' "$rc"; else echo '${BASHRC_LINE}' > "$rc"; chown ${sshUser}: "$rc"; fi`,
    );
  }
  if (machine.startupScript !== null) {
    const load = names.length > 0 ? `. ${LAMBDA_ENV_FILE}; ` : '';
    lines.push(
      'script=$(mktemp)',
      `trap 'rm -f "$script"' EXIT`,
      `echo '${base64(machine.startupScript)}' | base64 -d > "$script"`,
      `chown ${sshUser} "$script"`,
      // mktemp's name is letters and digits under /tmp, so it may sit inside the quoted command.
      `su - ${sshUser} -c "${load}sh $script"`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** A run of base64 long enough to be a piece of an encoded value rather than a word. */
const ENCODED_RUN = /[A-Za-z0-9+/=]{16,}/g;

/**
 * `text` (Lambda's message or suggestion about a launch that carried `user_data`) without anything of the
 * machine's secrets: Lambda only ever saw them base64-encoded inside `user_data`, so any long run
 * of base64 is cut out, and the values themselves too should a message ever hold them decoded.
 * Values shorter than four characters are left: they would blank out ordinary words.
 */
export function withoutSecrets(text: string, machine: MachineSettings): string {
  let out = text.replace(ENCODED_RUN, '[…]');
  const secrets = [...Object.values(machine.env), machine.startupScript ?? '']
    .filter((s) => s.length >= 4)
    .sort((a, b) => b.length - a.length);
  for (const s of secrets) out = out.replaceAll(s, '[secret]');
  return out;
}
