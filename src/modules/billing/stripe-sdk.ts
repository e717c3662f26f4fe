import { createRequire } from 'node:module';
import type StripeSdk from 'stripe';

/**
 * The Stripe SDK, loaded on first use (a payment, a refund, a webhook's signature) instead of at
 * start-up, so processes that never touch a payment do not carry its 3 MB of heap. A plain require,
 * so the callers stay synchronous; Node caches the module after the first call. Every caller
 * takes it from here, so its error classes are the ones its client throws.
 */
export function loadStripe(): typeof StripeSdk {
  return createRequire(import.meta.url)('stripe') as typeof StripeSdk;
}
