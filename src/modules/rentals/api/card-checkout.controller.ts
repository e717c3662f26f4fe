import {
  Body,
  Header,
  OperationId,
  Post,
  Request,
  Response,
  Route,
  Security,
  SuccessResponse,
  Tags,
} from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../../errors/envelope.js';
import { BaseController } from '../../../http/controller-base.js';
import type { CardCheckoutService } from '../admission/card-checkout.service.js';
import { principalOf } from '../../keys/principal.js';
import type { CardCheckoutRequest, CardCheckoutResponse } from '../wire/card-checkout.dto.js';

@Route('api/v1/orders')
@Tags('Rentals')
export class CardCheckoutController extends BaseController {
  constructor(private readonly cardCheckout: CardCheckoutService) {
    super();
  }

  /**
   * The human card-payment path: creates a LEGACY_PREPAID rental of whole hours, paid by card
   * rather than credits, and returns a checkout URL a human opens to pay. Success means the
   * checkout exists, not that payment or provisioning is complete; once the payment is verified
   * the rental starts provisioning. Needs the `rent` scope, and counts against the key's
   * `maxConcurrentDeployments` from the moment it awaits payment. Needs an e-mail on the account (PUT /api/v1/me/email). The
   * same Idempotency-Key with the same body returns the same order and URL (also 201, as first
   * answered); with a different body, 409 IDEMPOTENCY_CONFLICT.
   * @param idempotencyKey A fresh UUID per purchase intent, reused with an identical body on retries.
   * @minLength idempotencyKey 1
   * @maxLength idempotencyKey 128
   */
  @Post('checkout')
  @OperationId('createCheckout')
  @Security('bearer', ['rent'])
  @SuccessResponse(201, 'Created')
  @Response<ErrorEnvelope>(400, 'Missing or malformed Idempotency-Key, or malformed JSON (INVALID_REQUEST)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (the key lacks the rent scope)')
  @Response<ErrorEnvelope>(
    409,
    'IDEMPOTENCY_CONFLICT, CONCURRENCY_LIMIT_REACHED (the key already runs or awaits its maximum of deployments)',
  )
  @Response<ErrorEnvelope>(
    422,
    'VALIDATION_FAILED (including an offerId not currently offered and budgetMinor above the offer maximum), BUDGET_TOO_SMALL (budgetMinor under 500, or buying no whole hour), EMAIL_REQUIRED',
  )
  @Response<ErrorEnvelope>(503, 'UNAVAILABLE (payment provider unreachable; retry with the same key)')
  async checkout(
    @Request() req: ExRequest,
    @Header('Idempotency-Key') idempotencyKey: string,
    @Body() body: CardCheckoutRequest,
  ): Promise<Envelope<CardCheckoutResponse>> {
    return this.ok(req, await this.cardCheckout.checkout(principalOf(req), idempotencyKey, body), 201);
  }
}
