import type {
  CreateResult,
  InstanceInfo,
  MachineCapabilities,
  MachineSettings,
  TrafficCounters,
} from '../../src/providers/provider.js';

// A rental's machine settings on Vast. The create body's `env` is a JSON object of names to values
// (Vast's CLI sends it so, and instance reads give it back as `extra_env` pairs); a port to expose
// is the key `-p N:N` with the value "1". Vast puts these variables into the container, where only
// the `onstart` script sees them: its SSH sessions start without them. Vast refuses an env entry
// over 256 characters, an env over 32,768 in all and an `onstart` over 4,096, while a rental may
// carry values of 4,096 bytes and a script of 16,384. So variables that fit go under their own
// names, and everything else (longer values, the variable names, the startup script) travels as
// one setup text cut into numbered variables (`_GPR_SETUP_0`, `_GPR_SETUP_1`, ...). The `onstart`
// is a fixed program ({@link VAST_ONSTART}) that joins them, writes the variables where SSH logins
// read them, and runs the startup script once. Vast runs `onstart` as root, which is the SSH user
// of every Vast instance, so the script runs as the machine's SSH user with the rental's variables.

/** The fields of a Vast instance (show-instance, a v1 list item) that say how its machine is set up. */
export interface VastMachineView {
  actual_status?: string | null;
  status_msg?: string | null;
  public_ipaddr?: string | null;
  ports?: Record<string, { HostIp?: string; HostPort?: string }[] | null> | null;
  /** The create's `env` as Vast keeps it: `[name, value]` pairs. */
  extra_env?: unknown;
  /** Cumulative billed traffic the machine sent / received, in {@link VAST_BILLED_UNIT_BYTES} units. */
  inet_up_billed?: unknown;
  inet_down_billed?: unknown;
}

/** Vast refuses longer env keys and values. */
export const VAST_ENV_ENTRY_MAX = 256;
/** Vast refuses an env whose keys and values together are longer. */
export const VAST_ENV_TOTAL_MAX = 32_768;
/** Vast refuses an `onstart` (with `args`) longer than this. */
export const VAST_ONSTART_MAX = 4_096;
/** Vast opens at most 64 ports per instance; a rental asks for at most this many. */
export const VAST_MAX_PORTS = 5;
/** The numbered variables that carry the setup text. */
export const VAST_SETUP_PREFIX = '_GPR_SETUP_';

const NAME = /^[A-Z_][A-Z0-9_]*$/;
/** Lengths in code points, so a character outside the BMP counts once, as in Vast's limits. */
const length = (s: string): number => [...s].length;

/** What every offer's machine can be given on Vast; the disk up to the ask's free space and the disk its price covers. */
export function vastMachineCapabilities(o: { disk_space?: number | null }, pricedDiskGb: number): MachineCapabilities {
  const disk = typeof o.disk_space === 'number' && Number.isFinite(o.disk_space) ? Math.floor(o.disk_space) : null;
  // The offer's price covers `pricedDiskGb` of storage; a larger disk would add Vast storage charges nobody pays for.
  const max = disk === null ? null : Math.min(disk, pricedDiskGb);
  return {
    customImage: true,
    startupScript: true,
    ports: VAST_MAX_PORTS,
    maxDiskGb: max !== null && max >= 8 ? max : null,
  };
}

/**
 * Reads the variables the setup text defines back into the environment of SSH logins
 * (`~/.gpr/env.sh`, sourced from `~/.profile` and from bash's own start files when present; and
 * `/etc/environment`, which Vast's images read for every SSH session, for values on one line)
 * and runs the startup script once: Vast runs `onstart` again at every container start. The
 * system file is written only when this runs as the machine's own root (`HOME` is `/root`).
 * Nothing it prints quotes a value.
 */
export const VAST_ONSTART = `#!/bin/sh
# gpu-rental: the rental's variables for SSH logins, then its startup script once
: "\${HOME:=/root}"; export HOME
umask 077
gpr_d="$HOME/.gpr"; mkdir -p "$gpr_d" || exit 1
gpr_i=0; : > "$gpr_d/vast-setup.sh"
while eval "[ -n \\"\\\${${VAST_SETUP_PREFIX}$gpr_i+x}\\" ]"; do
  eval "printf '%s' \\"\\$${VAST_SETUP_PREFIX}$gpr_i\\"" >> "$gpr_d/vast-setup.sh"
  unset "${VAST_SETUP_PREFIX}$gpr_i"
  gpr_i=$((gpr_i + 1))
done
gpr_names=; gpr_script=
. "$gpr_d/vast-setup.sh"
rm -f "$gpr_d/vast-setup.sh"
gpr_nl='
'
: > "$gpr_d/env.sh"
for gpr_n in $gpr_names; do
  eval "gpr_v=\\\${$gpr_n-}"
  { printf "export %s='" "$gpr_n"; printf '%s' "$gpr_v" | sed "s/'/'\\\\\\\\''/g"; printf "'\\n"; } >> "$gpr_d/env.sh"
  export "$gpr_n"
done
gpr_line='[ -r "$HOME/.gpr/env.sh" ] && . "$HOME/.gpr/env.sh"'
for gpr_f in "$HOME/.profile" "$HOME/.bash_profile" "$HOME/.bash_login" "$HOME/.bashrc"; do
  [ "$gpr_f" = "$HOME/.profile" ] || [ -f "$gpr_f" ] || continue
  grep -qxF "$gpr_line" "$gpr_f" 2>/dev/null || printf '%s\\n' "$gpr_line" >> "$gpr_f"
done
if [ "$HOME" = /root ] && [ -n "$gpr_names" ]; then
  { grep -v -E "^($(printf '%s' "$gpr_names" | tr ' ' '|'))=" /etc/environment 2>/dev/null
    for gpr_n in $gpr_names; do
      eval "gpr_v=\\\${$gpr_n-}"
      case $gpr_v in *"$gpr_nl"*) ;; *) printf '%s="%s"\\n' "$gpr_n" "$gpr_v" ;; esac
    done; } > "$gpr_d/environment" && cat "$gpr_d/environment" > /etc/environment
  rm -f "$gpr_d/environment"
fi
if [ -n "$gpr_script" ] && [ ! -e "$gpr_d/vast-startup-ran" ]; then
  : > "$gpr_d/vast-startup-ran"
  printf '%s' "$gpr_script" > "$gpr_d/vast-startup.sh"
  gpr_script=
  (cd "$HOME" && sh "$gpr_d/vast-startup.sh") < /dev/null > /dev/null 2>&1
  rm -f "$gpr_d/vast-startup.sh"
fi
`;

/** Which of a create's fields came from the rental, for naming what to fix when Vast refuses it. */
export interface VastSentSettings {
  image: boolean;
  disk: boolean;
  ports: boolean;
  /** Variables or a startup script were sent: Vast's own words about the request are not quoted. */
  secrets: boolean;
}

/** The create body's fields for a rental's machine, and what of them the rental chose. */
export interface VastMachineFields {
  image: string;
  disk: number;
  env?: Record<string, string>;
  onstart?: string;
  sent: VastSentSettings;
}

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** `text` cut into pieces of at most `size` characters, never inside a character. */
function pieces(text: string, size: number): string[] {
  const chars = [...text];
  const out: string[] = [];
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out;
}

/**
 * The body fields for `machine` (image and disk default to the plugin's options), or the reason
 * the rental cannot be carried by Vast's limits (nothing is sent then). Reasons name sizes and
 * variable names, never a value.
 */
export function vastMachineFields(
  machine: MachineSettings,
  defaults: { image: string; diskGb: number },
): VastMachineFields | Extract<CreateResult, { kind: 'rejected' }> {
  const refuse = (why: string) => ({
    kind: 'rejected' as const,
    reason: `vast cannot carry the rental's machine settings: ${why}; nothing was sent`,
    errorClass: 'request' as const,
  });
  const names = Object.keys(machine.env);
  const script = machine.startupScript;
  const sent: VastSentSettings = {
    image: machine.image !== null,
    disk: machine.diskGb !== null,
    ports: machine.ports.length > 0,
    secrets: names.length > 0 || script !== null,
  };
  const fields: VastMachineFields = {
    image: machine.image ?? defaults.image,
    disk: machine.diskGb ?? defaults.diskGb,
    sent,
  };
  if (machine.ports.length > VAST_MAX_PORTS)
    return refuse(`${machine.ports.length} ports asked, at most ${VAST_MAX_PORTS}`);
  for (const p of machine.ports)
    if (!Number.isSafeInteger(p) || p < 1 || p > 65_535) return refuse(`port ${p} is not a TCP port`);
  for (const n of names) {
    // The names reach a root shell on the machine; only plain variable names may.
    if (!NAME.test(n)) return refuse(`variable name ${JSON.stringify(n.slice(0, 64))} is not a shell variable name`);
    if (n.startsWith(VAST_SETUP_PREFIX)) return refuse(`variable name ${n} is reserved by this plugin`);
    if (length(n) > VAST_ENV_ENTRY_MAX)
      return refuse(`variable name ${n.slice(0, 64)}... is longer than Vast's ${VAST_ENV_ENTRY_MAX} characters`);
  }
  if (!sent.secrets && !sent.ports) return fields;
  const env: Record<string, string> = {};
  const setup: string[] = [];
  if (names.length) setup.push(`gpr_names=${shellQuote(names.join(' '))}`);
  for (const n of names) {
    const v = machine.env[n];
    if (length(v) <= VAST_ENV_ENTRY_MAX) env[n] = v;
    else setup.push(`${n}=${shellQuote(v)}`, `export ${n}`);
  }
  for (const p of machine.ports) env[`-p ${p}:${p}`] = '1';
  if (script !== null) setup.push(`gpr_script=${shellQuote(script)}`);
  if (setup.length)
    pieces(`${setup.join('\n')}\n`, VAST_ENV_ENTRY_MAX).forEach(
      (piece, i) => (env[`${VAST_SETUP_PREFIX}${i}`] = piece),
    );
  const total = Object.entries(env).reduce((sum, [k, v]) => sum + length(k) + length(v), 0);
  if (total > VAST_ENV_TOTAL_MAX) {
    return refuse(
      `its variables, startup script and ports take ${total} characters of Vast's env, over its limit of ${VAST_ENV_TOTAL_MAX}`,
    );
  }
  fields.env = env;
  if (sent.secrets) fields.onstart = VAST_ONSTART;
  return fields;
}

const text = (v: unknown): string => (typeof v === 'string' ? v.trim() : '');

/** The ports a create asked Vast to open, as the instance keeps them (`extra_env` pairs `["-p 8000:8000", "1"]`). */
export function vastRequestedPorts(inst: Pick<VastMachineView, 'extra_env'>): number[] {
  const out: number[] = [];
  for (const entry of Array.isArray(inst.extra_env) ? inst.extra_env : []) {
    const key = Array.isArray(entry) ? entry[0] : entry;
    const m = typeof key === 'string' ? /^-p\s+(\d{1,5}):(\d{1,5})(\/tcp)?$/.exec(key.trim()) : null;
    const port = m ? Number(m[2]) : NaN;
    if (port >= 1 && port <= 65_535 && !out.includes(port)) out.push(port);
  }
  return out;
}

/**
 * The URL of each port the rental asked for, once Vast has mapped it: the instance's public
 * address and the host port Vast chose (`ports["8000/tcp"][0].HostPort`). Vast's images open
 * ports of their own (Jupyter, its portal); only the requested ones are reported.
 */
export function vastEndpoints(
  inst: Pick<VastMachineView, 'extra_env' | 'ports' | 'public_ipaddr'>,
): InstanceInfo['endpoints'] {
  const host = text(inst.public_ipaddr);
  if (!host) return undefined;
  const out: { port: number; url: string }[] = [];
  for (const port of vastRequestedPorts(inst)) {
    const mapped = Number(inst.ports?.[`${port}/tcp`]?.[0]?.HostPort);
    if (Number.isSafeInteger(mapped) && mapped > 0 && mapped <= 65_535)
      out.push({ port, url: `http://${host.includes(':') ? `[${host}]` : host}:${mapped}` });
  }
  return out.length ? out : undefined;
}

/**
 * `text` with every value of the instance's env (`extra_env`) of four characters or more taken
 * out: Vast's and docker's messages about a container can quote its variables, which are the
 * rental's secrets (the setup text carries the script). Shorter values cannot be told from
 * ordinary words.
 */
export function withoutEnvValues(text: string, inst: Pick<VastMachineView, 'extra_env'>): string {
  const values = (Array.isArray(inst.extra_env) ? inst.extra_env : [])
    .map((e) =>
      Array.isArray(e) && typeof e[0] === 'string' && !e[0].startsWith('-') && typeof e[1] === 'string' ? e[1] : '',
    )
    .filter((v) => v.length >= 4)
    .sort((a, b) => b.length - a.length);
  let out = text;
  for (const v of values) if (out.includes(v)) out = out.split(v).join('[withheld]');
  return out;
}

/** Docker's words while it fetches an image, as Vast passes them on in `status_msg`. */
const PULLING = /\b(pull(ing|ed)?|download(ing|ed)?|extract(ing)?|layers?|digest|verifying checksum)\b/i;

/**
 * What a pending instance is doing, as Vast says. `loading` covers the image download and the
 * container's start: with no message, or docker's pull progress in `status_msg`, the image is
 * being pulled; with any other message the container is starting. `created` (without a failure)
 * and `rebooting` are starts. Before Vast has a status (`null`) it says nothing.
 */
export function vastStartupPhase(
  f: Pick<VastMachineView, 'actual_status' | 'status_msg'>,
): InstanceInfo['startupPhase'] {
  const actual = text(f.actual_status);
  const msg = text(f.status_msg);
  if (actual === 'loading') return !msg || PULLING.test(msg) ? 'pulling_image' : 'booting';
  if (actual === 'created' || actual === 'rebooting') return 'booting';
  return undefined;
}

/**
 * Bytes in one unit of Vast's billed traffic counters. Vast documents no unit; kilobytes (KiB) is
 * what the public evidence shows: a monitor of live instances saw `inet_down_billed` advance
 * 1,782,579 units in about 380 s on a 1027 Mbps link, 4.7 GB/s read as megabytes (some 36 times
 * the link) and 37 Mbps read as kilobytes; a recorded instance's counters carry tenths (15.3), so
 * the unit is not a byte (test/fixtures/providers/vast/SOURCES.md, "Traffic counters").
 */
export const VAST_BILLED_UNIT_BYTES = 1024;

/** A counter as Vast may send it: a number, or its plain decimal text (public clients meet both). */
function counterUnits(v: unknown): number | null {
  const n = typeof v === 'string' && /^\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? n : null;
}

/**
 * The traffic an instance has moved as Vast bills it: `inet_up_billed` (what the machine sent) and
 * `inet_down_billed` (what it received), cumulative, in bytes. Undefined unless both are there as
 * numbers of at least 0: a reading left out is charged with the next one, a wrong one never is.
 */
export function vastTraffic(
  inst: Pick<VastMachineView, 'inet_up_billed' | 'inet_down_billed'>,
): TrafficCounters | undefined {
  const up = counterUnits(inst.inet_up_billed);
  const down = counterUnits(inst.inet_down_billed);
  if (up === null || down === null) return undefined;
  const upBytes = Math.round(up * VAST_BILLED_UNIT_BYTES);
  const downBytes = Math.round(down * VAST_BILLED_UNIT_BYTES);
  if (!Number.isSafeInteger(upBytes) || !Number.isSafeInteger(downBytes)) return undefined;
  return { upBytes, downBytes };
}
