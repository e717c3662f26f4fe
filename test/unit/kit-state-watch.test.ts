import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';
import { StateWatch } from '../../src/providers/kit/state-watch.js';

describe('StateWatch', () => {
  const setup = () => {
    let t = 1_000_000;
    const lines: string[] = [];
    const logger = createLogger('warn', new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
    const sut = new StateWatch({ providerId: 'acme', logger, now: () => t, boundMs: 60_000 });
    return { sut, lines, advance: (ms: number) => (t += ms) };
  };

  it('passes known states through', () => {
    const { sut, lines } = setup();
    assert.equal(sut.read('i-1', 'running', { kind: 'known', state: 'running' }), 'running');
    assert.equal(lines.length, 0);
  });

  it('reads an unknown state as pending, logs it once with its raw value, and as failed after its own bound', () => {
    const { sut, lines, advance } = setup();
    assert.equal(sut.read('i-1', 'hibernating', { kind: 'unknown' }), 'pending');
    advance(30_000);
    assert.equal(sut.read('i-1', 'hibernating', { kind: 'unknown' }), 'pending');
    assert.equal(lines.length, 1);
    assert.match(lines[0], /"rawState":"hibernating"/);
    advance(30_000);
    assert.equal(sut.read('i-1', 'hibernating', { kind: 'unknown' }), 'failed');
    assert.equal(lines.length, 1, 'logged once');
  });

  it('restarts the timer when a known state comes back, and keeps instances apart', () => {
    const { sut, advance } = setup();
    sut.read('i-1', 'weird', { kind: 'unknown' });
    advance(50_000);
    assert.equal(sut.read('i-1', 'loading', { kind: 'known', state: 'pending' }), 'pending');
    sut.read('i-2', 'weird', { kind: 'unknown' });
    advance(50_000);
    assert.equal(sut.read('i-1', 'weird', { kind: 'unknown' }), 'pending', 'its timer restarted');
    advance(10_000);
    assert.equal(sut.read('i-2', 'weird', { kind: 'unknown' }), 'failed');
  });
});
