import assert from 'node:assert/strict';
import { LabelLock } from '../../src/providers/kit/label-lock.js';

const tick = () => new Promise((r) => setTimeout(r, 5));

describe('kit: label lock', () => {
  it('runs work for one label one at a time, in order, and other labels alongside', async () => {
    const lock = new LabelLock();
    const events: string[] = [];
    const job = (name: string) => async () => {
      events.push(`start ${name}`);
      await tick();
      events.push(`end ${name}`);
      return name;
    };
    const results = await Promise.all([lock.run('a', job('a1')), lock.run('a', job('a2')), lock.run('b', job('b1'))]);
    assert.deepEqual(results, ['a1', 'a2', 'b1']);
    assert.ok(events.indexOf('end a1') < events.indexOf('start a2'), events.join(', '));
    assert.ok(events.indexOf('start b1') < events.indexOf('end a1'), 'another label does not wait');
    assert.equal(lock.size, 0);
  });

  it('a failure of the first call does not fail the next one for the label', async () => {
    const lock = new LabelLock();
    const first = lock.run('a', async () => {
      await tick();
      throw new Error('boom');
    });
    const second = lock.run('a', async () => 'ok');
    await assert.rejects(first, /boom/);
    assert.equal(await second, 'ok');
  });
});
