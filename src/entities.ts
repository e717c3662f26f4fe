import type { EntityList } from './db/data-source.js';
import { Account } from './modules/accounts/account.entity.js';
import { AgentAuthorization } from './modules/agents/agent-authorization.entity.js';
import { Checkout } from './modules/billing/checkout.entity.js';
import { LedgerEntry } from './modules/billing/ledger-entry.entity.js';
import { PaymentEvent } from './modules/billing/payment-event.entity.js';
import { IdempotencyRecord } from './modules/idempotency/idempotency-record.entity.js';
import { Offer } from './modules/inventory/offer.entity.js';
import { ProviderStatus } from './modules/inventory/provider-status.entity.js';
import { ApiKey } from './modules/keys/api-key.entity.js';
import { CredentialReveal } from './modules/credentials/credential-reveal.entity.js';
import { DeploymentAttempt } from './modules/rentals/store/deployment-attempt.entity.js';
import { Deployment } from './modules/rentals/store/deployment.entity.js';
import { Order } from './modules/rentals/store/order.entity.js';
import { ReceiptSigningKey } from './modules/receipts/receipt-signing-key.entity.js';
import { TeardownReceipt } from './modules/receipts/teardown-receipt.entity.js';

/**
 * Every TypeORM entity of the service, handed to createDataSource by whoever opens the database.
 * Listed here, beside the composition root, so that db/ never imports a module. Register a new
 * entity here.
 */
export const entities: EntityList = [
  Account,
  ApiKey,
  LedgerEntry,
  Offer,
  IdempotencyRecord,
  Order,
  Deployment,
  Checkout,
  PaymentEvent,
  DeploymentAttempt,
  CredentialReveal,
  AgentAuthorization,
  ProviderStatus,
  ReceiptSigningKey,
  TeardownReceipt,
];
