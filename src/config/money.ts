import { createHash } from 'node:crypto';
import { choice, ConfigError, int, opt, optUrl, type Env } from '../config-values.js';

export const BILLING_MODELS = ['ACCOUNT_BALANCE', 'LEGACY_PREPAID'] as const;
export type BillingModel = (typeof BILLING_MODELS)[number];

/** How accounts pay. */
export interface BillingConfig {
  /** Billing model of new accounts (DEFAULT_BILLING_MODEL). */
  defaultModel: BillingModel;
  /** A debit that takes an account's credits below this (cents) writes `credits.low` (and the bot's low-credits message). */
  lowCreditsMinor: number;
}

/** The payment provider: Stripe, or the built-in development payment page when no key is set. */
export interface StripeConfig {
  secretKey?: string;
  /** Signing secret of the webhook endpoint; a fixed, public one in development. */
  webhookSecret: string;
  /** `webhookSecret` is the development one: STRIPE_WEBHOOK_SECRET was not set. */
  webhookSecretGenerated: boolean;
  apiUrl?: string;
}

/** DEFAULT_BILLING_MODEL and LOW_CREDITS_MINOR. */
export function readBilling(env: Env): BillingConfig {
  return {
    defaultModel: choice(env, 'DEFAULT_BILLING_MODEL', BILLING_MODELS, 'ACCOUNT_BALANCE'),
    lowCreditsMinor: int(env, 'LOW_CREDITS_MINOR', 500, 0, 100_000_000),
  };
}

/** STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET and STRIPE_API_URL. */
export function readStripe(env: Env): StripeConfig {
  const secretKey = opt(env, 'STRIPE_SECRET_KEY', { secret: true });
  const webhookSecret = opt(env, 'STRIPE_WEBHOOK_SECRET', { secret: true });
  if (secretKey && webhookSecret === undefined) {
    // The development webhook secret is public: with real Stripe money behind it, anyone could sign a payment.
    throw new ConfigError(
      'STRIPE_WEBHOOK_SECRET is required when STRIPE_SECRET_KEY is set (the signing secret of your Stripe webhook endpoint, whsec_...)',
    );
  }
  return {
    secretKey,
    // Fixed in development so every api process verifies what the local payment page signed.
    webhookSecret:
      webhookSecret ??
      `whsec_dev_${createHash('sha256').update('gpu-rental development webhook secret').digest('hex').slice(0, 32)}`,
    webhookSecretGenerated: webhookSecret === undefined,
    apiUrl: optUrl(env, 'STRIPE_API_URL', ['http:', 'https:']),
  };
}
