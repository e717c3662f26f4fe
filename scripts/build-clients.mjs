/*
 * Bundles the CLI and the MCP server into one self-contained file each (SDK, commander, MCP SDK and
 * zod inlined), so their `npm pack` tarballs have no dependencies and install anywhere, offline.
 * Run by `npm run build:clients` (and the root `prepare`), after the SDK's own tsc build.
 */
import { build } from 'esbuild';
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const targets = [
  { dir: 'clients/cli', entry: 'src/main.ts', out: 'dist/gpr.js' },
  { dir: 'clients/mcp', entry: 'src/main.ts', out: 'dist/gpr-mcp.js' },
];

await Promise.all(
  targets.map(async ({ dir, entry, out }) => {
    const pkg = JSON.parse(readFileSync(`${root}${dir}/package.json`, 'utf8'));
    const outfile = `${root}${dir}/${out}`;
    // Written whole and renamed into place: a process running the bundle meanwhile (a test, an
    // agent) sees the old file or the new one, never half of one.
    const result = await build({
      entryPoints: [`${root}${dir}/${entry}`],
      outfile,
      write: false,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      legalComments: 'none',
      logLevel: 'warning',
      define: { __CLIENT_VERSION__: JSON.stringify(pkg.version), __CLIENT_NAME__: JSON.stringify(pkg.name) },
      // CommonJS dependencies inside an ESM bundle still call require() for Node built-ins.
      banner: {
        js: "#!/usr/bin/env node\nimport { createRequire as __gprCreateRequire } from 'node:module';\nconst require = __gprCreateRequire(import.meta.url);",
      },
    });
    mkdirSync(dirname(outfile), { recursive: true });
    const next = `${outfile}.${process.pid}.tmp`;
    writeFileSync(next, result.outputFiles[0].contents, { mode: 0o755 });
    chmodSync(next, 0o755);
    renameSync(next, outfile);
  }),
);
