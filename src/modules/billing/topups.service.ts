import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import { claimOrReplay, idempotentRequest, requireIdempotencyKey } from '../idempotency/idempotency.js';
import type { IdempotencyRepository } from '../idempotency/idempotency.repository.js';
import type { Principal } from '../keys/principal.js';
import type { TopupDto, TopupRequest } from './billing.dto.js';
import type { Checkout } from './checkout.entity.js';
import type { CheckoutsRepository } from './checkouts.repository.js';
import { formatUsdAmount } from '../../vocabulary/money.js';
import type { CheckoutDescription, CheckoutSessionsService } from './checkout-sessions.service.js';

export interface TopupResult {
  /** 201 when this request created the top-up, 200 for a replay of the same key and body. */
  status: 200 | 201;
  topup: TopupDto;
}

/** Hosted top-ups: a link a human pays once; only the verified payment event credits. */
export class TopupsService {
  constructor(
    private readonly store: Store<{ idempotency: IdempotencyRepository; checkouts: CheckoutsRepository }>,
    private readonly clock: Clock,
    private readonly sessions: CheckoutSessionsService,
  ) {}

  /**
   * `principal` is the calling key, or for the owner bot an account with no key (`keyId: null`),
   * whose idempotency keys are derived from Telegram update ids.
   */
  async create(
    principal: Pick<Principal, 'accountId'> & { keyId: string | null },
    idempotencyKeyHeader: string | undefined,
    body: TopupRequest,
  ): Promise<TopupResult> {
    const idemKey = requireIdempotencyKey(idempotencyKeyHeader);
    this.sessions.requireProvider();
    // Keys are scoped to the account: two accounts may use the same key independently. The bot's
    // keys (derived from public Telegram update ids) live in a scope of their own that no API
    // request reaches, so no key of the account can claim one of them in advance.
    const scope = principal.keyId === null ? `topup-bot:${principal.accountId}` : `topup:${principal.accountId}`;
    const request = idempotentRequest(scope, idemKey, { amountMinor: body.amountMinor });
    const claimed = await this.store.transaction((r) =>
      claimOrReplay(r.idempotency, this.clock, request, {
        replay: async (checkoutId) => ({ checkout: await r.checkouts.get(checkoutId), created: false }),
        create: async () => {
          const checkout = await this.sessions.insert(r.checkouts, {
            purpose: 'TOPUP',
            accountId: principal.accountId,
            keyId: principal.keyId,
            amountMinor: body.amountMinor,
          });
          return { resourceId: checkout.id, result: { checkout, created: true } };
        },
      }),
    );

    let checkout = await this.sessions.open(claimed.checkout, this.describe(claimed.checkout));
    checkout = await this.sessions.expireIfDue(checkout);
    if (checkout.status === 'EXPIRED' || checkout.status === 'FAILED') {
      throw new AppError(
        'TOPUP_EXPIRED',
        checkout.status === 'EXPIRED'
          ? 'The payment link for this Idempotency-Key has expired unpaid. Ask again with a new Idempotency-Key.'
          : 'The payment for this Idempotency-Key failed. Ask again with a new Idempotency-Key.',
      );
    }
    return { status: claimed.created ? 201 : 200, topup: toTopupDto(checkout) };
  }

  async get(principal: Principal, topupId: string): Promise<TopupDto> {
    const checkout = await this.store.read((r) => r.checkouts.visibleTopup(principal, topupId));
    if (!checkout) throw new AppError('NOT_FOUND', 'No such top-up on this account.');
    return toTopupDto(await this.sessions.expireIfDue(checkout));
  }

  /** Fixed wording: a retry must send the provider identical parameters. */
  private describe(checkout: Checkout): CheckoutDescription {
    return {
      productName: 'Compute credits',
      productDescription: `USD ${formatUsdAmount(checkout.amountMinor)} of GPU compute credits. Credits are non-transferable and non-withdrawable.`,
    };
  }
}

export function toTopupDto(c: Checkout): TopupDto {
  return {
    topupId: c.id,
    status: c.status,
    amountMinor: c.amountMinor,
    currency: c.currency,
    paymentUrl: c.checkoutUrl,
    expiresAt: c.expiresAt ? c.expiresAt.toISOString() : null,
    createdAt: c.createdAt.toISOString(),
    paidAt: c.paidAt ? c.paidAt.toISOString() : null,
  };
}
