import {
  Body,
  Get,
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
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import type { AccountsService } from './accounts.service.js';
import { principalOf } from '../keys/principal.js';
import type { AccountDto, SignupRequest, SignupResponse } from './accounts.dto.js';

@Route('api/v1')
@Tags('Account')
export class AccountsController extends BaseController {
  constructor(private readonly accounts: AccountsService) {
    super();
  }

  /**
   * Headless signup: creates a new zero-balance account and an AGENT key with scopes
   * read, rent, manage and billing. The raw token is returned once; only its hash is kept.
   * Repeating an Idempotency-Key that completed returns 409 SIGNUP_ALREADY_COMPLETED without
   * the token; the same key with a changed body returns 409 IDEMPOTENCY_CONFLICT. A signup sent
   * with a working API key of an existing account is refused with 409 SIGNUP_ALREADY_COMPLETED
   * (it would make a second, empty account); a key that does not authenticate is ignored.
   * @param idempotencyKey A UUID, fresh per signup intent.
   * @param authorization Not needed. When it holds a working key, the signup is refused (see above).
   * @pattern idempotencyKey ^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$
   */
  @Post('signup')
  @OperationId('signup')
  @SuccessResponse(201, 'Created')
  @Response<ErrorEnvelope>(400, 'Missing or malformed Idempotency-Key, or malformed JSON (INVALID_REQUEST)')
  @Response<ErrorEnvelope>(
    409,
    'SIGNUP_ALREADY_COMPLETED (this Idempotency-Key already signed up, or the request carries a working key of an existing account) or IDEMPOTENCY_CONFLICT',
  )
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED')
  @Response<ErrorEnvelope>(429, 'RATE_LIMITED (see Retry-After)')
  @Response<ErrorEnvelope>(503, 'AGENTS_DISABLED')
  async signup(
    @Request() req: ExRequest,
    @Header('Idempotency-Key') idempotencyKey: string,
    @Body() body?: SignupRequest,
    @Header('Authorization') authorization?: string,
  ): Promise<Envelope<SignupResponse>> {
    return this.ok(req, await this.accounts.signup(idempotencyKey, body, authorization), 201);
  }

  /** The calling key's account: user, key and its limits, balance, and billing model. */
  @Get('me')
  @OperationId('getAccount')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(
    402,
    'Never for this read: a frozen or negative account still reads its state (`balance.frozen`, `balance.creditsMinor`). ACCOUNT_FROZEN and INSUFFICIENT_CREDITS answer the calls that spend.',
  )
  @Response<ErrorEnvelope>(403, 'FORBIDDEN')
  @Response<ErrorEnvelope>(
    404,
    'Never for this read: a valid key always has its account; a revoked key gets the uniform 401.',
  )
  @Response<ErrorEnvelope>(409, 'Never for this read: it changes nothing, so nothing can conflict.')
  @Response<ErrorEnvelope>(422, 'Never for this read: it takes no parameters.')
  async me(@Request() req: ExRequest): Promise<Envelope<AccountDto>> {
    return this.ok(req, await this.accounts.describe(principalOf(req)));
  }
}
