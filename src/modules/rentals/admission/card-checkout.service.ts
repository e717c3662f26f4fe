import { randomUUID } from 'node:crypto';
import type { Clock } from '../../../clock.js';
import type { Store } from '../../../db/store.js';
import { AppError } from '../../../errors/app-error.js';
import { lookupId } from '../../../ids.js';
import type { Checkout } from '../../billing/checkout.entity.js';
import type { CheckoutDescription, CheckoutSessionsService } from '../../billing/checkout-sessions.service.js';
import { formatUsdAmount } from '../../../vocabulary/money.js';
import { claimOrReplay, idempotentRequest, priorUse, requireIdempotencyKey } from '../../idempotency/idempotency.js';
import type { InventoryService } from '../../inventory/inventory.service.js';
import type { KeysService } from '../../keys/keys.service.js';
import type { Principal } from '../../keys/principal.js';
import { cardTerms, type AdmissionTerms } from './admission-terms.js';
import { newDeployment, newOrder } from './admission-rows.js';
import type { CardCheckoutRequest, CardCheckoutResponse } from '../wire/card-checkout.dto.js';
import { assertConcurrencySlot } from './concurrency-slot.js';
import type { Order } from '../store/order.entity.js';
import { insertDeployment } from '../state/rental-state.js';
import { NO_MACHINE_COLUMNS } from '../store/machine-secrets.js';
import { DEFAULT_MACHINE_SETTINGS } from '../../../providers/provider.js';
import type { Repositories } from '../../../repositories.js';

/** The repositories card admission reads and writes. */
export type CardCheckoutRepos = Pick<Repositories, 'idempotency' | 'checkouts' | 'accounts' | 'rentals'>;

/**
 * Card admission, the human card path: a LEGACY_PREPAID rental paid by card through a hosted checkout. It never
 * touches compute credits (no ledger entry): the card pays the order directly, so the account's
 * balance and the key's budget stay as they are.
 */
export class CardCheckoutService {
  constructor(
    private readonly store: Store<CardCheckoutRepos>,
    private readonly clock: Clock,
    private readonly inventory: InventoryService,
    private readonly sessions: CheckoutSessionsService,
    private readonly keys: KeysService,
  ) {}

  async checkout(
    principal: Principal,
    idempotencyKeyHeader: string | undefined,
    body: CardCheckoutRequest,
  ): Promise<CardCheckoutResponse> {
    const idemKey = requireIdempotencyKey(idempotencyKeyHeader);
    this.sessions.requireProvider();
    const request = idempotentRequest(`checkout:${principal.accountId}`, idemKey, {
      offerId: lookupId(body.offerId),
      budgetMinor: body.budgetMinor,
    });

    // A retry answers with the order it made even if the offer has since changed or vanished.
    const admitted =
      (await this.store.read((r) => priorUse(r.idempotency, request))) === null
        ? await this.admit(principal, body)
        : null;

    const claimed = await this.store.transaction((r) =>
      claimOrReplay(r.idempotency, this.clock, request, {
        replay: (orderId) => this.sessions.checkoutOfOrder(r.checkouts, orderId),
        // A key with no record before the transaction was admitted above; records are never deleted.
        create: async () => this.createOrder(r, principal, body, admitted ?? (await this.admit(principal, body))),
      }),
    );

    const order = await this.store.read((r) => r.rentals.orders.get(claimed.orderId!));
    let checkout = await this.sessions.open(claimed, await this.describe(order));
    checkout = await this.sessions.expireIfDue(checkout);
    if (!checkout.checkoutUrl)
      throw new AppError('UNAVAILABLE', 'The payment page is not ready yet. Retry with the same Idempotency-Key.');
    return {
      orderId: order.id,
      checkoutUrl: checkout.checkoutUrl,
      expiresAt: checkout.expiresAt ? checkout.expiresAt.toISOString() : null,
      quote: {
        hourlyPriceMinor: order.hourlyPriceMinor,
        durationSeconds: order.durationSeconds ?? 0,
        totalMinor: order.totalMinor,
        currency: order.currency,
      },
    };
  }

  /** The unpaid order, its deployment and its CREATING checkout, in the caller's transaction. */
  private async createOrder(
    r: CardCheckoutRepos,
    principal: Principal,
    body: CardCheckoutRequest,
    terms: AdmissionTerms,
  ): Promise<{ resourceId: string; result: Checkout }> {
    await assertConcurrencySlot(r, principal, this.keys);
    const rental = {
      id: randomUUID(),
      accountId: principal.accountId,
      keyId: principal.keyId,
      funding: 'CARD' as const,
      now: this.clock.now(),
    };
    const intent = {
      kind: 'OFFER' as const,
      offerId: terms.candidates[0].id,
      budgetMinor: body.budgetMinor,
      machine: { ...DEFAULT_MACHINE_SETTINGS },
      terminateAfterSeconds: null,
    };
    const order = newOrder(rental, intent, null, terms, NO_MACHINE_COLUMNS);
    await r.rentals.orders.insert(order);
    await insertDeployment(r, newDeployment(randomUUID(), order, terms));
    const checkout = await this.sessions.insert(r.checkouts, {
      purpose: 'ORDER',
      accountId: principal.accountId,
      keyId: principal.keyId,
      orderId: order.id,
      amountMinor: order.totalMinor,
    });
    return { resourceId: order.id, result: checkout };
  }

  /** The checks a new card order must pass before its Idempotency-Key is claimed. */
  private async admit(principal: Principal, body: CardCheckoutRequest): Promise<AdmissionTerms> {
    const account = await this.store.read((r) => r.accounts.get(principal.accountId));
    if (!account.email) {
      throw new AppError(
        'EMAIL_REQUIRED',
        'Card checkout needs an e-mail on the account for the receipt. Set it with PUT /api/v1/me/email.',
      );
    }
    const offer = await this.inventory.findCached(lookupId(body.offerId));
    if (!offer || !offer.available) {
      // A 422 on the field, not 404: this route's contract declares only 401 and 422 as errors.
      throw new AppError(
        'VALIDATION_FAILED',
        `Invalid request: offerId: ${body.offerId} is not currently offered. See /api/v1/offers.`,
      );
    }
    return cardTerms(offer, body.budgetMinor, principal);
  }

  private async describe(order: Order): Promise<CheckoutDescription> {
    const [offer, account] = await Promise.all([
      order.offerId ? this.inventory.findCached(order.offerId) : null,
      this.store.read((r) => r.accounts.get(order.accountId)),
    ]);
    const hours = (order.durationSeconds ?? 0) / 3600;
    return {
      productName: `GPU rental: ${offer ? offer.name : 'GPU instance'}`,
      productDescription: `${hours} hour${hours === 1 ? '' : 's'} at USD ${formatUsdAmount(order.hourlyPriceMinor)} per hour, order ${order.id}.`,
      customerEmail: account.email,
    };
  }
}
