import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, normalize } from 'node:path';
import { buildClients, ROOT, underBuildLock } from './helpers/build.js';

const SDK_DIR = join(ROOT, 'clients/sdk');

/** The package a bare specifier names: `openapi-fetch`, `@scope/name`, `node:fs`. */
const packageOf = (spec: string) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');

/**
 * What the SDK's tarball lacks: each module its entry points reach (JavaScript and declarations,
 * through relative imports) that `npm pack` leaves out, and each package they import that is
 * neither a Node built-in nor one of its dependencies.
 */
function unpackedReach(packed: Set<string>, entries: string[], dependencies: string[]): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  const queue = [...entries];
  while (queue.length) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    if (!packed.has(file)) {
      problems.push(`not packed: ${file}`);
      continue;
    }
    const text = readFileSync(join(SDK_DIR, file), 'utf8');
    // tsc writes one import or export per line; a code snippet inside a string starts with a quote instead.
    for (const [, spec] of text.matchAll(/^\s*(?:import|export)\b[^;'"=]*?\bfrom\s+['"]([^'"]+)['"]/gm)) {
      if (spec.startsWith('.')) {
        const target = normalize(join(dirname(file), spec));
        queue.push(file.endsWith('.d.ts') ? target.replace(/\.js$/, '.d.ts') : target);
      } else if (
        !spec.startsWith('node:') &&
        !builtinModules.includes(spec) &&
        !dependencies.includes(packageOf(spec))
      ) {
        problems.push(`${file} needs ${spec}, not among its dependencies`);
      }
    }
  }
  return problems;
}

describe('the SDK package as npm packs it', () => {
  it('holds every module its entry points reach (its own and src/vocabulary/), and needs only Node and its dependencies', () => {
    buildClients();
    // Held so that no other test run rewrites dist/ while it is read.
    underBuildLock(() => {
      const pkg = JSON.parse(readFileSync(join(SDK_DIR, 'package.json'), 'utf8')) as {
        main: string;
        types: string;
        exports: Record<'.', { import: string; types: string }>;
        dependencies: Record<string, string>;
      };
      const [listing] = JSON.parse(
        execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
          cwd: SDK_DIR,
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        }),
      ) as { files: { path: string }[] }[];
      const packed = new Set(listing.files.map((f) => f.path));
      const entries = [pkg.main, pkg.types, pkg.exports['.'].import, pkg.exports['.'].types].map((p) => normalize(p));
      assert.deepEqual(unpackedReach(packed, entries, Object.keys(pkg.dependencies)), []);
      // The vocabulary is in it, not merely reachable from the repository.
      assert.ok(packed.has('dist/src/vocabulary/money.js') && packed.has('dist/src/vocabulary/statuses.d.ts'));
    });
  });
});
