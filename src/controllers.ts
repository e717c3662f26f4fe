import type { Services } from './container.js';
import { ControllerFactories } from './http/ioc.js';
import { AccountsController } from './modules/accounts/accounts.controller.js';
import { AgentsController } from './modules/agents/agents.controller.js';
import { AccountEmailController } from './modules/billing/account-email.controller.js';
import { BillingController } from './modules/billing/billing.controller.js';
import { CardCheckoutController } from './modules/rentals/api/card-checkout.controller.js';
import { StripeWebhookController } from './modules/billing/stripe-webhook.controller.js';
import { InventoryController } from './modules/inventory/inventory.controller.js';
import { ProvidersController } from './modules/inventory/providers.controller.js';
import { ProviderChecksController } from './modules/inventory/provider-checks.controller.js';
import { DeploymentsController } from './modules/rentals/api/deployments.controller.js';
import { EventsController } from './modules/events/events.controller.js';
import { RentalsController } from './modules/rentals/api/rentals.controller.js';
import { ReceiptsController } from './modules/receipts/receipts.controller.js';
import { WebhookEndpointsController } from './modules/webhooks/webhooks.controller.js';

/**
 * The API's controllers, each built with the services it uses and nothing more. A controller
 * missing here answers 500 on every route it serves (test/unit/controllers.test.ts lists them).
 */
export function controllerFactories(s: Services): ControllerFactories {
  return new ControllerFactories()
    .add(InventoryController, () => new InventoryController(s.inventory))
    .add(ProvidersController, () => new ProvidersController(s.inventory))
    .add(ProviderChecksController, () => new ProviderChecksController(s.providerChecks))
    .add(AccountsController, () => new AccountsController(s.accounts))
    .add(AccountEmailController, () => new AccountEmailController(s.billing))
    .add(BillingController, () => new BillingController(s.billing, s.payments.topups))
    .add(CardCheckoutController, () => new CardCheckoutController(s.cardCheckout))
    .add(StripeWebhookController, () => new StripeWebhookController(s.payments.events))
    .add(RentalsController, () => new RentalsController(s.rentals, s.rentalReads, s.config.machines))
    .add(DeploymentsController, () => new DeploymentsController(s.rentals, s.rentalReads, s.credentials))
    .add(AgentsController, () => new AgentsController(s.agents, s.agentKeys))
    .add(EventsController, () => new EventsController(s.events))
    .add(WebhookEndpointsController, () => new WebhookEndpointsController(s.webhooks))
    .add(ReceiptsController, () => new ReceiptsController(s.receipts));
}
