import { Get, Query, Request, Response, Route, Security, Tags } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import type { BalanceResponse } from './billing.dto.js';

@Route('api/v1/billing')
@Tags('Billing')
export class BillingController extends BaseController {
  /**
   * Credit balance and the most recent ledger entries.
   * @param limit How many entries, newest first (default 50).
   * @isInt limit
   * @minimum limit 1
   * @maximum limit 200
   */
  @Get('balance')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED')
  async balance(@Request() req: ExRequest, @Query() limit?: number): Promise<Envelope<BalanceResponse>> {
    return this.ok(req, await this.services.billing.balance(this.principal(req), limit ?? 50));
  }
}
