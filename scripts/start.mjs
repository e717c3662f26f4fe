// `npm start`: builds only when a source is newer than the last build, then runs the service in
// this same process (so signals reach it directly). Arguments pass through: npm start -- --role api
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { setPriority } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildIsFresh, clientVersion, releaseIsBuilt } from './freshness.mjs';

// `npm start` is the development run of the README; an operator's deployment sets NODE_ENV itself.
process.env.NODE_ENV ??= 'development';
const root = process.cwd();
const fresh = buildIsFresh(root);

// The configuration is checked before anything is built, with the checks the service makes at
// start-up: a bad variable is the one line the service would print, not a build or release
// step failing on it first. A fresh build has the same checks compiled, which load in a tenth
// of the time the TypeScript loader takes to compile them.
let releasesDir;
{
  const compiled = join(root, 'dist', 'src', 'config.js');
  const { assertSafeToRun, ConfigError, configErrorLine, loadConfig, parseRoles } =
    fresh && existsSync(compiled)
      ? await import(pathToFileURL(compiled).href)
      : await (await import('tsx/esm/api')).tsImport('../src/config.ts', import.meta.url);
  const args = process.argv.slice(2);
  try {
    const config = loadConfig();
    parseRoles(args);
    if (args[0] !== 'owner') assertSafeToRun(config);
    releasesDir = config.releases.dir;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${configErrorLine(err)}\n`);
    process.exit(1);
  }
}
if (fresh) {
  process.stderr.write('start: dist/ is newer than the sources; skipping the build\n');
} else {
  const r = spawnSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { stdio: 'inherit', cwd: root });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
// The service serves its own client releases (GET /releases/latest.json) and reads them per
// request, so it never waits for them: a missing release is built beside it, at the lowest CPU
// priority, and served once it is there (404 until then).
/** One log line as the service writes them (JSON, its logger's fields), for what this script does beside it. */
const logLine = (level, msg, fields) =>
  process.stdout.write(
    `${JSON.stringify({ level, time: new Date().toISOString(), service: 'gpu-rental', component: 'start', ...fields, msg })}\n`,
  );
const version = clientVersion(root);
if (process.argv[2] !== 'owner' && version !== undefined && !releaseIsBuilt(releasesDir, version)) {
  logLine('info', `building the client releases in ${releasesDir} in the background (npm run release)`, {
    releasesDir,
    version,
  });
  // Its own process group, so the service's end (or Ctrl-C) takes the packaging steps along too.
  const rel = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'scripts', 'release.ts'), '--if-missing', '--out', releasesDir],
    { stdio: 'ignore', cwd: root, detached: true },
  );
  try {
    setPriority(rel.pid, 19);
  } catch {
    // It ended already, or this system refuses: it then shares the CPU as it is.
  }
  rel.on('exit', (code, signal) => {
    if (code === 0)
      logLine('info', `client releases built in ${releasesDir}: served at /releases/latest.json`, {
        releasesDir,
        version,
      });
    else if (!signal)
      logLine('error', 'building the client releases failed; run `npm run release` to see why', {
        releasesDir,
        version,
        exitCode: code,
      });
  });
  rel.unref();
  process.on('exit', () => {
    if (rel.exitCode !== null || rel.signalCode !== null) return;
    try {
      process.kill(-rel.pid, 'SIGTERM');
    } catch {
      // Already gone.
    }
  });
}
await import(pathToFileURL(join(root, 'dist', 'src', 'main.js')).href);
