import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// @ts-expect-error plain ESM script without types
import { buildIsFresh, releaseIsBuilt, STAMP } from '../../scripts/freshness.mjs';

/** A project tree with one source file and, optionally, a build stamp, at chosen modification times. */
function tree(sourceAt: number, stampAt?: number): string {
  const root = mkdtempSync(join(tmpdir(), 'gpu-rental-fresh-'));
  mkdirSync(join(root, 'src', 'generated'), { recursive: true });
  mkdirSync(join(root, 'dist'), { recursive: true });
  writeFileSync(join(root, 'src', 'main.ts'), '');
  utimesSync(join(root, 'src', 'main.ts'), sourceAt, sourceAt);
  // Build outputs under src/generated never count as sources.
  writeFileSync(join(root, 'src', 'generated', 'routes.ts'), '');
  if (stampAt !== undefined) {
    writeFileSync(join(root, STAMP), '');
    utimesSync(join(root, STAMP), stampAt, stampAt);
  }
  return root;
}

// Running scripts/start.mjs on such trees is test/process/start-script.test.ts.
describe('npm start: what it counts as built (scripts/freshness.mjs)', () => {
  it('builds when a source is newer than the last build, or when there was none', () => {
    assert.equal(buildIsFresh(tree(2_000_000, 1_000_000)), false);
    assert.equal(buildIsFresh(tree(1_000_000)), false);
  });

  it("a release counts as built when its latest.json names the clients' version and every file it lists is there", () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpu-rental-releases-'));
    assert.equal(releaseIsBuilt(dir, '1.0.0'), false, 'no manifest');
    writeFileSync(
      join(dir, 'latest.json'),
      JSON.stringify({ version: '1.0.0', artifacts: { cli: { file: 'cli-1.0.0.tgz' } } }),
    );
    assert.equal(releaseIsBuilt(dir, '1.0.0'), false, 'a listed file is missing');
    writeFileSync(join(dir, 'cli-1.0.0.tgz'), '');
    assert.equal(releaseIsBuilt(dir, '1.0.0'), true);
    assert.equal(releaseIsBuilt(dir, '1.0.1'), false, 'another version');
  });
});
