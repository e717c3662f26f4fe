import { inTransaction } from '../../../db/transaction.js';
import { entryByRef } from '../../billing/ledger.repository.js';
import type { Deployment } from '../deployment.entity.js';
import { PROVISIONING_STATUSES, type FailureCode } from '../rental-status.js';
import { transition } from '../rental-state.js';
import { findDeployment } from '../deployments.repository.js';
import { rentalDebitRef, reversalRef } from './labels.js';
import type { LifecycleDeps } from './lifecycle-deps.js';
import { getOrder, markReversalSettled } from '../orders.repository.js';

/**
 * Failing a rental and giving back what it took: FAILED with a customer-safe reason and the
 * reversal PENDING, the instance destroyed, then the reversal settled exactly once.
 */
export class Reversal {
  constructor(private readonly deps: Pick<LifecycleDeps, 'ds' | 'clock' | 'logger' | 'providers' | 'ledger' | 'refunds'>) {}

  /**
   * Fails a PENDING/PROVISIONING rental and settles its reversal (legacy: the admission debit
   * credited back once under `rental:<id>:reversal`; metered: nothing was charged). Safe to call
   * repeatedly; a FAILED deployment only has its reversal settled, any other status is left alone.
   */
  async fail(deploymentId: string, code: FailureCode, reason: string): Promise<void> {
    const { ds, clock, logger, providers } = this.deps;
    await inTransaction(ds, (m) =>
      transition(m, deploymentId, PROVISIONING_STATUSES, 'FAILED', {
        at: clock.now(),
        deployment: { endedAt: null },
        order: { failureCode: code, failureReason: reason, reversalStatus: 'PENDING' },
      }),
    );
    const fresh = await findDeployment(ds, deploymentId);
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
   */
  async settle(d: Deployment): Promise<void> {
    const { ds, clock, logger, ledger, refunds } = this.deps;
    const order = await getOrder(ds, d.orderId);
    if (order.reversalStatus !== 'PENDING') return;
    if (order.funding === 'CARD') {
      try {
        await refunds.refundOrder(order.id);
      } catch (err) {
        logger.error({ err, rentalId: order.id }, 'card refund of a failed rental did not go through; the reconciler retries');
        return;
      }
    }
    await inTransaction(ds, async (m) => {
      const debit = await entryByRef(m, rentalDebitRef(order.id));
      if (debit && debit.amountMinor < 0) {
        await ledger.post(m, {
          accountId: order.accountId,
          kind: 'REVERSAL',
          amountMinor: -debit.amountMinor,
          externalRef: reversalRef(order.id),
          description: `Rental ${order.id} failed: debit returned`,
          keyId: order.keyId,
          rentalId: order.id,
        });
      }
      await markReversalSettled(m, order.id, clock.now());
    });
  }

  /** The provision job of a FAILED deployment, or a sweep: fail if still starting, else settle. */
  async failOrSettle(deploymentId: string, code: FailureCode, reason: string): Promise<void> {
    const d = await findDeployment(this.deps.ds, deploymentId);
    if (!d) return;
    if (d.status === 'FAILED') return this.settle(d);
    await this.fail(deploymentId, code, reason);
  }
}
