import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { settledWithin, waitFor } from '../helpers/wait.js';

/** True while `pid` runs (a zombie waiting for its reaper no longer does). */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Starts the miniature bench in `mode`, optionally sends it `signal` once its child runs, and
 * reports how it ended, its stderr, and its child's pid. Resolves only when every holder of the
 * bench's output pipes has let go: a child left running would keep them open, as the bug did.
 */
async function runMiniBench(mode: string, signal?: NodeJS.Signals) {
  const bench = spawn(process.execPath, ['--import', 'tsx', 'test/tooling/fixtures/bench-parent.ts', mode], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  bench.stdout.on('data', (d) => (out += d));
  bench.stderr.on('data', (d) => (err += d));
  const closed = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    bench.on('close', (code, sig) => resolve([code, sig])),
  );
  const childPid = await waitFor(
    async () =>
      Number(/child (\d+)/.exec(out)?.[1]) || (bench.exitCode !== null ? Promise.reject(new Error(err)) : undefined),
    { what: 'the bench to start its child' },
  );
  if (signal) bench.kill(signal);
  const ended = (await settledWithin(closed, 15_000))?.value ?? 'open';
  const childRunning = running(childPid);
  if (childRunning) process.kill(childPid, 'SIGKILL');
  if (ended === 'open') bench.kill('SIGKILL');
  return { ended, err, childPid, childRunning };
}

describe('benches end their child processes and worker threads (bench/processes.ts)', function () {
  this.timeout(60_000);

  it('when the bench finishes', async () => {
    const r = await runMiniBench('exit');
    assert.deepEqual(r.ended, [0, null], r.err);
    assert.equal(r.childRunning, false);
  });

  it('when the bench fails, exiting 1 with the error', async () => {
    const r = await runMiniBench('fail');
    assert.deepEqual(r.ended, [1, null], r.err);
    assert.match(r.err, /the bench failed/);
    assert.equal(r.childRunning, false);
  });

  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    it(`on ${signal}, exiting ${code}`, async () => {
      const r = await runMiniBench('wait', signal);
      assert.deepEqual(r.ended, [code, null], r.err);
      assert.match(r.err, new RegExp(`bench: ${signal}, ending 1 child process\\(es\\) and 1 worker thread\\(s\\)`));
      assert.equal(r.childRunning, false);
    });
  }

  it('when the bench is killed outright, the child notices and exits', async () => {
    const r = await runMiniBench('wait', 'SIGKILL');
    assert.notEqual(r.ended, 'open', 'the output pipes stayed open');
    assert.equal(r.childRunning, false);
  });
});
