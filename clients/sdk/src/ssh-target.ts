import { randomBytes } from 'node:crypto';
import { closeSync, constants, lstatSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { isIPv4, isIPv6 } from 'node:net';
import { join } from 'node:path';
import { configDir } from './config-file.js';

/**
 * A value the service returned that is not safe to hand to `ssh` or to use in a file name.
 * Clients treat the service as untrusted here: a compromised one must not run commands on the
 * caller's machine or choose where files are written.
 */
export class GprUnsafeValueError extends Error {
  override readonly name = 'GprUnsafeValueError';
  readonly code = 'UNSAFE_SERVICE_VALUE';
  constructor(
    /** Which field was refused, e.g. `user` or `deploymentId`. */
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** Where to connect, every field checked by {@link checkedSshTarget}. */
export interface SshTarget {
  deploymentId: string;
  host: string;
  port: number;
  user: string;
}

/** The key file and the known_hosts file of one deployment, under the config directory. */
export interface SshKeyFiles {
  keyFile: string;
  knownHostsFile: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// A POSIX-style login name: it cannot start with '-' (an ssh option) or hold '@', spaces or '%'.
const LOGIN = /^[a-z_][a-z0-9_.-]{0,31}$/i;
const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;
const MAX_KEY_CHARS = 16_384;

/** JSON-quoted and cut short, so a hostile value cannot put control characters on a terminal. */
function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function refuse(field: string, value: unknown, rule: string): never {
  throw new GprUnsafeValueError(
    field,
    `The service returned ${field} ${shown(value)}, which is not ${rule}; refused before reaching ssh or the file system.`,
  );
}

/** A rental or deployment id from the service, which must be a UUID before it names a file. */
export function checkedId(field: string, value: unknown): string {
  if (typeof value !== 'string' || !UUID.test(value)) refuse(field, value, 'a UUID');
  return value.toLowerCase();
}

/** True for a DNS name, an IPv4 address or an IPv6 literal (no zone, no brackets). */
export function isSafeHost(value: string): boolean {
  if (isIPv4(value)) return true;
  // IPv6 zones ("%eth0") are free text to ssh; no service host needs one.
  if (isIPv6(value)) return !value.includes('%');
  if (value.length > 253) return false;
  const labels = value.split('.');
  if (!labels.every((l) => DNS_LABEL.test(l))) return false;
  // "10.1.2" or "1234" would be read as an address by the resolver, not as a name.
  return !/^[0-9]+$/.test(labels[labels.length - 1]);
}

/**
 * Checks the connection fields of a credentials reveal. `expectedDeploymentId` is the id the
 * caller asked about (itself checked); an answer for another deployment is refused.
 */
export function checkedSshTarget(
  c: { deploymentId?: unknown; host?: unknown; port?: unknown; user?: unknown },
  expectedDeploymentId: string,
): SshTarget {
  const deploymentId = checkedId('deploymentId', c.deploymentId);
  if (deploymentId !== checkedId('deploymentId', expectedDeploymentId))
    refuse('deploymentId', c.deploymentId, `the deployment asked for (${expectedDeploymentId})`);
  if (typeof c.user !== 'string' || !LOGIN.test(c.user))
    refuse('user', c.user, 'a login name (letters, digits, "_", ".", "-"; not starting with "-")');
  if (typeof c.host !== 'string' || !isSafeHost(c.host))
    refuse('host', c.host, 'a DNS name, IPv4 address or IPv6 literal');
  if (typeof c.port !== 'number' || !Number.isInteger(c.port) || c.port < 1 || c.port > 65535)
    refuse('port', c.port, 'an integer from 1 to 65535');
  return { deploymentId, host: c.host, port: c.port, user: c.user };
}

/** `<config dir>/keys`, created 0700; refused when it is a symlink or not the caller's own. */
function keysDir(): string {
  const dir = join(configDir(), 'keys');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory() || (typeof process.getuid === 'function' && st.uid !== process.getuid())) {
    throw new Error(`${dir} is not a directory of this user (a symlink?); refusing to write SSH keys there.`);
  }
  return dir;
}

/**
 * Writes the deployment's private key to `<config dir>/keys/<deploymentId>.key` with mode 0600.
 * The file name comes from the checked id only. The key goes to a new file opened with O_EXCL and
 * O_NOFOLLOW, then renamed over the final name, so a symlink planted there is replaced, never
 * followed, and a reader never sees half a key.
 */
export function writeSshKeyFiles(target: SshTarget, privateKey: unknown): SshKeyFiles {
  if (
    typeof privateKey !== 'string' ||
    privateKey.length === 0 ||
    privateKey.length > MAX_KEY_CHARS ||
    privateKey.includes('\0')
  ) {
    throw new GprUnsafeValueError('privateKey', 'The service returned no usable private key; nothing was written.');
  }
  const id = checkedId('deploymentId', target.deploymentId);
  const dir = keysDir();
  const keyFile = join(dir, `${id}.key`);
  const temp = join(dir, `.${id}.${randomBytes(8).toString('hex')}.tmp`);
  const fd = openSync(
    temp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0),
    0o600,
  );
  try {
    try {
      writeSync(fd, privateKey.endsWith('\n') ? privateKey : `${privateKey}\n`);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, keyFile);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
  return { keyFile, knownHostsFile: join(dir, `${id}.known_hosts`) };
}

/**
 * Arguments for OpenSSH: options, then `--`, then `user@host`, so nothing from the service can
 * stand where ssh reads an option. A remote command, if any, goes after these.
 */
export function sshArgs(target: SshTarget, files: SshKeyFiles, opts: { batch?: boolean } = {}): string[] {
  // ssh expands %-tokens in key and known_hosts paths and cannot quote a '"' in an option.
  for (const path of [files.keyFile, files.knownHostsFile]) {
    if (/["%\n]/.test(path))
      throw new Error(
        `The key path ${shown(path)} holds '"', '%' or a line break, which ssh misreads: set XDG_CONFIG_HOME to another directory.`,
      );
  }
  return [
    '-i',
    files.keyFile,
    '-p',
    String(target.port),
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'StrictHostKeyChecking=accept-new',
    // Quoted: ssh reads a space in this option as a second file name.
    '-o',
    `UserKnownHostsFile="${files.knownHostsFile}"`,
    ...(opts.batch ? ['-o', 'BatchMode=yes'] : []),
    '--',
    `${target.user}@${target.host}`,
  ];
}

/** A POSIX shell word: bare when plainly safe, else single-quoted. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./=:@,+-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The same ssh invocation as one shell command line, ready to paste or run with `sh -c`. */
export function sshCommandLine(target: SshTarget, files: SshKeyFiles, opts: { batch?: boolean } = {}): string {
  return ['ssh', ...sshArgs(target, files, opts)].map(shellQuote).join(' ');
}
