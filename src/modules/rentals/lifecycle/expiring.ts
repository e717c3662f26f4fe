import { recordRentalEvent } from '../state/rental-events.js';
import { enqueueFor, type LifecycleDeps } from './lifecycle-deps.js';

/** How long before its end a rental says it is about to end (or half its whole run, when that is shorter). */
export const EXPIRING_LEAD_MS = 10 * 60_000;

/** When `rental.expiring` is due for a rental running from `startedAt` to `endsAt`. */
export function expiringAt(startedAt: Date, endsAt: Date): Date {
  const lead = Math.min(EXPIRING_LEAD_MS, Math.floor((endsAt.getTime() - startedAt.getTime()) / 2));
  return new Date(endsAt.getTime() - lead);
}

/**
 * `rental.expiring`, written once per rental with an end (a prepaid purchase, a lease), before
 * that end: a one-off job queued when the rental becomes ACTIVE, and the reconciler's sweep as the
 * backstop for a job lost to a crash.
 */
export class Expiring {
  constructor(private readonly deps: Pick<LifecycleDeps, 'store' | 'clock' | 'jobs'>) {}

  /** Queues the notice of a rental that has just become ACTIVE with an end. */
  schedule(deploymentId: string, startedAt: Date, endsAt: Date): Promise<void> {
    return enqueueFor(
      this.deps.jobs,
      'rental.expiring',
      deploymentId,
      Math.max(0, expiringAt(startedAt, endsAt).getTime() - this.deps.clock.now().getTime()),
    );
  }

  /** The job: writes the notice when due (once, while ACTIVE and before the end); early, it waits again. */
  async notice(deploymentId: string): Promise<void> {
    const d = await this.deps.store.read((r) => r.rentals.deployments.find(deploymentId));
    if (!d || d.status !== 'ACTIVE' || !d.endsAt || !d.startedAt) return;
    const now = this.deps.clock.now();
    if (now.getTime() >= d.endsAt.getTime()) return;
    const due = expiringAt(d.startedAt, d.endsAt).getTime() - now.getTime();
    if (due > 0) return enqueueFor(this.deps.jobs, 'rental.expiring', deploymentId, due);
    await this.deps.store.transaction(async (r) => {
      if (await r.rentals.expiring.claim(deploymentId, now))
        await recordRentalEvent(r, deploymentId, 'rental.expiring', now);
    });
  }

  /** The backstop: every rental whose notice is due and missing gets it. */
  async backstop(): Promise<string[]> {
    const now = this.deps.clock.now();
    const horizon = new Date(now.getTime() + EXPIRING_LEAD_MS);
    const rows = await this.deps.store.read((r) => r.rentals.expiring.unnoticed(now, horizon));
    const due = rows.filter((r) => expiringAt(r.startedAt, r.endsAt).getTime() <= now.getTime()).map((r) => r.id);
    for (const id of due) await this.notice(id);
    return due;
  }
}
