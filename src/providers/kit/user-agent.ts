import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The product name every provider call announces. */
export const PRODUCT_NAME = 'gpu-rental';

/**
 * The service's version from its package.json. The file sits a different number of directories
 * up from here in the source tree and in the build, so the nearest package.json of this product is
 * taken; "unknown" when none is found (a User-Agent without a version still passes an edge gate).
 */
export function readVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === PRODUCT_NAME && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // Not here: look one directory up.
    }
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return 'unknown';
}

/**
 * `gpu-rental/<version>`, sent on every provider call. Some clouds' edges refuse a runtime's
 * default User-Agent (RunPod's answers 403 "error code: 1010"), which would read as a bad key.
 * Read once, at first import.
 */
export const PRODUCT_USER_AGENT = `${PRODUCT_NAME}/${readVersion()}`;
