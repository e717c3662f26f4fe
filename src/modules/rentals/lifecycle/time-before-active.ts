import type { LedgerService } from '../../billing/ledger.service.js';
import type { Deployment } from '../store/deployment.entity.js';
import type { Order } from '../store/order.entity.js';
import type { MachineCheck } from './machine-check.js';
import { accrual, usagePosting, type UsagePost, type UsageRepos } from './metering.js';

// A machine's time before ACTIVE (docs/rentals-and-money.md, Time before ACTIVE). The check that
// makes a rental ACTIVE runs on a machine its renter controls: a startup script running as root
// can keep it failing (delete the startup marker, hide the GPUs) while the machine works for its
// renter. So the time of a machine that ran the rental's own settings is charged from the first
// moment the check got in with the rental's key (`usable_at`), whether the check passes or not.

/** Whether a check got in with the rental's key: whatever it then found, the machine answered. */
export function answered(check: MachineCheck): boolean {
  return (
    check.kind === 'gpu_mismatch' ||
    check.kind === 'misbehaved' ||
    (check.kind === 'not_yet' && check.phase !== 'waiting_for_ssh')
  );
}

/**
 * Whether the rental runs code of its own on the machine before ACTIVE: a startup script, or an
 * image (its entrypoint). A machine given neither runs nothing of its renter's before ACTIVE
 * (variables alone run nothing, and the renter has no credentials until then), so its time before
 * ACTIVE is never charged: a machine the cloud got wrong costs an honest renter nothing.
 */
export function runsRentersSettings(order: Pick<Order, 'startupScriptSha256' | 'machineImage'>): boolean {
  return order.startupScriptSha256 !== null || order.machineImage !== null;
}

/** Failure reasons of a rental whose machine worked for its renter but never passed the check: its time is charged. */
export const WORKED_BUT_UNCHECKED_REASON = {
  timeout:
    "The machine ran your rental's settings and let the service's check in, but never passed it in time (the startup marker or the GPUs were missing, or the check was held up); its time from the check's first login was charged.",
  stopped:
    "The machine stopped after it ran your rental's settings and let the service's check in, before it passed the check; its time from the check's first login was charged.",
} as const;

/**
 * THE price of a machine's time before ACTIVE: from `usableAt` to `untilMs` (cut at the rental's
 * termination request, see `chargeEnd`), priced as {@link accrual} prices ACTIVE time, at the
 * rental's price and within its cap. Null for a rental whose machine never worked for its renter.
 */
export function timeBeforeActive(
  d: Pick<Deployment, 'usableAt' | 'hourlyPriceMinor' | 'spendCapMinor' | 'endsAt' | 'terminateRequestedAt'>,
  untilMs: number,
): UsagePost | null {
  if (!d.usableAt) return null;
  const fromMs = d.usableAt.getTime();
  const x = accrual(
    { ...d, startedAt: d.usableAt, usageMinor: 0, meteredUntil: d.usableAt },
    Math.max(fromMs, untilMs),
  );
  return { amount: x.amount, fromMs, toMs: x.untilMs };
}

/**
 * Posts a metered rental's machine time before ACTIVE ({@link timeBeforeActive}, up to `untilMs`)
 * as one USAGE entry in the caller's transaction. Its reference (`usage:<deployment>:<end ms>`)
 * ends at or before ACTIVE, where no hourly or settlement entry of the rental can end, and makes
 * a repeat a no-op. Answers what it charged, or null when there was no such time.
 */
export async function postTimeBeforeActive(
  ledger: LedgerService,
  r: Pick<UsageRepos, 'ledger' | 'accounts'>,
  d: Deployment,
  untilMs: number,
): Promise<UsagePost | null> {
  const post = timeBeforeActive(d, untilMs);
  if (post && post.amount > 0) await ledger.post(r, usagePosting(d, post, "before it passed the service's check"));
  return post;
}

/**
 * Charges a metered rental that never ran ACTIVE for its machine's time, in the caller's
 * transaction, which holds the deployment's lock: one USAGE entry ({@link postTimeBeforeActive}),
 * and the rental's `usageMinor` shows it. Used as the rental ends (FAILED, or TERMINATED before
 * ACTIVE); a second call finds it charged. Returns the cents charged.
 */
export async function chargeTimeBeforeActive(
  ledger: LedgerService,
  r: UsageRepos,
  d: Deployment,
  untilMs: number,
  at: Date,
): Promise<number> {
  if (d.startedAt || d.postedUsageMinor > 0) return 0;
  const post = await postTimeBeforeActive(ledger, r, d, untilMs);
  if (!post) return 0;
  const until = new Date(post.toMs);
  await r.rentals.deployments.setMeteredUsage(
    d.id,
    { usageMinor: post.amount, meteredUntil: until, postedUsageMinor: post.amount, postedUntil: until },
    at,
  );
  return post.amount;
}
