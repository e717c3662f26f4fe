import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** What the compiled service is built from; src/generated is itself an output of the build. */
const SOURCE_DIRS = ['src', 'bot', 'plugins', 'migrations'];
const SOURCE_FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'tsoa.json'];
const SKIP = new Set(['node_modules', 'generated']);

/** Written by scripts/build.mjs once a build succeeds. */
export const STAMP = join('dist', '.build-stamp');

function newest(path) {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let max = 0;
  for (const entry of readdirSync(path)) if (!SKIP.has(entry)) max = Math.max(max, newest(join(path, entry)));
  return max;
}

/** True when the last successful build in `root` is newer than every source file. */
export function buildIsFresh(root) {
  const stamp = join(root, STAMP);
  if (!existsSync(stamp)) return false;
  let sources = 0;
  for (const p of [...SOURCE_DIRS, ...SOURCE_FILES])
    if (existsSync(join(root, p))) sources = Math.max(sources, newest(join(root, p)));
  return statSync(stamp).mtimeMs > sources;
}

/**
 * The client packages' version, which a release is named by (scripts/release.ts checks they all
 * agree); undefined in a tree without the clients, which has nothing to release.
 */
export function clientVersion(root) {
  const file = join(root, 'clients', 'cli', 'package.json');
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')).version : undefined;
}

/**
 * True when `dir` holds a release of `version`: its latest.json names that version and every
 * file it lists is there. What `npm run release -- --if-missing` and `npm start` look for.
 */
export function releaseIsBuilt(dir, version) {
  try {
    const manifest = JSON.parse(readFileSync(join(dir, 'latest.json'), 'utf8'));
    return (
      manifest.version === version && Object.values(manifest.artifacts).every((a) => existsSync(join(dir, a.file)))
    );
  } catch {
    return false;
  }
}
