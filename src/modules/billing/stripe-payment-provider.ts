import type Stripe from 'stripe';
import { loadStripe } from './stripe-sdk.js';
import type {
  CheckoutSessionInfo,
  CheckoutSessionRequest,
  PaymentProvider,
  RefundInfo,
  RefundRequest,
} from './payment-provider.js';
import { sessionMetadata } from './payment-provider.js';

export interface StripeProviderOptions {
  secretKey: string;
  /** Base URL override (tests point it at a local fake); Stripe's own API when unset. */
  apiUrl?: string;
  /** Retries of network failures and 409 conflicts, each reusing the request's idempotency key. */
  maxNetworkRetries?: number;
  timeoutMs?: number;
}

/** Stripe Checkout in payment mode through the official SDK. */
export class StripePaymentProvider implements PaymentProvider {
  readonly id = 'stripe' as const;
  private readonly stripe: Stripe;

  constructor(options: StripeProviderOptions) {
    const config: ConstructorParameters<typeof Stripe>[1] = {
      maxNetworkRetries: options.maxNetworkRetries ?? 2,
      timeout: options.timeoutMs ?? 20_000,
      telemetry: false,
      appInfo: { name: 'gpu-rental' },
    };
    if (options.apiUrl) {
      const u = new URL(options.apiUrl);
      config.host = u.hostname;
      config.protocol = u.protocol === 'http:' ? 'http' : 'https';
      config.port = u.port || (u.protocol === 'http:' ? 80 : 443);
    }
    this.stripe = new (loadStripe())(options.secretKey, config);
  }

  async createCheckoutSession(r: CheckoutSessionRequest): Promise<CheckoutSessionInfo> {
    const metadata = sessionMetadata(r);
    // Nothing time-dependent goes into the parameters: a retry must send identical parameters, or
    // Stripe refuses the reused idempotency key.
    const session = await this.stripe.checkout.sessions.create(
      {
        mode: 'payment',
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: r.currency,
              unit_amount: r.amountMinor,
              product_data: {
                name: r.productName,
                ...(r.productDescription ? { description: r.productDescription } : {}),
              },
            },
          },
        ],
        client_reference_id: r.checkoutId,
        metadata,
        payment_intent_data: { metadata },
        ...(r.customerEmail ? { customer_email: r.customerEmail } : {}),
        success_url: r.successUrl,
        cancel_url: r.cancelUrl,
      },
      { idempotencyKey: r.idempotencyKey },
    );
    return toInfo(session);
  }

  async retrieveCheckoutSession(sessionId: string): Promise<CheckoutSessionInfo | null> {
    try {
      return toInfo(await this.stripe.checkout.sessions.retrieve(sessionId));
    } catch (err) {
      if (err instanceof loadStripe().errors.StripeInvalidRequestError && err.statusCode === 404) return null;
      throw err;
    }
  }

  async expireCheckoutSession(sessionId: string, idempotencyKey: string): Promise<CheckoutSessionInfo | null> {
    try {
      return toInfo(await this.stripe.checkout.sessions.expire(sessionId, {}, { idempotencyKey }));
    } catch (err) {
      if (err instanceof loadStripe().errors.StripeInvalidRequestError && err.statusCode === 404) return null;
      throw err;
    }
  }

  async refund(r: RefundRequest): Promise<RefundInfo> {
    const session = await this.stripe.checkout.sessions.retrieve(r.sessionId);
    const intent = typeof session.payment_intent === 'string' ? session.payment_intent : session.payment_intent?.id;
    if (!intent || session.payment_status !== 'paid')
      throw new Error(`checkout session ${r.sessionId} has no captured payment to refund`);
    try {
      const refund = await this.stripe.refunds.create(
        {
          payment_intent: intent,
          amount: r.amountMinor,
          reason: 'requested_by_customer',
          metadata: { checkout_id: r.checkoutId, ...(r.orderId ? { order_id: r.orderId } : {}) },
        },
        { idempotencyKey: r.idempotencyKey },
      );
      return refundInfo(refund);
    } catch (err) {
      // Stripe keeps idempotency keys for 24 hours; a retry after that, of a refund whose answer
      // was lost, finds the payment already refunded. That refund is the one we asked for.
      if (!(err instanceof loadStripe().errors.StripeInvalidRequestError) || err.code !== 'charge_already_refunded')
        throw err;
      const existing = await this.stripe.refunds.list({ payment_intent: intent, limit: 100 });
      const live = existing.data.filter((x) => x.status !== 'failed' && x.status !== 'canceled');
      const ours = live.find((x) => x.metadata?.checkout_id === r.checkoutId) ?? live[0];
      if (!ours) throw err;
      return refundInfo(ours);
    }
  }
}

function refundInfo(refund: Stripe.Refund): RefundInfo {
  return { id: refund.id, status: (refund.status ?? 'pending') as RefundInfo['status'] };
}

/** Reads the fields we rely on from a Checkout Session (API object or webhook payload). */
export function toInfo(s: Stripe.Checkout.Session): CheckoutSessionInfo {
  return {
    id: s.id,
    url: s.url ?? null,
    expiresAt: new Date(s.expires_at * 1000),
    status: (s.status ?? 'open') as CheckoutSessionInfo['status'],
    paymentStatus: s.payment_status as CheckoutSessionInfo['paymentStatus'],
    amountTotal: s.amount_total ?? null,
    currency: s.currency ?? null,
    metadata: (s.metadata ?? {}) as Record<string, string>,
    clientReferenceId: s.client_reference_id ?? null,
  };
}
