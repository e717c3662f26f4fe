import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';
import type { DriftSighting } from '../../src/providers/kit/drift.js';
import { StateWatch } from '../../src/providers/kit/state-watch.js';

describe('StateWatch', () => {
  const setup = () => {
    let t = 1_000_000;
    const lines: string[] = [];
    const sightings: DriftSighting[] = [];
    const logger = createLogger('warn', new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
    const drift = { record: (s: DriftSighting) => void sightings.push(s) };
    const sut = new StateWatch({
      providerId: 'acme',
      logger,
      drift,
      where: 'thing status',
      now: () => t,
      boundMs: 60_000,
    });
    return { sut, lines, sightings, advance: (ms: number) => (t += ms) };
  };

  it('passes known states through', () => {
    const { sut, lines, sightings } = setup();
    assert.equal(sut.read('i-1', 'running', { kind: 'known', state: 'running' }), 'running');
    assert.equal(lines.length, 0);
    assert.deepEqual(sightings, [], 'a known state is no drift');
  });

  it('reports every unknown reading to the drift report, with the raw name only when it is name-like', () => {
    const { sut, sightings } = setup();
    sut.read('i-1', 'hibernating', { kind: 'unknown' });
    sut.read('i-1', 'hibernating', { kind: 'unknown' });
    sut.read('i-2', 'moved to 10.1.2.3', { kind: 'unknown' });
    assert.deepEqual(sightings, [
      { provider: 'acme', kind: 'unknown_state', where: 'thing status', shape: { state: 'hibernating' } },
      { provider: 'acme', kind: 'unknown_state', where: 'thing status', shape: { state: 'hibernating' } },
      {
        provider: 'acme',
        kind: 'unknown_state',
        where: 'thing status',
        shape: { state: '(not a name: 17 characters)' },
      },
    ]);
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
