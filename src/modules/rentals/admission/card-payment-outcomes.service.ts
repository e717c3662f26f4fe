import type { Store } from '../../../db/store.js';
import type { Repositories } from '../../../repositories.js';
import type { CardOrders, CardOrderState, PaymentTransaction } from '../../billing/card-orders.js';
import type { FailureCode } from '../state/rental-status.js';
import { transition, type RentalStateRepos } from '../state/rental-state.js';

const ONLY_UNPAID = ['AWAITING_PAYMENT'] as const;

/**
 * The rentals aggregate and event log of billing's transaction. Billing names only its own
 * repositories in {@link PaymentTransaction}; the store's transaction hands out every aggregate's,
 * so the order moves in that same transaction. A transaction without them cannot move an order.
 */
function rentalsOf(tx: PaymentTransaction): RentalStateRepos {
  if ('rentals' in tx && 'events' in tx) return tx as PaymentTransaction & RentalStateRepos;
  throw new Error("a card order moves only in a store transaction that holds the rentals' repositories");
}

/** What a card payment's outcome does to the rental it pays for (billing's {@link CardOrders}). */
export class CardOrdersService implements CardOrders {
  constructor(private readonly store: Store<Pick<Repositories, 'rentals'>>) {}

  async state(tx: PaymentTransaction, orderId: string, opts: { lock: boolean }): Promise<CardOrderState | null> {
    const row = await rentalsOf(tx).rentals.deployments.cardOrder(orderId, opts.lock);
    return row && { awaitingPayment: row.status === 'AWAITING_PAYMENT', cancelled: row.cancelled, status: row.status };
  }

  async paid(tx: PaymentTransaction, orderId: string, at: Date): Promise<void> {
    await transition(rentalsOf(tx), { orderId }, ONLY_UNPAID, 'PENDING', { at });
  }

  async paidTooLate(tx: PaymentTransaction, orderId: string, state: CardOrderState | null, at: Date): Promise<void> {
    const r = rentalsOf(tx);
    if (state?.awaitingPayment) {
      // Cancelled by its owner before paying: it ends as they asked, and the payment goes back.
      await transition(r, { orderId }, ONLY_UNPAID, 'TERMINATED', {
        at,
        deployment: { endedAt: null },
        order: { reversalStatus: 'PENDING' },
      });
    } else if (state?.status === 'FAILED') {
      await r.rentals.orders.markReversalPending(
        orderId,
        at,
        'The card payment arrived after the order had closed, so the rental never started. The payment is refunded to the card.',
      );
    } else {
      await r.rentals.orders.markReversalPending(orderId, at);
    }
  }

  async closedUnpaid(tx: PaymentTransaction, orderId: string, why: 'EXPIRED' | 'FAILED', at: Date): Promise<void> {
    const r = rentalsOf(tx);
    const order = await r.rentals.deployments.cardOrder(orderId, true);
    if (order?.cancelled) {
      await transition(r, { orderId }, ONLY_UNPAID, 'TERMINATED', { at, deployment: { endedAt: null } });
      return;
    }
    const [code, reason]: [FailureCode, string] =
      why === 'EXPIRED'
        ? ['PAYMENT_EXPIRED', 'The card checkout expired before it was paid. Nothing was charged.']
        : ['PAYMENT_FAILED', 'The card payment did not go through. Nothing was charged.'];
    // Nothing was charged, so there is nothing to give back: the reversal is complete as it stands.
    await transition(r, { orderId }, ONLY_UNPAID, 'FAILED', {
      at,
      order: { failureCode: code, failureReason: reason, reversalStatus: 'SUCCEEDED' },
    });
  }

  async refunded(tx: PaymentTransaction, orderId: string, at: Date): Promise<void> {
    await rentalsOf(tx).rentals.orders.markReversalSettled(orderId, at);
  }

  async released(orderId: string): Promise<boolean> {
    return (await this.store.read((r) => r.rentals.orders.terms(orderId)))?.status === 'PENDING';
  }

  cancelledUnpaid(opts: { limit: number; orderId?: string }): Promise<string[]> {
    return this.store.read((r) => r.rentals.deployments.cancelledUnpaidOrders(opts.limit, opts.orderId ?? null));
  }

  async hours(orderId: string): Promise<number | null> {
    const seconds = (await this.store.read((r) => r.rentals.orders.terms(orderId)))?.durationSeconds;
    return seconds ? seconds / 3600 : null;
  }
}
