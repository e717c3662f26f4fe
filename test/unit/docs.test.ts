import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { CONFIG_VARIABLES } from '../../src/config-variables.js';
import { loadConfig } from '../../src/config.js';
import { ERROR_DESCRIPTIONS, ERROR_STATUS } from '../../src/errors/error-codes.js';
import {
  CONFIGURATION_DOC_PATH,
  ERRORS_DOC_PATH,
  renderConfigurationDoc,
  renderErrorsDoc,
} from '../../scripts/generate-docs.js';

/** src/config.ts and the readers of its groups under src/config/, the only code that reads the environment. */
const CONFIG_SOURCE = [
  readFileSync(new URL('../../src/config.ts', import.meta.url), 'utf8'),
  ...readdirSync(new URL('../../src/config/', import.meta.url))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => readFileSync(new URL(`../../src/config/${f}`, import.meta.url), 'utf8')),
].join('\n');

/**
 * Every environment variable src/config.ts (with src/config/) reads, as the documentation names it: literal names
 * (`int(env, 'PORT', …)`, `env['X']`, `env.X`), per-provider names built from the plugin prefix
 * (`${prefix}MARKUP_PERCENT` → `<ID>_PROVIDER_MARKUP_PERCENT`), and the prefix scan that hands
 * plugins their options (`<ID>_PROVIDER_<NAME>`).
 */
function variablesReadByConfig(source: string): Set<string> {
  const names = new Set<string>();
  for (const m of source.matchAll(/\benv,\s*'([A-Z][A-Z0-9_]*)'/g)) names.add(m[1]);
  for (const m of source.matchAll(/\benv\[\s*'([A-Z][A-Z0-9_]*)'\s*\]/g)) names.add(m[1]);
  for (const m of source.matchAll(/\benv\.([A-Z][A-Z0-9_]*)\b/g)) names.add(m[1]);
  for (const m of source.matchAll(/\benv,\s*`\$\{prefix\}([A-Z][A-Z0-9_]*)`/g)) names.add(`<ID>_PROVIDER_${m[1]}`);
  if (/startsWith\(prefix\)/.test(source)) names.add('<ID>_PROVIDER_<NAME>');
  return names;
}

describe('generated documentation', () => {
  describe('docs/configuration.md', () => {
    it('is what `npm run docs` renders from CONFIG_VARIABLES (run it after changing a declaration)', () => {
      assert.equal(readFileSync(CONFIGURATION_DOC_PATH, 'utf8'), renderConfigurationDoc());
    });

    it('declares every variable src/config.ts reads, and nothing it does not read', () => {
      const read = variablesReadByConfig(CONFIG_SOURCE);
      const declared = new Set(CONFIG_VARIABLES.map((v) => v.name));
      assert.ok(
        read.size > 30,
        `found only ${read.size} variables in src/config.ts; has the way it reads them changed?`,
      );
      assert.deepEqual(
        [...read].filter((n) => !declared.has(n)).sort(),
        [],
        'read by src/config.ts but not declared in CONFIG_VARIABLES',
      );
      assert.deepEqual(
        [...declared].filter((n) => !read.has(n)).sort(),
        [],
        'declared in CONFIG_VARIABLES but not read by src/config.ts',
      );
      assert.equal(declared.size, CONFIG_VARIABLES.length, 'a variable is declared twice');
      for (const name of read)
        assert.ok(renderConfigurationDoc().includes(`\`${name}\``), `${name} is missing from docs/configuration.md`);
    });

    it('states each literal default as the value loadConfig uses when the variable is unset', () => {
      const unset = loadConfig({});
      const literal = CONFIG_VARIABLES.filter((v) => v.default !== null);
      assert.ok(literal.length > 15, `only ${literal.length} literal defaults`);
      for (const v of literal) {
        assert.deepEqual(
          loadConfig({ [v.name]: v.default! }),
          unset,
          `${v.name}=${v.default} is not what an unset ${v.name} means`,
        );
      }
    });

    it('gives every variable a meaning, and a default in words where it has no literal one', () => {
      for (const v of CONFIG_VARIABLES) {
        assert.ok(v.meaning.trim().length > 10, `${v.name} has no meaning`);
        assert.ok(
          v.default !== null || (v.defaultText ?? '').trim() !== '',
          `${v.name} has neither a default nor words for it`,
        );
      }
    });
  });

  describe('docs/errors.md', () => {
    it('is what `npm run docs` renders from src/errors/error-codes.ts (run it after changing a code)', () => {
      assert.equal(readFileSync(ERRORS_DOC_PATH, 'utf8'), renderErrorsDoc());
    });

    it('lists every code with its status and when it comes', () => {
      const doc = renderErrorsDoc();
      for (const [code, status] of Object.entries(ERROR_STATUS)) {
        assert.match(doc, new RegExp(`^\\| \`${code}\` \\| ${status} \\| .{20,}`, 'm'), code);
        assert.ok(ERROR_DESCRIPTIONS[code as keyof typeof ERROR_STATUS].trim().length > 20, code);
      }
    });
  });
});
