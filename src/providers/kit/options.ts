/**
 * The one parser for `<ID>_PROVIDER_<NAME>` options. A plugin declares its options (name, kind,
 * default, limits) and gets a `validateOptions` that refuses unknown names, names the variable in
 * every message and never echoes a secret's value.
 */

/** A free-form string option. */
export interface StringOption {
  kind: 'string';
  /** Refuse an empty value (after trimming) instead of using `default`. */
  required?: boolean;
  default?: string;
  /** The value is a secret (an API key): messages never quote it. */
  secret?: boolean;
  /** A single token: whitespace inside the value is refused. */
  noSpaces?: boolean;
  maxLength?: number;
  /** Shown after "is required" to tell the operator where to get the value. */
  hint?: string;
}

/** A whole number within `[min, max]`. */
export interface IntegerOption {
  kind: 'integer';
  min: number;
  max: number;
  default: number;
}

/** An http(s) origin without a path; the plugin appends its own paths. */
export interface OriginOption {
  kind: 'origin';
  default: string;
  /** What the plugin appends, for the message (`/api/v1/...`). */
  appends: string;
}

/** One of a fixed set of words, compared case-insensitively and returned as declared. */
export interface EnumOption<V extends string = string> {
  kind: 'enum';
  values: readonly V[];
  default: V;
}

/** A comma-separated list; absent means `null` (no restriction). */
export interface ListOption {
  kind: 'list';
  /** Every item must match. */
  item: RegExp;
  /** What an item looks like, for the message ("region codes such as us-east-1"). */
  itemHelp: string;
}

/** A boolean written as true/false, 1/0 or yes/no; absent means false. */
export interface FlagOption {
  kind: 'flag';
}

/** One declared option. */
export type OptionSpec = StringOption | IntegerOption | OriginOption | EnumOption | ListOption | FlagOption;

/** The parsed value type of one declared option. */
export type OptionValue<S extends OptionSpec> = S extends IntegerOption
  ? number
  : S extends EnumOption<infer V>
    ? V
    : S extends ListOption
      ? string[] | null
      : S extends FlagOption
        ? boolean
        : S extends StringOption
          ? S['required'] extends true
            ? string
            : S['default'] extends string
              ? string
              : string | undefined
          : string;

/** The parsed values of a declaration, keyed by option name (without the prefix). */
export type OptionValues<D extends Record<string, OptionSpec>> = { [K in keyof D]: OptionValue<D[K]> };

/** A plugin's option declaration. */
export interface OptionsDeclaration<D extends Record<string, OptionSpec>> {
  /** The plugin id; the variable prefix is `<ID>_PROVIDER_`. */
  providerId: string;
  options: D;
}

/** The variable name of option `name` of provider `providerId`. */
export function optionVariable(providerId: string, name: string): string {
  return `${providerId.toUpperCase()}_PROVIDER_${name}`;
}

function parseOne(variable: string, spec: OptionSpec, raw: string | undefined): unknown {
  const given = raw !== undefined && raw.trim() !== '';
  const value = raw?.trim() ?? '';
  // Values are quoted in messages except a secret's: a key pasted into the wrong variable must not reach the log.
  const got = (s: OptionSpec) => ('secret' in s && s.secret ? '' : `, got "${raw}"`);
  switch (spec.kind) {
    case 'string': {
      if (!given) {
        if (spec.required) throw new Error(`${variable} is required${spec.hint ? ` (${spec.hint})` : ''}`);
        return spec.default;
      }
      if (spec.noSpaces && /\s/.test(value))
        throw new Error(`${variable} must be a single token without spaces${got(spec)}`);
      if (spec.maxLength !== undefined && value.length > spec.maxLength)
        throw new Error(`${variable} must be at most ${spec.maxLength} characters`);
      return value;
    }
    case 'integer': {
      if (!given) return spec.default;
      const n = /^\d+$/.test(value) ? Number(value) : NaN;
      if (!Number.isSafeInteger(n) || n < spec.min || n > spec.max)
        throw new Error(`${variable} must be a whole number from ${spec.min} to ${spec.max}${got(spec)}`);
      return n;
    }
    case 'origin': {
      if (!given) return new URL(spec.default).origin;
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        throw new Error(`${variable} must be an http(s) origin such as ${spec.default}${got(spec)}`);
      }
      if (
        !['http:', 'https:'].includes(url.protocol) ||
        (url.pathname !== '/' && url.pathname !== '') ||
        url.search ||
        url.hash ||
        url.username ||
        url.password
      ) {
        throw new Error(
          `${variable} must be an http(s) origin without a path such as ${spec.default} (the plugin appends ${spec.appends})${got(spec)}`,
        );
      }
      return url.origin;
    }
    case 'enum': {
      if (!given) return spec.default;
      const hit = spec.values.find((v) => v.toLowerCase() === value.toLowerCase());
      if (hit === undefined)
        throw new Error(
          `${variable} must be ${spec.values.slice(0, -1).join(', ')}${spec.values.length > 1 ? ' or ' : ''}${spec.values.at(-1)}${got(spec)}`,
        );
      return hit;
    }
    case 'list': {
      if (raw === undefined) return null;
      const items = raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (items.length === 0 || items.some((s) => !spec.item.test(s)))
        throw new Error(`${variable} must be a comma-separated list of ${spec.itemHelp}${got(spec)}`);
      return items;
    }
    case 'flag': {
      if (!given) return false;
      const v = value.toLowerCase();
      if (['true', '1', 'yes'].includes(v)) return true;
      if (['false', '0', 'no'].includes(v)) return false;
      throw new Error(`${variable} must be true or false${got(spec)}`);
    }
  }
}

/**
 * Parses raw `<ID>_PROVIDER_*` values (names without the prefix, as the registry hands them over)
 * against a declaration. Unknown names are refused with the list of known ones; every message
 * names the variable.
 */
export function parseOptions<D extends Record<string, OptionSpec>>(
  decl: OptionsDeclaration<D>,
  raw: Record<string, string>,
): OptionValues<D> {
  const known = Object.keys(decl.options);
  const v = (name: string) => optionVariable(decl.providerId, name);
  for (const k of Object.keys(raw)) {
    if (!known.includes(k))
      throw new Error(
        `${v(k)} is not an option of the ${decl.providerId} provider (known: ${known.map(v).join(', ')})`,
      );
  }
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(decl.options)) out[name] = parseOne(v(name), spec, raw[name]);
  return out as OptionValues<D>;
}

/** Declares a plugin's options; the identity at run time, it keeps the declaration's literal types. */
export function declareOptions<const D extends Record<string, OptionSpec>>(
  decl: OptionsDeclaration<D>,
): OptionsDeclaration<D> {
  return decl;
}
