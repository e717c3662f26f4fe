// `npm start`: builds only when a source is newer than the last build, then runs the service in
// this same process (so signals reach it directly). Arguments pass through: npm start -- --role api
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildIsFresh } from './freshness.mjs';

// `npm start` is the development run of the README; an operator's deployment sets NODE_ENV itself.
process.env.NODE_ENV ??= 'development';
const root = process.cwd();

// The configuration is checked before anything is built, with the checks the service makes at
// start-up: a bad variable is the one line the service would print, not a build or release
// step failing on it first.
{
  const { tsImport } = await import('tsx/esm/api');
  const { assertSafeToRun, ConfigError, configErrorLine, loadConfig, parseRoles } = await tsImport('../src/config.ts', import.meta.url);
  const args = process.argv.slice(2);
  try {
    const config = loadConfig();
    parseRoles(args);
    if (args[0] !== 'owner') assertSafeToRun(config);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${configErrorLine(err)}\n`);
    process.exit(1);
  }
}
if (buildIsFresh(root)) {
  process.stderr.write('start: dist/ is newer than the sources; skipping the build\n');
} else {
  const r = spawnSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { stdio: 'inherit', cwd: root });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
// A fresh checkout serves its own client releases (GET /releases/latest.json); an existing build is kept.
const rel = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'scripts', 'release.ts'), '--if-missing'], { stdio: 'inherit', cwd: root });
if (rel.status !== 0) process.stderr.write('start: building the client releases failed; the service starts without them\n');
await import(pathToFileURL(join(root, 'dist', 'src', 'main.js')).href);
