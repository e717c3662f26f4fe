import type { InstanceInfo } from '../../../providers/provider.js';
import { DRIVEN_STATUSES, LIVE_STATUSES, type RentalStatus, type TerminationReason } from '../rental-status.js';
import { Deployment } from '../deployment.entity.js';
import { LABEL_PREFIX } from './labels.js';
import { CLEANUP_PENDING, releaseAfterDestroyed } from './termination.js';
import { enqueueFor, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';

/**
 * The safety net under the lifecycle jobs: destroys labelled instances no live deployment owns,
 * re-drives deployments a lost job left waiting, retries reversals, and ends overdue legacy rentals.
 */
export class Reconciler {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'ds' | 'clock' | 'logger' | 'providers' | 'jobs'>,
    private readonly timing: LifecycleTiming,
    private readonly requestTermination: (deploymentId: string, reason: TerminationReason) => Promise<void>,
  ) {}

  async reconcile(): Promise<{ destroyed: string[]; redriven: string[] }> {
    const destroyed = await this.destroyOrphans();
    const { ds, clock, jobs } = this.deps;
    const cutoff = new Date(clock.now().getTime() - this.timing.stuckAfterMs);
    // A row whose status change was never stamped counts from its last update.
    const stuck: { id: string; status: RentalStatus }[] = await ds.query(
      `SELECT id, status FROM deployments WHERE status IN (?) AND COALESCE(status_changed_at, updated_at) < ?`,
      [DRIVEN_STATUSES, cutoff],
    );
    for (const d of stuck) await enqueueFor(jobs, d.status === 'TERMINATING' ? 'rental.terminate' : 'rental.provision', d.id);
    // A reversal left PENDING (a refund the payment provider refused for the moment) is retried;
    // the provision job of a FAILED deployment only settles its reversal.
    const unsettled: { id: string }[] = await ds.query(
      `SELECT d.id FROM deployments d JOIN orders o ON o.id = d.order_id
        WHERE d.status = 'FAILED' AND o.reversal_status = 'PENDING' AND COALESCE(d.status_changed_at, d.updated_at) < ?`,
      [cutoff],
    );
    for (const d of unsettled) await enqueueFor(jobs, 'rental.provision', d.id);
    // Backstop for the one-off expiry job: if it was lost (a crash between ACTIVE and scheduling
    // it), a paid-up legacy rental would otherwise run past what was bought.
    const overdue: { id: string }[] = await ds.query(
      `SELECT id FROM deployments WHERE status = 'ACTIVE' AND billing_model = 'LEGACY_PREPAID' AND ends_at IS NOT NULL AND ends_at <= ?`,
      [clock.now()],
    );
    for (const d of overdue) await this.requestTermination(d.id, 'EXPIRED');
    await this.retryCleanups();
    return { destroyed, redriven: [...stuck, ...unsettled, ...overdue].map((d) => d.id) };
  }

  /** Plugin clean-up that failed after a verified destruction, called again until it succeeds. */
  private async retryCleanups(): Promise<void> {
    const { ds, logger, providers } = this.deps;
    const pending: { id: string; label: string | null; provider_id: string | null }[] = await ds.query(
      `SELECT id, label, provider_id FROM deployments WHERE status = 'TERMINATED' AND last_check_detail LIKE ?`,
      [`${CLEANUP_PENDING}%`],
    );
    for (const d of pending) {
      const provider = providers.all().find((p) => p.id === d.provider_id);
      if (!provider) continue;
      const failed = await releaseAfterDestroyed(logger, provider, d.id, d.label);
      if (!failed) await ds.getRepository(Deployment).update({ id: d.id }, { lastCheckDetail: 'provider clean-up done after a verified destruction' });
    }
  }

  private async destroyOrphans(): Promise<string[]> {
    const { ds, logger, providers } = this.deps;
    const destroyed: string[] = [];
    for (const provider of providers.all()) {
      if (!provider.capabilities.listInstances) continue;
      let instances: InstanceInfo[];
      try {
        instances = await provider.listInstances();
      } catch (err) {
        logger.warn({ err, provider: provider.id }, 'reconciler could not list instances');
        continue;
      }
      const ours = instances.filter((i) => i.label.startsWith(LABEL_PREFIX));
      if (ours.length === 0) continue;
      const live: { label: string }[] = await ds.query(
        `SELECT a.label FROM deployment_attempts a JOIN deployments d ON d.id = a.deployment_id
          WHERE a.label IN (?) AND d.status IN (?)`,
        [ours.map((i) => i.label), LIVE_STATUSES],
      );
      const keep = new Set(live.map((r) => r.label));
      for (const i of ours) {
        if (keep.has(i.label)) continue;
        try {
          await provider.destroy(i.instanceId);
          destroyed.push(i.instanceId);
          logger.warn({ provider: provider.id, instanceId: i.instanceId, label: i.label }, 'reconciler destroyed an orphaned instance');
        } catch (err) {
          logger.error({ err, instanceId: i.instanceId }, 'reconciler could not destroy an orphaned instance');
        }
      }
    }
    return destroyed;
  }
}
