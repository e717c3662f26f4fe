import { Header, OperationId, Post, Request, Response, Route, Tags } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import type { PaymentEventsService } from './payment-events.service.js';
import type { WebhookAck } from './billing.dto.js';

@Route('api/v1/webhooks')
@Tags('Webhooks')
export class StripeWebhookController extends BaseController {
  constructor(private readonly events: PaymentEventsService) {
    super();
  }

  /**
   * Inbound Stripe events; not part of the agent contract. The body must be the event exactly as
   * Stripe signed it, with its `Stripe-Signature` header (HMAC-SHA256 with the endpoint's signing
   * secret, at most 300 s old). `checkout.session.completed` with payment_status `paid` and
   * `checkout.session.async_payment_succeeded` credit the top-up once (or release a card order);
   * `checkout.session.expired` closes the checkout; other types are acknowledged and ignored.
   * A bad signature is 400 and nothing is written.
   */
  @Post('stripe')
  @OperationId('receiveStripeWebhook')
  @Response<ErrorEnvelope>(400, 'INVALID_REQUEST (missing or invalid signature, or not the signed JSON body)')
  @Response<ErrorEnvelope>(503, 'UNAVAILABLE (no webhook secret configured in production)')
  async stripe(
    @Request() req: ExRequest,
    @Header('Stripe-Signature') signature?: string,
  ): Promise<Envelope<WebhookAck>> {
    return this.ok(req, await this.events.receiveStripe(req.rawBody, signature));
  }
}
