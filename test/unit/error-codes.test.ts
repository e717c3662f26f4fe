import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_STATUS } from '../../src/errors/error-codes.js';

const ROOT = join(fileURLToPath(import.meta.url), '../../..');

/** The service's sources, without the code table itself and generated routes. */
function serviceSources(): string {
  let text = '';
  for (const e of readdirSync(join(ROOT, 'src'), { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !e.name.endsWith('.ts')) continue;
    const path = relative(ROOT, join(e.parentPath, e.name));
    if (path === 'src/errors/error-codes.ts' || path.startsWith('src/generated/')) continue;
    text += readFileSync(join(ROOT, path), 'utf8');
  }
  return text;
}

describe('error codes', () => {
  it('lists only codes the service sends: each is raised somewhere (an AppError, or the error handler)', () => {
    const src = serviceSources();
    // Clients retry and document what the table lists, so a code nothing raises misleads them.
    const sent = (code: string) => new RegExp(`(?:new AppError\\(\\s*|\\bcode\\s*[:=]\\s*)'${code}'`).test(src);
    assert.ok(sent('NOT_FOUND') && !sent('NO_SUCH_CODE'), 'the check must see how codes are raised');
    assert.deepEqual(
      Object.keys(ERROR_STATUS).filter((c) => !sent(c)),
      [],
    );
  });
});
