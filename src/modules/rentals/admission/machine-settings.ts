import { createHash } from 'node:crypto';
import {
  ENV_NAME_PATTERN,
  MAX_ENV_TOTAL_BYTES,
  MAX_ENV_VALUE_BYTES,
  MAX_ENV_VARIABLES,
  MAX_STARTUP_SCRIPT_BYTES,
} from '../../../vocabulary/limits.js';
import { AppError } from '../../../errors/app-error.js';
import {
  DEFAULT_MACHINE_SETTINGS,
  type MachineCapabilities,
  type MachineSettings,
} from '../../../providers/provider.js';
import { needsOf, unmetNeeds } from '../../inventory/offer-candidates.js';
import { describeRentalLength } from '../../keys/rental-length.js';
import { scriptSha256 } from '../store/machine-secrets.js';
import type { MachineSettingsRequest } from '../wire/machine-settings.dto.js';

// The rules of a rental's machine settings and of its lease, as plain functions: no database,
// so each rule is decided once and tested without one. Admission parses the request with these,
// checks each candidate offer's capabilities and fixes the lease before anything is written.
// The request reaches them checked against its schema (docs/architecture.md, Requests): names,
// types and declared bounds are the validator's; these are the rules no schema states.

/** What the operator allows of any machine (MACHINE_IMAGE_ALLOWLIST, MACHINE_MAX_DISK_GB). */
export interface MachinePolicy {
  /** Glob patterns (`*` = any run of characters) an image must match; empty: any image. */
  imageAllowlist: string[];
  maxDiskGb: number;
}

/** SSH's port, which every machine already serves; exposing it over HTTP would shadow it. */
const SSH_PORT = 22;

const ENV_NAME = ENV_NAME_PATTERN;

/**
 * Names the machine itself needs: the login's own (a changed HOME or PATH would move the startup
 * marker or hide nvidia-smi from the checks before ACTIVE), the key a cloud image installs at
 * boot, and the GPR_ prefix plugins use for their own boot plumbing.
 */
const RESERVED_ENV_NAMES = new Set(['HOME', 'PATH', 'USER', 'LOGNAME', 'SHELL', 'PWD', 'PUBLIC_KEY']);
const isReservedEnvName = (name: string) => RESERVED_ENV_NAMES.has(name) || name.startsWith('GPR_');
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

// A container image reference as registries read it: [domain[:port]/]path[:tag][@digest], path
// components lower-case. Nothing else (spaces, quotes, `$`, `;`) can pass, so no cloud's command
// line or template can be broken out of through it.
const DOMAIN_PART = '(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])';
const DOMAIN = `${DOMAIN_PART}(?:\\.${DOMAIN_PART})*(?::[0-9]+)?`;
const PATH_PART = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const NAME = `(?:${DOMAIN}/)?${PATH_PART}(?:/${PATH_PART})*`;
const TAG = '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const IMAGE_REFERENCE = new RegExp(`^(${NAME})(?::${TAG})?(?:@${DIGEST})?$`);
/** Registries refuse longer repository names. */
const MAX_IMAGE_NAME_CHARS = 255;

function invalid(setting: string, problem: string): AppError {
  return new AppError('VALIDATION_FAILED', `Invalid request: ${setting}: ${problem}`);
}

function utf8Bytes(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** `*` stands for any run of characters (slashes too); everything else is itself. */
function globMatches(pattern: string, value: string): boolean {
  const source = pattern
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${source}$`).test(value);
}

/**
 * A request's `machine`, as its schema admits it, as the settings a provider receives; refuses,
 * naming the setting, what cannot be honoured anywhere.
 */
export function parseMachineSettings(req: MachineSettingsRequest | undefined, policy: MachinePolicy): MachineSettings {
  if (req === undefined) return { ...DEFAULT_MACHINE_SETTINGS, env: {}, ports: [] };
  return {
    image: parseImage(req.image, policy.imageAllowlist),
    env: parseEnv(req.env),
    startupScript: parseScript(req.startupScript),
    ports: parsePorts(req.ports),
    diskGb: parseDisk(req.diskGb, policy.maxDiskGb),
  };
}

function parseImage(image: string | undefined, allowlist: readonly string[]): string | null {
  if (image === undefined) return null;
  const match = IMAGE_REFERENCE.exec(image);
  if (!match || match[1].length > MAX_IMAGE_NAME_CHARS) {
    throw invalid(
      'machine.image',
      `${JSON.stringify(image.length > 80 ? `${image.slice(0, 80)}…` : image)} is not a container image reference; write it as registry/path:tag or path@sha256:<digest> ` +
        '(lower-case path, no spaces or shell characters), e.g. "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime", or leave out machine.image for the default image.',
    );
  }
  if (allowlist.length > 0 && !allowlist.some((pattern) => globMatches(pattern, image))) {
    throw invalid(
      'machine.image',
      `this service runs only images matching ${allowlist.map((p) => JSON.stringify(p)).join(', ')} (* = anything); use one of them, or leave out machine.image for the default image.`,
    );
  }
  return image;
}

function parseEnv(env: Record<string, string> | undefined): Record<string, string> {
  if (env === undefined) return {};
  const entries = Object.entries(env);
  if (entries.length > MAX_ENV_VARIABLES) {
    throw invalid(
      'machine.env',
      `${entries.length} variables; at most ${MAX_ENV_VARIABLES}. Put the rest in a file the startup script writes or fetches.`,
    );
  }
  let total = 0;
  const out: Record<string, string> = {};
  for (const [name, value] of entries) {
    // Control characters are escaped, so the message stays one readable line.
    const shown = JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}…` : name).slice(1, -1);
    const setting = `machine.env.${shown}`;
    if (!ENV_NAME.test(name)) {
      throw invalid(
        setting,
        `variable names are upper-case letters, digits and _, not starting with a digit (e.g. ${suggestedName(name)}); rename it.`,
      );
    }
    if (isReservedEnvName(name)) {
      throw invalid(
        setting,
        `${name} is set by the machine itself (reserved: ${[...RESERVED_ENV_NAMES].join(', ')} and names starting GPR_); choose another name.`,
      );
    }
    // Never quote the value back: it is the agent's secret.
    if (value.includes('\0'))
      throw invalid(setting, 'contains a NUL character, which no environment variable can hold; remove it.');
    if (LONE_SURROGATE.test(value))
      throw invalid(
        setting,
        'is not valid UTF-8 text (it holds a lone surrogate); send the value as UTF-8 text, or base64-encode binary data.',
      );
    const bytes = utf8Bytes(value);
    if (bytes > MAX_ENV_VALUE_BYTES) {
      throw invalid(
        setting,
        `the value is ${bytes} bytes (UTF-8); at most ${MAX_ENV_VALUE_BYTES}. Put longer data in a file the startup script writes or fetches.`,
      );
    }
    total += utf8Bytes(name) + bytes;
    out[name] = value;
  }
  if (total > MAX_ENV_TOTAL_BYTES) {
    throw invalid(
      'machine.env',
      `names and values are ${total} bytes in all (UTF-8); at most ${MAX_ENV_TOTAL_BYTES}. Put the larger values in a file the startup script writes or fetches.`,
    );
  }
  return out;
}

/** What a malformed name would look like as a valid one, for the message's example. */
function suggestedName(name: string): string {
  const upper = name.toUpperCase().replace(/[^A-Z0-9_]/g, '_');
  const valid = /^[0-9]/.test(upper) ? `_${upper}` : upper;
  return ENV_NAME.test(valid) && valid.length <= 40 ? valid : 'MY_VARIABLE';
}

function parseScript(script: string | undefined): string | null {
  if (script === undefined) return null;
  if (script.trim() === '')
    throw invalid(
      'machine.startupScript',
      'is empty; send the script, or leave out machine.startupScript to run none.',
    );
  if (LONE_SURROGATE.test(script))
    throw invalid(
      'machine.startupScript',
      'is not valid UTF-8 text (it holds a lone surrogate); send the script as UTF-8 text.',
    );
  const bytes = utf8Bytes(script);
  if (bytes > MAX_STARTUP_SCRIPT_BYTES) {
    throw invalid(
      'machine.startupScript',
      `is ${bytes} bytes (UTF-8); at most ${MAX_STARTUP_SCRIPT_BYTES}. Have a shorter script download and run the rest.`,
    );
  }
  return script;
}

function parsePorts(ports: readonly number[] | undefined): number[] {
  if (ports === undefined) return [];
  const seen = new Set<number>();
  for (const port of ports) {
    if (port === SSH_PORT)
      throw invalid(
        'machine.ports',
        `${SSH_PORT} is SSH's port, reachable already through the rental's ssh details; leave it out.`,
      );
    if (seen.has(port)) throw invalid('machine.ports', `${port} is listed twice; list each port once.`);
    seen.add(port);
  }
  // One order for equal sets, so the stored settings and the idempotency value agree.
  return [...seen].sort((a, b) => a - b);
}

function parseDisk(diskGb: number | undefined, maxDiskGb: number): number | null {
  if (diskGb === undefined) return null;
  if (diskGb > maxDiskGb)
    throw invalid('machine.diskGb', `${diskGb} GB is more than this service allows; ask for at most ${maxDiskGb}.`);
  return diskGb;
}

/** SHA-256 of a canonical JSON (keys sorted), in hex. */
function canonicalSha256(value: Record<string, string>): string {
  const sorted = Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, value[k]]),
  );
  return createHash('sha256').update(JSON.stringify(sorted), 'utf8').digest('hex');
}

/**
 * What the idempotency record hashes of the settings: equal settings give equal values whatever
 * their key order; any change of image, a variable's name or value, the script, ports or disk
 * changes it. The secrets enter only as hashes.
 */
export function machineIntentValue(s: MachineSettings): Record<string, unknown> {
  return {
    image: s.image,
    envSha256: Object.keys(s.env).length > 0 ? canonicalSha256(s.env) : null,
    startupScriptSha256: s.startupScript === null ? null : scriptSha256(s.startupScript),
    ports: [...s.ports].sort((a, b) => a - b),
    diskGb: s.diskGb,
  };
}

/** How messages name an offer: its GPU name and provider, e.g. `"NVIDIA H100" (lambda)`. */
export function offerLabel(name: string, provider: string): string {
  return `${JSON.stringify(name)} (${provider})`;
}

/**
 * The first setting of `s` the offer cannot honour (by the one capability rule, `unmetNeeds`), as
 * a message naming it (`offerName` as {@link offerLabel} writes it), or null when it can honour
 * them all. Variables never count: every provider sets them.
 */
export function unmetSetting(s: MachineSettings, caps: MachineCapabilities, offerName: string): string | null {
  const offer = `offer ${offerName}`;
  switch (unmetNeeds(caps, needsOf(s))[0]) {
    case undefined:
      return null;
    case 'customImage':
      return `machine.image: ${offer} cannot run a custom image; rent an offer whose capabilities.customImage is true, or leave out machine.image for its default image.`;
    case 'startupScript':
      return `machine.startupScript: ${offer} cannot run a startup script; rent an offer whose capabilities.startupScript is true, or run the script over SSH once the rental is ACTIVE.`;
    case 'ports': {
      const can =
        caps.ports === 0
          ? 'cannot expose ports'
          : `exposes at most ${caps.ports} port${caps.ports === 1 ? '' : 's'}, not ${s.ports.length}`;
      return `machine.ports: ${offer} ${can}; rent an offer whose capabilities.ports is at least ${s.ports.length}, or reach the ports through an SSH tunnel.`;
    }
    case 'diskGb': {
      const can =
        caps.maxDiskGb === null
          ? 'cannot choose its disk'
          : `offers at most ${caps.maxDiskGb} GB of disk, not ${s.diskGb}`;
      return `machine.diskGb: ${offer} ${can}; rent an offer whose capabilities.maxDiskGb is at least ${s.diskGb}, or leave out machine.diskGb for its default disk.`;
    }
  }
}

/**
 * The lease in force: how long after it starts the rental is terminated. The rental's own
 * `terminateAfterSeconds` (whole seconds within its schema's bounds) is refused (never shortened)
 * when the offer or the key cannot grant it; without it the key's longest rental (within the
 * offer's maximum) applies; null: no lease.
 */
export function leaseSeconds(args: {
  terminateAfterSeconds: number | null;
  keyMaxRentalSeconds: number | null;
  offerMaximumDurationSeconds: number;
}): number | null {
  const { terminateAfterSeconds: asked, keyMaxRentalSeconds: keyMax, offerMaximumDurationSeconds: offerMax } = args;
  if (asked === null) return keyMax === null ? null : Math.min(keyMax, offerMax);
  // The tighter of the two limits is the one worth naming.
  const keyBinds = keyMax !== null && asked > keyMax && keyMax <= offerMax;
  if (!keyBinds && asked > offerMax) {
    throw invalid(
      'terminateAfterSeconds',
      `${asked} is longer than this offer's maximum duration of ${offerMax} seconds (${describeRentalLength(offerMax)}); send at most ${offerMax}, or rent an offer that runs longer.`,
    );
  }
  if (keyMax !== null && asked > keyMax) {
    throw invalid(
      'terminateAfterSeconds',
      `${asked} is longer than this key allows: its rentals last at most ${keyMax} seconds (${describeRentalLength(keyMax)}); send at most ${keyMax}, or ask the key's owner for a longer maximum.`,
    );
  }
  return asked;
}
