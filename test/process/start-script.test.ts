import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
// @ts-expect-error plain ESM script without types
import { buildIsFresh, STAMP } from '../../scripts/freshness.mjs';

const START = resolve('scripts/start.mjs');

/** A project tree: one source file and, optionally, a build stamp, with chosen modification times. */
function tree(sourceAt: number, stampAt?: number): string {
  const root = mkdtempSync(join(tmpdir(), 'gpu-rental-start-'));
  mkdirSync(join(root, 'src', 'generated'), { recursive: true });
  mkdirSync(join(root, 'dist', 'src'), { recursive: true });
  writeFileSync(join(root, 'src', 'main.ts'), '');
  writeFileSync(
    join(root, 'dist', 'src', 'main.js'),
    "console.log('service main ran', process.argv.slice(2).join(' '));\n",
  );
  utimesSync(join(root, 'src', 'main.ts'), sourceAt, sourceAt);
  // Build outputs under src/generated never count as sources.
  writeFileSync(join(root, 'src', 'generated', 'routes.ts'), '');
  if (stampAt !== undefined) {
    writeFileSync(join(root, STAMP), '');
    utimesSync(join(root, STAMP), stampAt, stampAt);
  }
  return root;
}

describe('npm start', () => {
  it('skips the build when dist/ is newer than every source, says so, and runs the service with its arguments', () => {
    const root = tree(1_000_000, 2_000_000);
    assert.equal(buildIsFresh(root), true);
    const r = spawnSync(process.execPath, [START, '--role', 'api'], { cwd: root, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /^start: dist\/ is newer than the sources; skipping the build$/m);
    assert.equal(r.stdout.trim(), 'service main ran --role api');
  });

  it('a bad variable or role: only the configuration error line, exit 1, before any build or release step and without a stack trace', () => {
    for (const [env, args, line] of [
      [{ PORT: 'abc' }, [], 'Configuration error: PORT must be a whole number from 0 to 65535, got "abc"'],
      [
        {},
        ['--role', 'nope'],
        'Configuration error: --role must be one of api, worker, bot (comma-separated), got "nope"',
      ],
    ] as const) {
      // A stale build, so `npm start` would build first; stand-ins record whether it did.
      const root = tree(2_000_000, 1_000_000);
      mkdirSync(join(root, 'node_modules', '.bin'), { recursive: true });
      for (const tool of ['tsoa', 'tsc']) {
        writeFileSync(join(root, 'node_modules', '.bin', tool), `#!/bin/sh\necho "${tool} $*" >> calls.txt\n`, {
          mode: 0o755,
        });
      }
      const r = spawnSync(process.execPath, [START, ...args], {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, ...env, RELEASES_DIR: join(root, 'releases') },
      });
      assert.equal(r.status, 1, r.stderr);
      assert.equal(r.stderr, `${line}\n`);
      assert.equal(r.stdout, '');
      assert.equal(existsSync(join(root, 'calls.txt')), false, 'nothing was built');
      assert.equal(existsSync(join(root, 'releases')), false, 'no release was built');
    }
  });

  it('prints a line for each build step and stamps dist/ when it succeeds', () => {
    const root = tree(1_000_000);
    // Stand-ins for the two compilers: they record their arguments, so the run is quick.
    mkdirSync(join(root, 'node_modules', '.bin'), { recursive: true });
    for (const tool of ['tsoa', 'tsc']) {
      writeFileSync(join(root, 'node_modules', '.bin', tool), `#!/bin/sh\necho "${tool} $*" >> calls.txt\n`, {
        mode: 0o755,
      });
    }
    const r = spawnSync(process.execPath, [resolve('scripts/build.mjs')], { cwd: root, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /^build: generating routes and the OpenAPI document \(tsoa\)\.\.\.$/m);
    assert.match(r.stderr, /^build: compiling TypeScript to dist\/ \(tsc\)\.\.\.$/m);
    assert.match(r.stderr, /^build: done in /m);
    assert.equal(readFileSync(join(root, 'calls.txt'), 'utf8'), 'tsoa spec-and-routes\ntsc -p tsconfig.build.json\n');
    assert.equal(buildIsFresh(root), true);
  });

  it('starts the service without waiting for the client releases, which it builds in the background when missing', () => {
    const root = tree(1_000_000, 2_000_000);
    mkdirSync(join(root, 'clients', 'cli'), { recursive: true });
    writeFileSync(join(root, 'clients', 'cli', 'package.json'), JSON.stringify({ version: '9.9.9' }));
    // The stand-in service says whether a release was there when it started.
    // It stays up until the background build has said how it ended (this tree has no release script, so it fails), as a service would.
    writeFileSync(
      join(root, 'dist', 'src', 'main.js'),
      [
        "import { existsSync } from 'node:fs';",
        "console.log('release there:', existsSync(process.env.RELEASES_DIR + '/latest.json'));",
        'const write = process.stdout.write.bind(process.stdout);',
        'const hold = setInterval(() => undefined, 1000);',
        "process.stdout.write = (chunk, ...rest) => { const r = write(chunk, ...rest); if (String(chunk).includes('client releases')) { clearInterval(hold); } return r; };",
        '',
      ].join('\n'),
    );
    const releases = join(root, 'releases');
    const r = spawnSync(process.execPath, [START], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, RELEASES_DIR: releases },
      // Bounds a stand-in that never hears how the build ended.
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    const logged = lines
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: string; msg: string; releasesDir: string });
    assert.equal(
      lines.find((l) => !l.startsWith('{')),
      'release there: false',
    );
    assert.deepEqual(
      logged.map((l) => [l.level, l.msg, l.releasesDir]),
      [
        ['info', `building the client releases in ${releases} in the background (npm run release)`, releases],
        ['error', 'building the client releases failed; run `npm run release` to see why', releases],
      ],
      'the build is logged as JSON lines, as the service logs, when it starts and when it ends',
    );
  });
});
