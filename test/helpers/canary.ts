import type { CanaryOptions, CanarySignals } from '../../src/modules/canary/canary-deps.js';
import type { CanaryPhase, CanaryReport } from '../../src/modules/canary/canary-report.js';
import { runCanary } from '../../src/modules/canary/canary.service.js';
import type { TestContext } from './context.js';
import { waitFor } from './wait.js';

/** How a test drives a canary: what it asks, how it stops it, what it does at each phase, how the clock moves. */
export interface CanaryDrive {
  options: Partial<CanaryOptions> & Pick<CanaryOptions, 'provider'>;
  signals?: CanarySignals;
  /** Called at each phase as the canary says it, before the canary goes on. */
  onPhase?: (p: CanaryPhase) => void;
  /** Whether the test clock may move now (default: always); a machine booting on it waits while it stands. */
  clockMoves?: () => Promise<boolean>;
  /** How far the clock moves at each look (default 200 ms). */
  stepMs?: number;
}

/**
 * Runs the canary on `ctx`'s services (the test's worker runs the jobs) to its end, moving the test
 * clock as it goes (machines and timeouts follow it); answers its report and the phases it said.
 */
export async function driveCanary(
  ctx: TestContext,
  drive: CanaryDrive,
): Promise<{ report: CanaryReport; said: CanaryPhase[] }> {
  const said: CanaryPhase[] = [];
  let ended: { report?: CanaryReport; error?: unknown } | undefined;
  const run = runCanary(
    { ...ctx.services, machinePolicy: ctx.config.machines },
    { maxSpendMinor: 500, gpu: null, timeoutMs: 20 * 60_000, pollMs: 20, ...drive.options },
    drive.signals ?? {},
    (p) => {
      said.push(p);
      drive.onPhase?.(p);
    },
  );
  run.then(
    (report) => (ended = { report }),
    (error) => (ended = { error }),
  );
  await waitFor(
    async () => {
      if (!ended && (await (drive.clockMoves ?? (async () => true))())) ctx.clock.advance(drive.stepMs ?? 200);
      return ended;
    },
    { timeoutMs: 90_000, intervalMs: 20, what: () => `the canary to end (last: ${said.at(-1)?.detail})` },
  );
  return { report: await run, said };
}
