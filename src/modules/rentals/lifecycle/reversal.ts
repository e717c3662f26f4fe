import type { Deployment } from '../store/deployment.entity.js';
import { isOneOf, METERED_BILLING_MODELS, PROVISIONING_STATUSES, type FailureCode } from '../state/rental-status.js';
import { transition } from '../state/rental-state.js';
import { chargeTimeBeforeActive, timeBeforeActive } from './time-before-active.js';
import { rentalDebitRef, reversalRef } from './labels.js';
import type { LifecycleDeps } from './lifecycle-deps.js';

/**
 * Failing a rental and giving back what it took: FAILED with a customer-safe reason and the
 * reversal PENDING, the instance destroyed, then the reversal settled exactly once.
 */
export class Reversal {
  constructor(
    private readonly deps: Pick<LifecycleDeps, 'store' | 'clock' | 'logger' | 'providers' | 'ledger' | 'refunds'>,
  ) {}

  /**
   * Fails a PENDING/PROVISIONING rental and settles its reversal (legacy: the admission debit
   * credited back once under `rental:<id>:reversal`; metered: nothing was charged), less its
   * machine's time before ACTIVE when it had any (see {@link settle}). Safe to call repeatedly; a
   * FAILED deployment only has its reversal settled, any other status is left alone.
   */
  async fail(deploymentId: string, code: FailureCode, reason: string): Promise<void> {
    const { store, clock, logger, providers } = this.deps;
    await store.transaction((r) =>
      transition(r, deploymentId, PROVISIONING_STATUSES, 'FAILED', {
        at: clock.now(),
        deployment: { endedAt: null },
        order: { failureCode: code, failureReason: reason, reversalStatus: 'PENDING' },
      }),
    );
    const fresh = await store.read((r) => r.rentals.deployments.find(deploymentId));
    if (!fresh || fresh.status !== 'FAILED') return;
    if (fresh.instanceId && fresh.providerId) {
      try {
        await providers.get(fresh.providerId).destroy(fresh.instanceId);
      } catch (err) {
        // The reconciler destroys instances of failed deployments it finds later.
        logger.warn({ err, deploymentId }, 'destroying the instance of a failed rental failed');
      }
    }
    await this.settle(fresh);
  }

  /**
   * Gives back exactly what the rental took, once: a credit-funded legacy debit returns as credits,
   * a card-funded order's payment returns to the card; metered rentals owe nothing. A refund the
   * payment provider cannot make now leaves the reversal PENDING for the reconciler to retry.
   *
   * Except the time its machine worked for the renter ({@link timeBeforeActive}, up to the failure):
   * a metered rental is charged it in one USAGE entry, a legacy one gets back only the part of its
   * debit that time did not use. Either way the rental's `usageMinor` shows what it cost.
   */
  async settle(d: Deployment): Promise<void> {
    const { store, clock, logger, ledger, refunds } = this.deps;
    const order = await store.read((r) => r.rentals.orders.get(d.orderId));
    if (order.reversalStatus !== 'PENDING') return;
    if (order.funding === 'CARD') {
      try {
        await refunds.refundOrder(order.id);
      } catch (err) {
        logger.error(
          { err, rentalId: order.id },
          'card refund of a failed rental did not go through; the reconciler retries',
        );
        return;
      }
    }
    await store.transaction(async (r) => {
      // Locked before the account (which the ledger locks), as termination and metering lock them.
      const locked = order.funding === 'CREDITS' ? await r.rentals.deployments.lock(d.id) : null;
      const failedAtMs = (locked?.statusChangedAt ?? clock.now()).getTime();
      const debit = await r.ledger.entryByRef(rentalDebitRef(order.id));
      if (debit && debit.amountMinor < 0) {
        const worked = locked && !locked.startedAt ? timeBeforeActive(locked, failedAtMs) : null;
        const kept = Math.min(-debit.amountMinor, worked?.amount ?? 0);
        if (kept < -debit.amountMinor) {
          await ledger.post(r, {
            accountId: order.accountId,
            kind: 'REVERSAL',
            amountMinor: -debit.amountMinor - kept,
            externalRef: reversalRef(order.id),
            description:
              kept > 0
                ? `Rental ${order.id} failed: debit returned less ${kept} cents for its machine's time before it passed the service's check`
                : `Rental ${order.id} failed: debit returned`,
            keyId: order.keyId,
            rentalId: order.id,
          });
        }
        if (worked && kept > 0) {
          const until = new Date(worked.toMs);
          await r.rentals.deployments.setMeteredUsage(
            d.id,
            { usageMinor: kept, meteredUntil: until, postedUsageMinor: kept, postedUntil: until },
            clock.now(),
          );
        }
      } else if (locked && isOneOf(METERED_BILLING_MODELS, locked.billingModel)) {
        await chargeTimeBeforeActive(ledger, r, locked, failedAtMs, clock.now());
      }
      await r.rentals.orders.markReversalSettled(order.id, clock.now());
    });
  }

  /** The provision job of a FAILED deployment, or a sweep: fail if still starting, else settle. */
  async failOrSettle(deploymentId: string, code: FailureCode, reason: string): Promise<void> {
    const d = await this.deps.store.read((r) => r.rentals.deployments.find(deploymentId));
    if (!d) return;
    if (d.status === 'FAILED') return this.settle(d);
    await this.fail(deploymentId, code, reason);
  }
}
