import { AppError } from '../errors/app-error.js';
import {
  admissions,
  creditsMoved,
  jobDuration,
  jobLag,
  jobRuns,
  meteringRentalsSwept,
  meteringSweepDuration,
  secondsSince,
  webhookDeliveries,
} from './registry.js';

/**
 * Counts one admission by its outcome: `admitted` (201), `replayed` (an Idempotency-Key seen
 * before), or the refusal's error code (`INTERNAL` for anything that is not an AppError).
 */
export async function countAdmission<T extends { status: number }>(admission: Promise<T>): Promise<T> {
  try {
    const result = await admission;
    admissions.inc({ outcome: result.status === 201 ? 'admitted' : 'replayed' });
    return result;
  } catch (err) {
    admissions.inc({ outcome: err instanceof AppError ? err.code : 'INTERNAL' });
    throw err;
  }
}

/**
 * Counts a ledger posting's credits by entry kind: positive amounts in, negative out. Counted when
 * the entry is written in its transaction, so a transaction rolled back after it (a deadlock
 * victim run again) counts it once more: the series is a rate to watch, the ledger the record.
 */
export function countCredits(kind: string, amountMinor: number): void {
  if (amountMinor === 0) return;
  creditsMoved.inc({ kind, direction: amountMinor > 0 ? 'in' : 'out' }, Math.abs(amountMinor));
}

/** Starts timing a metering sweep; call the answer with the number of rentals it read. */
export function sweepTimer(): (rentalsSwept: number) => void {
  const start = process.hrtime.bigint();
  return (rentalsSwept) => {
    meteringSweepDuration.observe(secondsSince(start));
    meteringRentalsSwept.inc(rentalsSwept);
  };
}

/** Counts one webhook delivery try by its outcome (succeeded, retrying, failed, skipped). */
export function countWebhookDelivery<T extends string>(outcome: T): T {
  webhookDeliveries.inc({ outcome });
  return outcome;
}

/** Runs one job, counting and timing it by name and outcome (success, or failure when it throws). */
export async function timedJobRun(job: string, run: () => Promise<void>): Promise<void> {
  const start = process.hrtime.bigint();
  let outcome = 'failure';
  try {
    await run();
    outcome = 'success';
  } finally {
    jobRuns.inc({ job_name: job, outcome });
    jobDuration.observe({ job_name: job, outcome }, secondsSince(start));
  }
}

/** Records how late a claimed job started: the claim's time minus the time it was due (0 when early). */
export function observeJobLag(job: string, dueAt: Date | undefined | null, claimedAt: Date): void {
  if (!dueAt) return;
  jobLag.observe({ job_name: job }, Math.max(0, claimedAt.getTime() - dueAt.getTime()) / 1000);
}
