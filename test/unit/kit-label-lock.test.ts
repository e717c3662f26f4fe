import assert from 'node:assert/strict';
import { LabelLock } from '../../src/providers/kit/label-lock.js';
import { deferred, waitFor } from '../helpers/wait.js';

describe('kit: label lock', () => {
  it('runs work for one label one at a time, in order, and other labels alongside', async () => {
    const lock = new LabelLock();
    const events: string[] = [];
    // Each job holds until the test lets it finish.
    const gates = { a1: deferred(), a2: deferred(), b1: deferred() };
    const job = (name: keyof typeof gates) => async () => {
      events.push(`start ${name}`);
      await gates[name].promise;
      events.push(`end ${name}`);
      return name;
    };
    const results = Promise.all([lock.run('a', job('a1')), lock.run('a', job('a2')), lock.run('b', job('b1'))]);
    // b1, asked for after a2, has started while a1 holds its label: a2 has not.
    await waitFor(() => events.includes('start b1'), { what: 'b1 to start' });
    assert.deepEqual(events, ['start a1', 'start b1'], 'another label does not wait; the same label does');
    gates.a1.resolve();
    await waitFor(() => events.includes('start a2'), { what: 'a2 to start once a1 has ended' });
    assert.deepEqual(events, ['start a1', 'start b1', 'end a1', 'start a2']);
    gates.a2.resolve();
    gates.b1.resolve();
    assert.deepEqual(await results, ['a1', 'a2', 'b1']);
    assert.equal(lock.size, 0);
  });

  it('a failure of the first call does not fail the next one for the label', async () => {
    const lock = new LabelLock();
    const gate = deferred();
    const first = lock.run('a', async () => {
      await gate.promise;
      throw new Error('boom');
    });
    const second = lock.run('a', async () => 'ok');
    gate.resolve();
    await assert.rejects(first, /boom/);
    assert.equal(await second, 'ok');
  });
});
