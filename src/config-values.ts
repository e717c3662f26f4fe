/*
 * Reading one environment variable into a typed value, with a refusal that names it. The service's
 * settings (src/config.ts) and the provider plugins' `<ID>_PROVIDER_<NAME>` options
 * (src/providers/kit/options.ts) both read their values here, so a value of one kind is spelled,
 * bounded and refused the same way whichever variable carries it. Blank counts as unset everywhere.
 */

/** The environment as src/config.ts reads it (the process's, or a test's own). */
export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {}

/** The one line a process prints when it cannot start for a configuration or argument error. */
export function configErrorLine(err: ConfigError): string {
  return `Configuration error: ${err.message}`;
}

/** The spellings of a boolean, compared case-insensitively, for every variable that takes one. */
export const BOOLEAN_SPELLINGS = {
  true: ['true', '1', 'yes', 'on'],
  false: ['false', '0', 'no', 'off'],
} as const;

/** A value's trimmed text, or undefined when it is unset or blank. */
export function given(raw: string | undefined): string | undefined {
  const v = raw?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/** How a refusal ends: the value as given, unless it is a secret (a key pasted into the wrong variable must not reach a log). */
function got(value: string, secret = false): string {
  return secret ? '' : `, got "${value}"`;
}

/** One of {@link BOOLEAN_SPELLINGS}; undefined when unset. */
export function readBoolean(name: string, raw: string | undefined): boolean | undefined {
  const v = given(raw);
  if (v === undefined) return undefined;
  const word = v.toLowerCase();
  if ((BOOLEAN_SPELLINGS.true as readonly string[]).includes(word)) return true;
  if ((BOOLEAN_SPELLINGS.false as readonly string[]).includes(word)) return false;
  throw new ConfigError(`${name} must be true or false${got(v)}`);
}

/** A whole number from `min` to `max` (digits only: no sign, decimals or exponent); undefined when unset. */
export function readInteger(name: string, raw: string | undefined, min: number, max: number): number | undefined {
  const v = given(raw);
  if (v === undefined) return undefined;
  const n = /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}${got(v)}`);
  return n;
}

/** One of `values`, compared case-insensitively and returned as declared; undefined when unset. */
export function readChoice<V extends string>(
  name: string,
  raw: string | undefined,
  values: readonly V[],
): V | undefined {
  const v = given(raw);
  if (v === undefined) return undefined;
  const hit = values.find((c) => c.toLowerCase() === v.toLowerCase());
  if (hit === undefined) {
    const words = values.length > 1 ? `${values.slice(0, -1).join(', ')} or ${values.at(-1)}` : values[0];
    throw new ConfigError(`${name} must be ${words}${got(v)}`);
  }
  return hit;
}

/** What a URL must be. */
export interface UrlRule {
  /** The schemes allowed, with their colon (`https:`). */
  protocols: readonly string[];
  /** Only an origin: no path, query, fragment or credentials (the reader appends its own paths). */
  origin?: { example: string; appends: string };
}

/** `a mysql: or mariadb: URL`, `an http(s) origin without a path such as ...`. */
function urlWords(rule: UrlRule): string {
  const web = rule.protocols.length === 2 && rule.protocols.includes('http:') && rule.protocols.includes('https:');
  const schemes = web ? 'an http(s)' : `a ${rule.protocols.join(' or ')}`;
  if (!rule.origin) return `${schemes} URL`;
  return `${schemes} origin without a path such as ${rule.origin.example} (the plugin appends ${rule.origin.appends})`;
}

/**
 * A URL of one of `rule.protocols` (an origin, when `rule.origin` says so, returned without its
 * trailing slash); undefined when unset. A password in the value is never quoted.
 */
export function readUrl(name: string, raw: string | undefined, rule: UrlRule): string | undefined {
  const v = given(raw);
  if (v === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(v);
  } catch {
    url = undefined;
  }
  const originOnly =
    !rule.origin ||
    (url !== undefined &&
      (url.pathname === '/' || url.pathname === '') &&
      !url.search &&
      !url.hash &&
      !url.username &&
      !url.password);
  if (url === undefined || !rule.protocols.includes(url.protocol) || !originOnly)
    throw new ConfigError(`${name} must be ${urlWords(rule)}${got(v.replace(/\/\/([^/@:]*):[^/@]*@/, '//$1:…@'))}`);
  return rule.origin ? url.origin : v;
}

/** What each item of a list must be. */
export interface ListRule {
  item: RegExp | ((item: string) => boolean);
  /** The items in words, for the message ("region codes such as us-east-1"). */
  help: string;
}

/**
 * A comma-separated list, items trimmed and empty ones dropped; undefined when unset. A value that
 * lists nothing, or an item the rule refuses, is refused naming that item.
 */
export function readList(name: string, raw: string | undefined, rule: ListRule): string[] | undefined {
  const v = given(raw);
  if (v === undefined) return undefined;
  const items = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const ok = typeof rule.item === 'function' ? rule.item : (s: string) => (rule.item as RegExp).test(s);
  const bad = items.length === 0 ? v : items.find((s) => !ok(s));
  if (bad !== undefined) throw new ConfigError(`${name} must be a comma-separated list of ${rule.help}${got(bad)}`);
  return items;
}

/** What a free-form text value must be. */
export interface TextRule {
  /** Refuse an unset value. */
  required?: boolean;
  /** The value is a secret (an API key, a password): messages never quote it. */
  secret?: boolean;
  /** A single token: whitespace inside the value is refused. */
  noSpaces?: boolean;
  minLength?: number;
  maxLength?: number;
  /** Shown after "is required" or a length refusal, to tell the operator where to get a value. */
  hint?: string;
}

/** A value's trimmed text under `rule`; undefined when unset and not required. */
export function readText(name: string, raw: string | undefined, rule: TextRule = {}): string | undefined {
  const v = given(raw);
  const hint = rule.hint ? ` (${rule.hint})` : '';
  if (v === undefined) {
    if (rule.required) throw new ConfigError(`${name} is required${hint}`);
    return undefined;
  }
  if (rule.noSpaces && /\s/.test(v))
    throw new ConfigError(`${name} must be a single token without spaces${got(v, rule.secret)}`);
  if (rule.minLength !== undefined && v.length < rule.minLength)
    throw new ConfigError(`${name} must be at least ${rule.minLength} characters${hint}`);
  if (rule.maxLength !== undefined && v.length > rule.maxLength)
    throw new ConfigError(`${name} must be at most ${rule.maxLength} characters`);
  return v;
}

// The forms src/config.ts reads the environment with: `kind(env, 'NAME', ...)`, so the
// documentation test finds every variable it reads by name.

/** A variable's trimmed text, or `fallback` when it is unset or blank. */
export function str(env: Env, name: string, fallback: string): string {
  return given(env[name]) ?? fallback;
}

/** A variable's trimmed text under `rule`, or undefined when it is unset or blank. */
export function opt(env: Env, name: string, rule?: TextRule): string | undefined {
  return readText(name, env[name], rule);
}

/** A whole number from `min` to `max`, or `fallback` when unset. */
export function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  return readInteger(name, env[name], min, max) ?? fallback;
}

/** A whole number from `min` to `max`, or undefined when unset. */
export function optInt(env: Env, name: string, min: number, max: number): number | undefined {
  return readInteger(name, env[name], min, max);
}

/** One of {@link BOOLEAN_SPELLINGS}, or `fallback` when unset. */
export function bool(env: Env, name: string, fallback: boolean): boolean {
  return readBoolean(name, env[name]) ?? fallback;
}

/** One of `values` (any case), or `fallback` when unset. */
export function choice<V extends string>(env: Env, name: string, values: readonly V[], fallback: V): V {
  return readChoice(name, env[name], values) ?? fallback;
}

/** A URL of one of `protocols`, or `fallback` when unset. */
export function url(env: Env, name: string, fallback: string, protocols: readonly string[]): string {
  return readUrl(name, env[name], { protocols }) ?? fallback;
}

/** A URL of one of `protocols`, or undefined when unset. */
export function optUrl(env: Env, name: string, protocols: readonly string[]): string | undefined {
  return readUrl(name, env[name], { protocols });
}

/** A comma-separated list under `rule`, or undefined when unset. */
export function list(env: Env, name: string, rule: ListRule): string[] | undefined {
  return readList(name, env[name], rule);
}
