import { existsSync, readdirSync, statSync } from 'node:fs';
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
  for (const p of [...SOURCE_DIRS, ...SOURCE_FILES]) if (existsSync(join(root, p))) sources = Math.max(sources, newest(join(root, p)));
  return statSync(stamp).mtimeMs > sources;
}
