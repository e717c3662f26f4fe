import { Account } from '../modules/accounts/account.entity.js';
import { ApiKey } from '../modules/keys/api-key.entity.js';
import { LedgerEntry } from '../modules/billing/ledger-entry.entity.js';
import { Offer } from '../modules/inventory/offer.entity.js';
import { ProviderStatus } from '../modules/inventory/provider-status.entity.js';
import { IdempotencyRecord } from '../modules/idempotency/idempotency-record.entity.js';
import { Order } from '../modules/rentals/order.entity.js';
import { Deployment } from '../modules/rentals/deployment.entity.js';
import { DeploymentAttempt } from '../modules/rentals/deployment-attempt.entity.js';
import { CredentialReveal } from '../modules/rentals/credential-reveal.entity.js';
import { AgentAuthorization } from '../modules/agents/agent-authorization.entity.js';
import { Checkout } from '../modules/billing/checkout.entity.js';
import { PaymentEvent } from '../modules/billing/payment-event.entity.js';

/** Every TypeORM entity. Register a new entity here. */
export const entities = [
  Account, ApiKey, LedgerEntry, Offer, IdempotencyRecord, Order, Deployment, Checkout, PaymentEvent,
  DeploymentAttempt, CredentialReveal,
  AgentAuthorization,
  ProviderStatus,
];
