/*
 * Reading one environment variable into a typed value, with a refusal that names it: the pieces
 * src/config.ts builds the configuration from, kept apart so that file holds only what the
 * service's settings are.
 */

/** The environment as src/config.ts reads it (the process's, or a test's own). */
export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {}

/** The one line a process prints when it cannot start for a configuration or argument error. */
export function configErrorLine(err: ConfigError): string {
  return `Configuration error: ${err.message}`;
}

/** A variable's trimmed text, or `fallback` when it is unset or blank. */
export function str(env: Env, name: string, fallback: string): string {
  const v = env[name];
  return v === undefined || v.trim() === '' ? fallback : v.trim();
}

/** A variable's trimmed text, or undefined when it is unset or blank. */
export function opt(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

/** A whole number from `min` to `max`, or `fallback` when unset. */
export function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** true/1/yes/on or false/0/no/off, or `fallback` when unset. */
export function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const v = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/** A URL of one of `protocols`, or `fallback` when unset. */
export function url(env: Env, name: string, fallback: string, protocols: string[]): string {
  const v = str(env, name, fallback);
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${v}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
  }
  return v;
}
