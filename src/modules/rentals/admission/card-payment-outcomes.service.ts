import type { DataSource } from 'typeorm';
import type { CardOrders, CardOrderState, PaymentTransaction } from '../../billing/card-orders.js';
import { entityManagerOf } from '../../billing/checkouts.repository.js';
import { cancelledUnpaidOrders, readCardOrder } from '../store/deployments.repository.js';
import { markReversalPending, markReversalSettled, orderTerms } from '../store/orders.repository.js';
import type { FailureCode } from '../state/rental-status.js';
import { transition } from '../state/rental-state.js';

const ONLY_UNPAID = ['AWAITING_PAYMENT'] as const;

/** What a card payment's outcome does to the rental it pays for (billing's {@link CardOrders}). */
export class CardOrdersService implements CardOrders {
  constructor(private readonly ds: DataSource) {}

  async state(tx: PaymentTransaction, orderId: string, opts: { lock: boolean }): Promise<CardOrderState | null> {
    const row = await readCardOrder(entityManagerOf(tx.checkouts), orderId, opts.lock);
    return row && { awaitingPayment: row.status === 'AWAITING_PAYMENT', cancelled: row.cancelled, status: row.status };
  }

  async paid(tx: PaymentTransaction, orderId: string, at: Date): Promise<void> {
    await transition(entityManagerOf(tx.checkouts), { orderId }, ONLY_UNPAID, 'PENDING', { at });
  }

  async paidTooLate(tx: PaymentTransaction, orderId: string, state: CardOrderState | null, at: Date): Promise<void> {
    const m = entityManagerOf(tx.checkouts);
    if (state?.awaitingPayment) {
      // Cancelled by its owner before paying: it ends as they asked, and the payment goes back.
      await transition(m, { orderId }, ONLY_UNPAID, 'TERMINATED', {
        at,
        deployment: { endedAt: null },
        order: { reversalStatus: 'PENDING' },
      });
    } else if (state?.status === 'FAILED') {
      await markReversalPending(
        m,
        orderId,
        at,
        'The card payment arrived after the order had closed, so the rental never started. The payment is refunded to the card.',
      );
    } else {
      await markReversalPending(m, orderId, at);
    }
  }

  async closedUnpaid(tx: PaymentTransaction, orderId: string, why: 'EXPIRED' | 'FAILED', at: Date): Promise<void> {
    const m = entityManagerOf(tx.checkouts);
    const order = await readCardOrder(m, orderId, true);
    if (order?.cancelled) {
      await transition(m, { orderId }, ONLY_UNPAID, 'TERMINATED', { at, deployment: { endedAt: null } });
      return;
    }
    const [code, reason]: [FailureCode, string] =
      why === 'EXPIRED'
        ? ['PAYMENT_EXPIRED', 'The card checkout expired before it was paid. Nothing was charged.']
        : ['PAYMENT_FAILED', 'The card payment did not go through. Nothing was charged.'];
    // Nothing was charged, so there is nothing to give back: the reversal is complete as it stands.
    await transition(m, { orderId }, ONLY_UNPAID, 'FAILED', {
      at,
      order: { failureCode: code, failureReason: reason, reversalStatus: 'SUCCEEDED' },
    });
  }

  async refunded(tx: PaymentTransaction, orderId: string, at: Date): Promise<void> {
    await markReversalSettled(entityManagerOf(tx.checkouts), orderId, at);
  }

  async released(orderId: string): Promise<boolean> {
    return (await orderTerms(this.ds, orderId))?.status === 'PENDING';
  }

  cancelledUnpaid(opts: { limit: number; orderId?: string }): Promise<string[]> {
    return cancelledUnpaidOrders(this.ds, opts.limit, opts.orderId ?? null);
  }

  async hours(orderId: string): Promise<number | null> {
    const seconds = (await orderTerms(this.ds, orderId))?.durationSeconds;
    return seconds ? seconds / 3600 : null;
  }
}
