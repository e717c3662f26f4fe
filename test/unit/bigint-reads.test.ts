import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readMinor } from '../../src/db/columns.js';

const ROOT = join(fileURLToPath(import.meta.url), '../../..');

/**
 * `Number(...)` of a value named like a BIGINT column or aggregate (cents, an id, a version, a
 * price): it rounds what it cannot hold instead of refusing it, as readMinor does.
 */
const BY_HAND = /\bNumber\(\s*[A-Za-z_][\w.?!]*(?:\[[^\]]*\])?[\w.?!]*(?:_minor|\.id|\.version|Price|Minor)\s*\)/g;

function byHandReads(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !e.name.endsWith('.ts')) continue;
    const path = relative(ROOT, join(e.parentPath, e.name));
    if (path.startsWith('src/generated/')) continue;
    for (const m of readFileSync(join(ROOT, path), 'utf8').matchAll(BY_HAND)) out.push(`${path}: ${m[0]}`);
  }
  return out;
}

describe('BIGINT reads', () => {
  it('refuses a value JavaScript cannot hold exactly instead of rounding it', () => {
    assert.equal(readMinor('9007199254740991'), 9007199254740991);
    assert.equal(readMinor(42), 42);
    assert.throws(() => readMinor('9007199254740993'), /outside the safe integer range/);
  });

  it('go through readMinor, never a bare Number()', () => {
    // The check itself must see the shapes it looks for.
    assert.equal(
      'Number(r.usage_minor) Number(page[page.length - 1].id) Number(state.version) Number(sameCount.minPrice)'.match(
        BY_HAND,
      )?.length,
      4,
    );
    assert.equal('Number(res.affectedRows) Number(body.gpuCount)'.match(BY_HAND), null);
    assert.deepEqual([...byHandReads('src'), ...byHandReads('bot'), ...byHandReads('plugins')], []);
  });
});
