import {
  Body,
  Get,
  Header,
  OperationId,
  Path,
  Post,
  Query,
  Request,
  Response,
  Route,
  Security,
  SuccessResponse,
  Tags,
} from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import type { BillingService } from './billing.service.js';
import type { TopupsService } from './topups.service.js';
import { principalOf } from '../keys/principal.js';
import type { BalanceResponse, TopupDto, TopupRequest } from './billing.dto.js';

@Route('api/v1/billing')
@Tags('Billing')
export class BillingController extends BaseController {
  constructor(
    private readonly billing: BillingService,
    private readonly topups: TopupsService,
  ) {
    super();
  }

  /**
   * Credit balance and the most recent ledger entries: each with its kind, signed amount, the
   * balance after it, its unique cause reference and its time.
   * @param limit How many entries, newest first (default 50).
   * @param before Only entries older than this entry id (the previous page's `nextBefore`).
   * @isInt limit
   * @minimum limit 1
   * @maximum limit 200
   * @isInt before
   * @minimum before 1
   */
  @Get('balance')
  @OperationId('getBalance')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(
    402,
    'Never for this read: a frozen or negative account still reads its balance and entries. ACCOUNT_FROZEN and INSUFFICIENT_CREDITS answer the calls that spend.',
  )
  @Response<ErrorEnvelope>(403, 'FORBIDDEN')
  @Response<ErrorEnvelope>(
    404,
    'Never for this read: a valid key always has its account; `before` past the oldest entry is an empty page, not 404.',
  )
  @Response<ErrorEnvelope>(409, 'Never for this read: it changes nothing, so nothing can conflict.')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED')
  async balance(
    @Request() req: ExRequest,
    @Query() limit?: number,
    @Query() before?: number,
  ): Promise<Envelope<BalanceResponse>> {
    return this.ok(req, await this.billing.balance(principalOf(req), limit ?? 50, before));
  }

  /**
   * A hosted top-up link for a human to pay once by card. Only the payment provider's verified
   * paid event credits the balance. 201 for a new top-up; 200 when the same Idempotency-Key and
   * body are sent again (same link, current status); 409 IDEMPOTENCY_CONFLICT for the same key
   * with a different amount; 410 TOPUP_EXPIRED when that key's link expired unpaid (use a new key).
   * Keys are scoped to the account.
   * @param idempotencyKey 1 to 128 printable characters; reuse it after a timeout.
   * @minLength idempotencyKey 1
   * @maxLength idempotencyKey 128
   */
  @Post('topups')
  @OperationId('createTopup')
  @Security('bearer', ['billing'])
  @SuccessResponse(201, 'Created')
  @Response<Envelope<TopupDto>>(200, 'Replay of the same Idempotency-Key and body')
  @Response<ErrorEnvelope>(400, 'Missing or malformed Idempotency-Key, or malformed JSON (INVALID_REQUEST)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(
    402,
    'Never for this call: adding credits is how a frozen or negative account recovers, so it is always allowed.',
  )
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (the key lacks the billing scope)')
  @Response<ErrorEnvelope>(
    404,
    'Never for this call: it names no existing resource (GET /api/v1/billing/topups/{topupId} answers NOT_FOUND for an unknown top-up).',
  )
  @Response<ErrorEnvelope>(409, 'IDEMPOTENCY_CONFLICT')
  @Response<ErrorEnvelope>(410, 'TOPUP_EXPIRED')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED')
  @Response<ErrorEnvelope>(503, 'UNAVAILABLE (payment provider unreachable; retry with the same key)')
  async createTopup(
    @Request() req: ExRequest,
    @Header('Idempotency-Key') idempotencyKey: string,
    @Body() body: TopupRequest,
  ): Promise<Envelope<TopupDto>> {
    const { status, topup } = await this.topups.create(principalOf(req), idempotencyKey, body);
    return this.ok(req, topup, status);
  }

  /** One of this account's top-ups and whether it has been paid. */
  @Get('topups/{topupId}')
  @OperationId('getTopup')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  async getTopup(@Request() req: ExRequest, @Path() topupId: string): Promise<Envelope<TopupDto>> {
    return this.ok(req, await this.topups.get(principalOf(req), topupId));
  }
}
