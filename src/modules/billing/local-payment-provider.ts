import { createHash, randomBytes } from 'node:crypto';
import { loadStripe } from './stripe-sdk.js';
import type { Clock } from '../../clock.js';
import type { Checkout } from './checkout.entity.js';
import type {
  CheckoutSessionInfo,
  CheckoutSessionRequest,
  PaymentProvider,
  RefundInfo,
  RefundRequest,
} from './payment-provider.js';
import { sessionMetadata } from './payment-provider.js';

/** How long a development payment page stays payable, like Stripe's default session lifetime. */
const SESSION_LIFETIME_MS = 24 * 3600 * 1000;

export interface LocalProviderOptions {
  publicBaseUrl: string;
  webhookSecret: string;
  clock: Clock;
}

/**
 * Development stand-in for Stripe, used when no Stripe key is configured so the service runs
 * offline. The "hosted page" is served by this service at /pay/{checkoutId}; paying there sends a
 * `checkout.session.completed` event signed exactly as Stripe signs webhooks to our own webhook
 * route, so crediting runs through the same verification as in production. Never enabled in
 * production (see payment-provider-factory.ts).
 */
export class LocalPaymentProvider implements PaymentProvider {
  readonly id = 'local' as const;

  constructor(private readonly options: LocalProviderOptions) {}

  async createCheckoutSession(r: CheckoutSessionRequest): Promise<CheckoutSessionInfo> {
    return {
      // Derived from the idempotency key, so asking twice names the same session, as with Stripe.
      id: `cs_local_${createHash('sha256').update(r.idempotencyKey).digest('hex').slice(0, 40)}`,
      url: `${this.options.publicBaseUrl}/pay/${r.checkoutId}`,
      expiresAt: new Date(this.options.clock.now().getTime() + SESSION_LIFETIME_MS),
      status: 'open',
      paymentStatus: 'unpaid',
      amountTotal: r.amountMinor,
      currency: r.currency,
      metadata: sessionMetadata(r),
      clientReferenceId: r.checkoutId,
    };
  }

  /** The checkouts table is this provider's only record. */
  async retrieveCheckoutSession(): Promise<CheckoutSessionInfo | null> {
    return null;
  }

  async expireCheckoutSession(): Promise<CheckoutSessionInfo | null> {
    return null;
  }

  /** Nothing was really charged on the development page; the refund is recorded on the checkout row. */
  async refund(r: RefundRequest): Promise<RefundInfo> {
    return {
      id: `re_local_${createHash('sha256').update(r.idempotencyKey).digest('hex').slice(0, 24)}`,
      status: 'succeeded',
    };
  }

  /** A `checkout.session.completed` event for the checkout, paid in full, as Stripe would send it. */
  paidEvent(checkout: Checkout): string {
    const nowSec = Math.floor(this.options.clock.now().getTime() / 1000);
    const session = {
      id: checkout.sessionId,
      object: 'checkout.session',
      amount_subtotal: checkout.amountMinor,
      amount_total: checkout.amountMinor,
      client_reference_id: checkout.id,
      created: Math.floor(checkout.createdAt.getTime() / 1000),
      currency: checkout.currency.toLowerCase(),
      expires_at: checkout.expiresAt ? Math.floor(checkout.expiresAt.getTime() / 1000) : nowSec,
      livemode: false,
      metadata: sessionMetadata({
        checkoutId: checkout.id,
        purpose: checkout.purpose,
        accountId: checkout.accountId,
        orderId: checkout.orderId,
      }),
      mode: 'payment',
      payment_status: 'paid',
      status: 'complete',
      url: null,
    };
    return JSON.stringify({
      id: `evt_local_${randomBytes(12).toString('hex')}`,
      object: 'event',
      api_version: loadStripe().API_VERSION,
      created: nowSec,
      data: { object: session },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type: 'checkout.session.completed',
    });
  }

  /** The Stripe-Signature header for a payload, with the configured webhook secret. */
  sign(payload: string): string {
    return loadStripe().webhooks.generateTestHeaderString({
      payload,
      secret: this.options.webhookSecret,
      timestamp: Math.floor(this.options.clock.now().getTime() / 1000),
    });
  }

  /**
   * Delivers the paid event to a webhook URL over HTTP, as Stripe would. Returns the HTTP status.
   * The caller chooses the URL: this process's own listening socket, never a client-supplied host,
   * because the body is a validly signed payment.
   */
  async deliverPaidEvent(checkout: Checkout, webhookUrl: string): Promise<number> {
    const payload = this.paidEvent(checkout);
    const res = await fetch(webhookUrl, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json; charset=utf-8',
        'Stripe-Signature': this.sign(payload),
        'User-Agent': 'gpu-rental-dev-checkout',
      },
      body: payload,
      redirect: 'manual',
    });
    await res.arrayBuffer();
    return res.status;
  }
}
