import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TEST_DIR = join(ROOT, 'test');

/**
 * Where timers may be set: the waiting helpers (conditions, barriers and bounds; never a pause)
 * and the latency fakes simulate for the services they stand for.
 */
const TIMER_FILES = new Set(['test/helpers/wait.ts', 'test/fakes/simulated-latency.ts']);

/** A timer or a pause: what a test must not wait on. */
const FIXED_WAIT = /\b(?:setTimeout|sleep|delay)\s*\(|timers\/promises/;

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(path);
    return e.isFile() && e.name.endsWith('.ts') ? [path] : [];
  });
}

/** `file:line: text` of every line of `text` with a fixed wait. */
function fixedWaits(file: string, text: string): string[] {
  return text.split('\n').flatMap((line, i) => (FIXED_WAIT.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : []));
}

describe('no test waits a fixed time', () => {
  it('the pattern sees a fixed wait, and a named helper is none', () => {
    // Put together, so this file holds no wait of its own.
    const pause = ['await new Promise((r) => set', 'Timeout(r, 600));'].join('');
    assert.deepEqual(fixedWaits('sample.ts', pause), [`sample.ts:1: ${pause}`]);
    assert.equal(fixedWaits('sample.ts', `await ${'sle'}ep(250);`).length, 1);
    assert.equal(fixedWaits('sample.ts', `import { setTimeout } from 'node:${'timers'}/promises';`).length, 1);
    assert.deepEqual(fixedWaits('sample.ts', "await waitFor(() => done, { what: 'it' });"), []);
    assert.deepEqual(fixedWaits('sample.ts', "run(target, 'sleep 30; echo finished');"), []);
  });

  it('outside the waiting helpers and the fakes’ simulated latency, no file under test/ sets a timer', () => {
    const files = tsFiles(TEST_DIR);
    assert.ok(files.length > 100, `found only ${files.length} files under ${TEST_DIR}`);
    const found = files.flatMap((path) => {
      const file = relative(ROOT, path);
      return TIMER_FILES.has(file) ? [] : fixedWaits(file, readFileSync(path, 'utf8'));
    });
    assert.deepEqual(
      found,
      [],
      'wait on a condition, an event or a barrier (test/helpers/wait.ts), or simulate latency in a fake with test/fakes/simulated-latency.ts',
    );
  });
});
