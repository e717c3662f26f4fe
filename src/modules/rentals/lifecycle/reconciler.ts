import type { InstanceInfo } from '../../../providers/provider.js';
import { ProviderFailureLog } from '../../../providers/provider-failures.js';
import { DRIVEN_STATUSES, LIVE_STATUSES, type TerminationReason } from '../state/rental-status.js';
import { LABEL_PREFIX } from './labels.js';
import { CLEANUP_PENDING, releaseAfterDestroyed } from './termination.js';
import { enqueueFor, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';

/**
 * The safety net under the lifecycle jobs: destroys labelled instances no live deployment owns,
 * re-drives deployments a lost job left waiting, retries reversals, and ends rentals past their end.
 */
export class Reconciler {
  /** A cloud the reconciler cannot list, every minute: its stack once, then one line a run. */
  private readonly listFailures: ProviderFailureLog;

  constructor(
    private readonly deps: Pick<LifecycleDeps, 'store' | 'clock' | 'logger' | 'providers' | 'jobs'>,
    private readonly timing: LifecycleTiming,
    private readonly requestTermination: (deploymentId: string, reason: TerminationReason) => Promise<void>,
  ) {
    this.listFailures = new ProviderFailureLog(deps.logger);
  }

  async reconcile(): Promise<{ destroyed: string[]; redriven: string[] }> {
    const destroyed = await this.destroyOrphans();
    const { store, clock, jobs } = this.deps;
    const cutoff = new Date(clock.now().getTime() - this.timing.stuckAfterMs);
    const stuck = await store.read((r) => r.rentals.deployments.unchangedSince(DRIVEN_STATUSES, cutoff));
    for (const d of stuck)
      await enqueueFor(jobs, d.status === 'TERMINATING' ? 'rental.terminate' : 'rental.provision', d.id);
    // A reversal left PENDING (a refund the payment provider refused for the moment) is retried;
    // the provision job of a FAILED deployment only settles its reversal.
    const unsettled = await store.read((r) => r.rentals.deployments.failedWithReversalPending(cutoff));
    for (const id of unsettled) await enqueueFor(jobs, 'rental.provision', id);
    // Backstop for the one-off expiry job: if it was lost (a crash between ACTIVE and scheduling
    // it), a rental would otherwise run past what was bought or past its lease.
    const overdue = await store.read((r) => r.rentals.deployments.overdue(clock.now()));
    for (const id of overdue) await this.requestTermination(id, 'EXPIRED');
    await this.retryCleanups();
    return { destroyed, redriven: [...stuck.map((d) => d.id), ...unsettled, ...overdue] };
  }

  /** Plugin clean-up that failed after a verified destruction, called again until it succeeds. */
  private async retryCleanups(): Promise<void> {
    const { store, logger, providers } = this.deps;
    const pending = await store.read((r) => r.rentals.deployments.terminatedWithDetailPrefix(CLEANUP_PENDING));
    for (const d of pending) {
      const provider = providers.all().find((p) => p.id === d.providerId);
      if (!provider) continue;
      const failed = await releaseAfterDestroyed(logger, provider, d.id, d.label);
      if (!failed)
        await store.read((r) =>
          r.rentals.deployments.setLastCheckDetail(d.id, 'provider clean-up done after a verified destruction'),
        );
    }
  }

  private async destroyOrphans(): Promise<string[]> {
    const { store, logger, providers } = this.deps;
    const destroyed: string[] = [];
    for (const provider of providers.all()) {
      if (!provider.capabilities.listInstances) continue;
      let instances: InstanceInfo[];
      try {
        instances = await provider.listInstances();
      } catch (err) {
        this.listFailures.failed(provider.id, 'reconciler listing instances', err);
        continue;
      }
      this.listFailures.succeeded(provider.id, 'reconciler listing instances');
      const ours = instances.filter((i) => i.label.startsWith(LABEL_PREFIX));
      if (ours.length === 0) continue;
      const keep = await store.read((r) =>
        r.rentals.attempts.labelsIn(
          ours.map((i) => i.label),
          LIVE_STATUSES,
        ),
      );
      // The listing is the status poll of every running instance: it carries their traffic counters.
      const readings = ours
        .filter((i) => keep.has(i.label) && i.traffic)
        .map((i) => ({ label: i.label, upBytes: i.traffic!.upBytes, downBytes: i.traffic!.downBytes }));
      if (readings.length > 0)
        await store.read((r) => r.rentals.metering.recordTraffic(readings, this.deps.clock.now()));
      for (const i of ours) {
        if (keep.has(i.label)) continue;
        try {
          await provider.destroy(i.instanceId);
          destroyed.push(i.instanceId);
          logger.warn(
            { provider: provider.id, instanceId: i.instanceId, label: i.label },
            'reconciler destroyed an orphaned instance',
          );
        } catch (err) {
          logger.error({ err, instanceId: i.instanceId }, 'reconciler could not destroy an orphaned instance');
        }
      }
    }
    return destroyed;
  }
}
