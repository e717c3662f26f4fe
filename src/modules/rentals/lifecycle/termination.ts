import type { DestructionEvidence, DestructionVerifier } from '../../../providers/destruction-verifier.js';
import type { InstanceInfo, Provider } from '../../../providers/provider.js';
import type { SshTarget } from '../../../providers/ssh-probe.js';
import type { Deployment } from '../store/deployment.entity.js';
import { isOneOf, METERED_BILLING_MODELS, TERMINAL_STATUSES, type TerminationReason } from '../state/rental-status.js';
import { requestTermination, transition } from '../state/rental-state.js';
import type { Reversal } from './reversal.js';
import { sshEndpointProblem } from '../../../providers/ssh-endpoint.js';
import { enqueueFor, type LifecycleDeps, type LifecycleTiming } from './lifecycle-deps.js';
import type { Metering } from './metering.js';
import { chargeTimeBeforeActive } from './time-before-active.js';
import { trafficPriceOf } from './traffic.js';

/** `last_check_detail` of a TERMINATED deployment whose plugin clean-up must be retried (the reconciler does). */
export const CLEANUP_PENDING = 'provider clean-up pending: ';

/**
 * Lets the plugin release what it holds for a verified-destroyed instance (e.g. a registered SSH
 * key). A failure is logged and never holds up TERMINATED: the detail it returns marks the
 * deployment for the reconciler to call again (plugins take the call as idempotent).
 */
export async function releaseAfterDestroyed(
  logger: LifecycleDeps['logger'],
  provider: Provider,
  deploymentId: string,
  label: string | null,
): Promise<string | null> {
  if (!provider.afterDestroyed || !label) return null;
  try {
    await provider.afterDestroyed(label);
    return null;
  } catch (err) {
    logger.warn(
      { err, deploymentId, provider: provider.id },
      'provider clean-up after a verified destruction failed; the reconciler retries',
    );
    return `${CLEANUP_PENDING}${(err as Error).message}`;
  }
}

/**
 * Termination with verified destruction: the instance is destroyed, and the deployment becomes
 * TERMINATED only once the provider reports it gone and an SSH probe no longer gets in. Until
 * then the job retries with back-off and, past a count, alerts on every attempt.
 */
export class Termination {
  constructor(
    private readonly deps: Pick<
      LifecycleDeps,
      'store' | 'clock' | 'logger' | 'providers' | 'jobs' | 'box' | 'refunds' | 'ledger' | 'receipts'
    >,
    private readonly timing: LifecycleTiming,
    private readonly verifier: DestructionVerifier,
    private readonly metering: Pick<Metering, 'settleUsage'>,
    private readonly reversal: Pick<Reversal, 'settle'>,
  ) {}

  private now(): Date {
    return this.deps.clock.now();
  }

  private find(deploymentId: string): Promise<Deployment | null> {
    return this.deps.store.read((r) => r.rentals.deployments.find(deploymentId));
  }

  /** Starts termination for `reason` (idempotent) and queues the terminate job. */
  async request(deploymentId: string, reason: TerminationReason): Promise<void> {
    await this.deps.store.transaction((r) => requestTermination(r, deploymentId, reason, this.now()));
    await enqueueFor(this.deps.jobs, 'rental.terminate', deploymentId);
  }

  /** Rentals with an end (a prepaid purchase, or a lease on any billing model) end themselves at endsAt. */
  async expire(deploymentId: string): Promise<void> {
    const d = await this.find(deploymentId);
    if (!d || d.status !== 'ACTIVE' || !d.endsAt) return;
    const left = d.endsAt.getTime() - this.now().getTime();
    if (left > 0) return enqueueFor(this.deps.jobs, 'rental.expire', deploymentId, left);
    await this.request(deploymentId, 'EXPIRED');
  }

  async terminate(deploymentId: string): Promise<void> {
    const { store, providers } = this.deps;
    let d = await this.find(deploymentId);
    if (!d || isOneOf(TERMINAL_STATUSES, d.status)) return;
    if (d.status !== 'TERMINATING') {
      if (!d.terminateRequestedAt) return;
      await this.request(d.id, d.terminationReason ?? 'REQUESTED');
      d = (await this.find(d.id))!;
      if (d.status !== 'TERMINATING') return;
    }
    let instanceId = d.instanceId;
    const provider: Provider | null = d.providerId ? providers.get(d.providerId) : null;
    if (!instanceId && d.label && provider) {
      // A create may have happened without its answer being recorded.
      const a = await store.read((r) => r.rentals.attempts.last(deploymentId));
      const found = await providers.get(a?.providerId ?? d.providerId!).findByLabel(d.label);
      if (found) {
        instanceId = found.instanceId;
        await store.read((r) => r.rentals.deployments.recordInstance(deploymentId, found.instanceId, this.now()));
      } else if (a?.outcome === 'STARTED') {
        // The provision job is (or was) mid-call; look again shortly rather than miss its instance.
        return this.retryVerify(d, 'create call of the last attempt has no recorded outcome yet');
      }
    }
    if (!instanceId || !provider) return this.markTerminated(d);

    let target = this.target(d);
    // Ended before ACTIVE: ask for the address while the instance still exists, so the probe after
    // the destroy knocks on the door the machine really had.
    const needsAddress = !target && Boolean(d.sshPrivateKeyEnc);
    // A rental that pays its traffic takes a last reading of the counters before they are gone.
    const readsTraffic = trafficPriceOf(d) !== null && d.label !== null;
    let info: InstanceInfo | null = null;
    if (needsAddress || readsTraffic) {
      try {
        info = await provider.get(instanceId);
      } catch (err) {
        if (needsAddress)
          return this.retryVerify(d, `reading the instance before destroying it failed: ${(err as Error).message}`);
        // A prompt destroy is worth more than the last reading: the latest status poll's stands.
        this.deps.logger.warn(
          { deploymentId, err: (err as Error).message },
          'could not read traffic counters before destroying; the last poll reading is charged',
        );
      }
    }
    if (readsTraffic && info?.traffic) {
      const reading = { label: d.label!, ...info.traffic };
      await store.read((r) => r.rentals.metering.recordTraffic([reading], this.now()));
    }
    if (needsAddress && info) {
      // An endpoint no agent could have been given is nobody's way in; the provider's word decides.
      if (info.ssh && !sshEndpointProblem(info.ssh)) {
        const ssh = info.ssh;
        await store.read((r) => r.rentals.deployments.recordSshAddress(deploymentId, ssh));
        target = this.target(d, info.ssh);
      }
    }
    try {
      await provider.destroy(instanceId);
    } catch (err) {
      return this.retryVerify(d, `destroy failed: ${(err as Error).message}`);
    }
    const asking = { logger: this.deps.logger, deploymentId: d.id, now: () => this.now() };
    // Without an address the provider never gave one: nobody could have got in, so its word is the check.
    const check = target
      ? await this.verifier.verify(provider, instanceId, target, asking)
      : await this.verifier.verifyWithoutAddress(provider, instanceId, asking);
    if (!check.verified) return this.retryVerify(d, check.detail);
    const cleanup = await releaseAfterDestroyed(this.deps.logger, provider, d.id, d.label);
    const detail = (cleanup ?? check.detail).slice(0, 512);
    await store.read((r) => r.rentals.deployments.setLastCheckDetail(deploymentId, detail));
    await this.markTerminated(d, check.evidence);
  }

  private target(d: Deployment, ssh?: { host: string; port: number; user: string }): SshTarget | null {
    const host = ssh?.host ?? d.sshHost;
    if (!host || !d.sshPrivateKeyEnc) return null;
    // The pinned host key: a different machine answering at the old address is not ours.
    return {
      host,
      port: ssh?.port ?? d.sshPort!,
      user: ssh?.user ?? d.sshUser!,
      privateKey: this.deps.box.open(d.sshPrivateKeyEnc, d.sshKeyKid!, d.id),
      hostKey: d.sshHostKey,
    };
  }

  private async retryVerify(d: Deployment, detail: string): Promise<void> {
    const n = d.verifyAttempts + 1;
    await this.deps.store.read((r) =>
      r.rentals.deployments.recordFailedVerification(d.id, n, detail.slice(0, 512), this.now()),
    );
    if (n >= this.timing.verifyAlertAfter) {
      this.deps.logger.error(
        { deploymentId: d.id, verifyAttempts: n, detail },
        'ALERT: instance not verifiably destroyed; still retrying',
      );
    }
    const delay = Math.min(this.timing.verifyMaxDelayMs, this.timing.verifyBaseDelayMs * 2 ** Math.min(n - 1, 20));
    await enqueueFor(this.deps.jobs, 'rental.terminate', d.id, delay);
  }

  /**
   * TERMINATED at the verified time (written once), settling the last metered usage in the same
   * transaction: up to the termination request, never past `endsAt` (see `chargeEnd`), or, for a
   * rental ended before ACTIVE whose machine worked for its renter, that machine's time. With the
   * `evidence` of a verified destruction, its teardown receipt is signed in the same transaction,
   * after every charge, so it exists exactly when this TERMINATED commits.
   */
  private async markTerminated(d: Deployment, evidence?: DestructionEvidence): Promise<void> {
    const { store } = this.deps;
    const order = await store.read((r) => r.rentals.orders.get(d.orderId));
    const receipt = evidence && this.deps.receipts ? await this.deps.receipts.issuerFor(order, evidence) : null;
    const verifiedAt = this.now();
    const endedAt = order.funding === 'CARD' && d.billingModel === 'LEGACY_PREPAID' ? null : verifiedAt;
    const refundDue = await store.transaction(async (r) => {
      const locked = await r.rentals.deployments.lock(d.id);
      if (!locked || locked.status !== 'TERMINATING') return false;
      if (isOneOf(METERED_BILLING_MODELS, locked.billingModel) && locked.meteredUntil && locked.startedAt) {
        await this.metering.settleUsage(r, locked, locked.terminateRequestedAt ?? verifiedAt);
      } else if (isOneOf(METERED_BILLING_MODELS, locked.billingModel) && !locked.startedAt && locked.usableAt) {
        await chargeTimeBeforeActive(this.deps.ledger, r, locked, verifiedAt.getTime(), verifiedAt);
      }
      // A card order ended before its machine ever ran was paid for nothing: the payment goes back,
      // recorded with the transition so the payments job retries it if this process stops here.
      const refund =
        order.funding === 'CARD' &&
        !locked.startedAt &&
        (await this.deps.refunds.markOrderRefundDue(r.checkouts, order.id));
      await transition(r, d.id, ['TERMINATING'], 'TERMINATED', {
        at: verifiedAt,
        deployment: locked.endedAt ? {} : { endedAt },
        ...(refund ? { order: { reversalStatus: 'PENDING' as const } } : {}),
      });
      await receipt?.(r, locked, locked.endedAt ?? verifiedAt);
      return refund;
    });
    if (refundDue) {
      this.deps.logger.warn({ rentalId: order.id }, 'a card order ended before its machine ran; refunding its payment');
      await this.reversal.settle((await this.find(d.id))!);
    }
  }
}
