import {
  ConfigError,
  readBoolean,
  readChoice,
  readInteger,
  readList,
  readText,
  readUrl,
  type TextRule,
} from '../../config-values.js';

/**
 * The one parser for `<ID>_PROVIDER_<NAME>` options. A plugin declares its options (name, kind,
 * default, limits) and gets a `validateOptions` that refuses unknown names, names the variable in
 * every message and never echoes a secret's value. Each kind is read by the same value reader as
 * the service's own variables (src/config-values.ts): one set of spellings, one refusal format.
 */

const WEB = ['http:', 'https:'];

/** A free-form string option: `required`, `secret`, `noSpaces`, `maxLength` and `hint` as for any text value. */
export interface StringOption extends Omit<TextRule, 'minLength'> {
  kind: 'string';
  /** The value of an unset option that is not `required`. */
  default?: string;
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

/** A comma-separated list; unset means `null` (no restriction). */
export interface ListOption {
  kind: 'list';
  /** Every item must match. */
  item: RegExp;
  /** What an item looks like, for the message ("region codes such as us-east-1"). */
  itemHelp: string;
}

/** A boolean in any of the service's spellings (`BOOLEAN_SPELLINGS`: true/false, 1/0, yes/no, on/off); unset means false. */
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
  switch (spec.kind) {
    case 'string':
      return readText(variable, raw, spec) ?? spec.default;
    case 'integer':
      return readInteger(variable, raw, spec.min, spec.max) ?? spec.default;
    case 'origin':
      return (
        readUrl(variable, raw, { protocols: WEB, origin: { example: spec.default, appends: spec.appends } }) ??
        new URL(spec.default).origin
      );
    case 'enum':
      return readChoice(variable, raw, spec.values) ?? spec.default;
    case 'list':
      return readList(variable, raw, { item: spec.item, help: spec.itemHelp }) ?? null;
    case 'flag':
      return readBoolean(variable, raw) ?? false;
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
      throw new ConfigError(
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
