import type { Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import type { Logger } from '../../logger.js';
import { LocalPaymentProvider } from './local-payment-provider.js';
import type { PaymentProvider } from './payment-provider.js';
import { StripePaymentProvider } from './stripe-payment-provider.js';

/**
 * Stripe when a secret key is configured; otherwise the local development checkout. Production
 * gets no provider at all without a Stripe key (a self-service "Pay" button that credits money
 * must never be reachable there) or without its own webhook secret (the development one is public,
 * so anyone could sign a payment with it).
 */
export function createPaymentProvider(config: Config, clock: Clock, logger: Logger): PaymentProvider | null {
  if (config.nodeEnv === 'production' && config.stripe.webhookSecretGenerated) {
    logger.error('STRIPE_WEBHOOK_SECRET is not set: top-ups and card checkout are unavailable');
    return null;
  }
  if (config.stripe.secretKey) {
    // config.ts refuses a Stripe key without its webhook secret.
    return new StripePaymentProvider({ secretKey: config.stripe.secretKey, apiUrl: config.stripe.apiUrl });
  }
  if (config.nodeEnv === 'production') {
    logger.warn('STRIPE_SECRET_KEY is not set: top-ups and card checkout are unavailable');
    return null;
  }
  return new LocalPaymentProvider({
    publicBaseUrl: config.http.publicBaseUrl,
    webhookSecret: config.stripe.webhookSecret,
    clock,
  });
}
