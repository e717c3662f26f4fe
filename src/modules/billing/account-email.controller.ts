import { Body, OperationId, Put, Request, Response, Route, Security, Tags } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import type { BillingService } from './billing.service.js';
import { principalOf } from '../keys/principal.js';
import type { EmailRequest, EmailResponse } from './billing.dto.js';

@Route('api/v1/me')
@Tags('Account')
export class AccountEmailController extends BaseController {
  constructor(private readonly billing: BillingService) {
    super();
  }

  /**
   * Sets the account's e-mail, which the card checkout path requires (receipts go there). Owner
   * keys, or keys with the billing scope.
   */
  @Put('email')
  @OperationId('setAccountEmail')
  @Security('bearer')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (neither an owner key nor the billing scope)')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED')
  async setEmail(@Request() req: ExRequest, @Body() body: EmailRequest): Promise<Envelope<EmailResponse>> {
    return this.ok(req, await this.billing.setEmail(principalOf(req), body.email));
  }
}
