import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { DriftLog, type DriftSink, type DriftTally } from '../../src/providers/drift-log.js';
import type { DriftSighting } from '../../src/providers/kit/drift.js';
import { memoryStore } from '../fakes/store/memory-repositories.js';

const sighting = (state: string, provider = 'acme'): DriftSighting => ({
  provider,
  kind: 'unknown_state',
  where: 'pod status',
  shape: { state },
});

describe(DriftLog.name, () => {
  const setup = (o: { max?: number } = {}) => {
    const lines: string[] = [];
    const logger = createLogger('warn', new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
    const clock = new ManualClock(new Date('2026-11-20T12:00:00Z'));
    const store = memoryStore();
    // Writes wait for the test's own flush: a delay no test reaches.
    const sut = new DriftLog({ logger, now: () => clock.now(), maxShapesPerProvider: o.max, flushDelayMs: 3_600_000 });
    const toStore: DriftSink = (batch, max) => store.read((r) => r.providerDrift.record(batch, max));
    const stored = () => store.read((r) => r.providerDrift.list());
    return { sut, lines, clock, store, toStore, stored };
  };

  it('keeps each shape once, counting its sightings, and writes the counts that came in since the last write', async () => {
    const { sut, clock, toStore, stored } = setup();
    sut.attach(toStore);
    sut.record(sighting('hibernating'));
    clock.advance(1000);
    sut.record(sighting('hibernating'));
    await sut.flush();
    clock.advance(1000);
    sut.record(sighting('hibernating'));
    await sut.flush();
    await sut.flush();
    const rows = await stored();
    assert.equal(rows.length, 1);
    assert.equal(rows[0].seen, 3);
    assert.deepEqual(rows[0].firstSeenAt, new Date('2026-11-20T12:00:00Z'));
    assert.deepEqual(rows[0].lastSeenAt, new Date('2026-11-20T12:00:02Z'));
    assert.deepEqual(
      sut.seen().map((t) => [t.shape, t.seen]),
      [[{ state: 'hibernating' }, 3]],
    );
  });

  it('counts before a store is attached, and writes what it holds once one is', async () => {
    const { sut, toStore, stored } = setup();
    sut.record(sighting('a'));
    sut.record(sighting('a'));
    await sut.flush();
    assert.deepEqual(await stored(), [], 'nothing to write to yet');
    sut.attach(toStore);
    await sut.flush();
    assert.deepEqual(
      (await stored()).map((r) => r.seen),
      [2],
    );
  });

  it('logs a failed write, keeps its counts, and writes them with the next', async () => {
    const { sut, lines, toStore, stored } = setup();
    let down = true;
    sut.attach((batch, max) => (down ? Promise.reject(new Error('connection refused')) : toStore(batch, max)));
    sut.record(sighting('a'));
    await sut.flush();
    assert.ok(lines.some((l) => /could not write the drift report/.test(l) && /connection refused/.test(l)));
    sut.record(sighting('a'));
    down = false;
    await sut.flush();
    assert.deepEqual(
      (await stored()).map((r) => r.seen),
      [2],
    );
  });

  it('never throws from record, even when the shape cannot be read', () => {
    const { sut } = setup();
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    assert.doesNotThrow(() => sut.record({ ...sighting('x'), shape: circular as never }));
  });

  it('keeps at most its bound of shapes per provider: the rest are counted as dropped, and logged once', async () => {
    const { sut, lines, toStore, stored } = setup({ max: 2 });
    sut.attach(toStore);
    for (const s of ['a', 'b', 'c', 'd']) sut.record(sighting(s));
    sut.record(sighting('a'));
    sut.record(sighting('z', 'other'));
    await sut.flush();
    assert.equal(sut.dropped, 2);
    assert.equal(lines.filter((l) => /holds as many shapes of this provider/.test(l)).length, 1);
    assert.deepEqual(
      (await stored())
        .map((r) => [r.provider, r.shape, r.seen])
        .sort((x, y) => (JSON.stringify(x) < JSON.stringify(y) ? -1 : 1)),
      [
        ['acme', { state: 'a' }, 2],
        ['acme', { state: 'b' }, 1],
        ['other', { state: 'z' }, 1],
      ],
    );
  });

  it('logs a new shape once, with the shape and never a value', () => {
    const { sut, lines } = setup();
    sut.record({ provider: 'acme', kind: 'unknown_field_shape', where: 'GET /v2/pods/{id}', shape: { id: 'string' } });
    sut.record({ provider: 'acme', kind: 'unknown_field_shape', where: 'GET /v2/pods/{id}', shape: { id: 'string' } });
    const logged = lines.filter((l) => /drift report/.test(l));
    assert.equal(logged.length, 1);
    assert.match(logged[0], /"shape":"\{id:string\}"/);
  });

  it('writes what it holds when closed, and schedules nothing after', async () => {
    const { sut, toStore, stored } = setup();
    const batches: readonly DriftTally[][] = [];
    sut.attach((batch, max) => ((batches as DriftTally[][]).push([...batch]), toStore(batch, max)));
    sut.record(sighting('late'));
    await sut.close();
    assert.equal(batches.length, 1);
    assert.equal((await stored()).length, 1);
  });
});
