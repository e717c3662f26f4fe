/**
 * The spellings one kind of environment value is accepted or refused in, for every door that
 * reads one: the service's variables (test/unit/service-config.test.ts, through loadConfig) and the
 * provider plugins' options (test/unit/kit-options.test.ts, through the kit's parser). Both
 * run the same tables, so a spelling one accepts and the other refuses fails one of them.
 */

/** Blank counts as unset: the reader's default applies. */
export const BLANK_VALUES = ['', '   '];

/** Booleans: each accepted spelling with its value, and refused ones. */
export const BOOLEAN_TABLE = {
  accepted: [
    ['true', true],
    ['TRUE', true],
    [' yes ', true],
    ['On', true],
    ['1', true],
    ['false', false],
    ['No', false],
    ['OFF', false],
    ['0', false],
    [' false ', false],
  ] as [string, boolean][],
  refused: ['maybe', 'y', 'n', '2', 'enabled', 't', 'nope'],
};

/** The refusal of a boolean `value` given to `name`. */
export const booleanRefusal = (name: string, value: string) => `${name} must be true or false, got "${value}"`;

/** Whole numbers within `[min, max]`: accepted spellings with their value, and refused ones. */
export function integerTable(min: number, max: number): { accepted: [string, number][]; refused: string[] } {
  return {
    accepted: [
      [String(min), min],
      [` ${max} `, max],
      [String(Math.floor((min + max) / 2)), Math.floor((min + max) / 2)],
    ],
    refused: [
      ...(min > 0 ? [String(min - 1)] : []),
      String(max + 1),
      '-1',
      '+5',
      '1.5',
      '1e2',
      '0x10',
      'ten',
      '9007199254740993',
    ],
  };
}

/** The refusal of a whole number `value` given to `name`. */
export const integerRefusal = (name: string, min: number, max: number, value: string) =>
  `${name} must be a whole number from ${min} to ${max}, got "${value}"`;

/**
 * Comma-separated lists, given one item the rule takes (`good`, `other`) and one it refuses
 * (`bad`): accepted spellings with their items, and refused ones with the item the refusal names.
 */
export function listTable(
  good: string,
  other: string,
  bad: string,
): { accepted: [string, string[]][]; refused: [string, string][] } {
  return {
    accepted: [
      [good, [good]],
      [` ${good} , ${other} `, [good, other]],
      [`${good},,${other},`, [good, other]],
    ],
    refused: [
      [`${good},${bad}`, bad],
      [bad, bad],
      [',', ','],
      [' , ', ','],
    ],
  };
}

/** The refusal of list `name` naming the item (or the whole value) it refuses. */
export const listRefusal = (name: string, help: string, item: string) =>
  `${name} must be a comma-separated list of ${help}, got "${item}"`;

/** http(s) URLs refused whatever else the reader asks of them. */
export const REFUSED_WEB_URLS = ['not a url', 'ftp://host.example', 'host.example:8080', 'mailto:a@b.example'];
