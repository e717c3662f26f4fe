import {
  Body,
  Extension,
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
import { API_VERSION, type Envelope, type ErrorEnvelope } from '../../../errors/envelope.js';
import { BaseController } from '../../../http/controller-base.js';
import { lookupId } from '../../../ids.js';
import { parseWait, type RentalReadsService } from '../reads/rental-reads.service.js';
import type { CreateResult, RentalsService } from '../admission/rental-requests.service.js';
import { principalOf } from '../../keys/principal.js';
import { requireIdempotencyKey } from '../../idempotency/idempotency.js';
import type { MachinePolicy } from '../admission/machine-settings.js';
import { rentalIntent } from '../admission/rental-intent.js';
import type { CreateRentalRequest, RentalDto, RentalPage } from '../wire/rentals.dto.js';
import { RENTAL_PAGE } from '../wire/rental-dto.js';
import { countAdmission } from '../../../metrics/outcomes.js';

@Route('api/v1/rentals')
@Tags('Rentals')
export class RentalsController extends BaseController {
  constructor(
    private readonly rentals: RentalsService,
    private readonly reads: RentalReadsService,
    /** What the operator allows of any machine: a rental's settings are parsed against it here, once. */
    private readonly machinePolicy: MachinePolicy,
  ) {
    super();
  }

  /**
   * Rents a GPU machine paid from credits: either one exact offer (`offerId`) or a GPU intent
   * (`gpuModel`, `gpuCount`, `maxHourlyPriceMinor`), never both and nothing else. One order and
   * one deployment are created atomically; provisioning is asynchronous, so keep `rentalId` and
   * `deploymentId` and wait with GET /api/v1/rentals/{id}?waitFor=ACTIVE,FAILED, answered the
   * moment its status is one of those.
   *
   * Billing follows the account (see `billing` on GET /api/v1/me): LEGACY_PREPAID needs
   * `budgetMinor` (at least 500) and debits whole hours now; ACCOUNT_BALANCE debits nothing now and
   * charges usage per second of ACTIVE time, up to `budgetMinor` when given (MAX_SPEND_METERED)
   * and always up to the key's per-rental cap.
   *
   * 201 for a new rental; 200 with the same rental for the same Idempotency-Key and body; 409
   * IDEMPOTENCY_CONFLICT for the same key with a different body. Keys are scoped to the account.
   * @param idempotencyKey 1 to 128 printable characters; retries keep the same key and body.
   * @minLength idempotencyKey 1
   * @maxLength idempotencyKey 128
   */
  @Post()
  @OperationId('createRental')
  @Extension('x-revocation-checked-in-transaction', true)
  @Extension('x-retry-after', [503])
  @Security('bearer', ['rent'])
  @SuccessResponse(201, 'Created')
  @Response<Envelope<RentalDto>>(200, 'Replay of the same Idempotency-Key and body')
  @Response<ErrorEnvelope>(400, 'Missing or malformed Idempotency-Key, or malformed JSON (INVALID_REQUEST)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(402, 'INSUFFICIENT_CREDITS, ACCOUNT_FROZEN (frozen or negative account)')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no rent scope), KEY_LIMIT_EXCEEDED (per-rental cap or key budget)')
  @Response<ErrorEnvelope>(404, 'OFFER_NOT_FOUND (the offer id was never in the inventory)')
  @Response<ErrorEnvelope>(409, 'IDEMPOTENCY_CONFLICT, CONCURRENCY_LIMIT_REACHED')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED, BUDGET_REQUIRED, BUDGET_TOO_SMALL, NO_MATCHING_OFFER')
  @Response<ErrorEnvelope>(
    429,
    "RATE_LIMITED (the key's last 3 rentals in 24 hours failed after their machines ran its startup script or image but never passed the check)",
  )
  @Response<ErrorEnvelope>(503, 'UNAVAILABLE (also while billing catches up with running rentals)')
  async create(
    @Request() req: ExRequest,
    @Header('Idempotency-Key') idempotencyKey: string,
    @Body() body: CreateRentalRequest,
  ): Promise<Envelope<RentalDto>> {
    const { status, rental } = await countAdmission(this.admit(req, idempotencyKey, body));
    return this.ok(req, rental, status);
  }

  /**
   * The body as tsoa admitted it becomes its domain value here, once (admission checks no shape
   * again); a refusal of the key or the settings is counted like admission's own.
   */
  private async admit(req: ExRequest, idempotencyKey: string, body: CreateRentalRequest): Promise<CreateResult> {
    const principal = principalOf(req);
    const key = requireIdempotencyKey(idempotencyKey);
    const intent = rentalIntent(body, this.machinePolicy);
    return this.rentals.create(principal, key, intent);
  }

  /**
   * The caller's rentals, newest first, each as GET /api/v1/rentals/{id} shows it. Agent keys see
   * only their own; owner keys every rental of the account. Pages: pass `meta.nextCursor` as
   * `cursor` until it is null. An unreadable cursor is 400 INVALID_REQUEST.
   * @param limit Rentals per page, 1 to 100 (default 20).
   * @param cursor Opaque: the previous page's `meta.nextCursor`.
   * @isInt limit
   * @minimum limit 1
   * @maximum limit 100
   * @maxLength cursor 200
   */
  @Get()
  @OperationId('listRentals')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(400, 'INVALID_REQUEST (an unreadable cursor)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no read scope)')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED (limit out of range)')
  async list(@Request() req: ExRequest, @Query() limit?: number, @Query() cursor?: string): Promise<RentalPage> {
    const { rentals, nextCursor } = await this.reads.list(principalOf(req), limit ?? RENTAL_PAGE.default, cursor);
    return { data: rentals, meta: { requestId: req.requestId, apiVersion: API_VERSION, nextCursor } };
  }

  /**
   * One rental with its deployment and quote. When FAILED, `failureCode` and `failureReason` say
   * why in customer-safe words and `reversalStatus` whether the debit has been returned (PENDING,
   * then SUCCEEDED). Agent keys see only their own rentals; owner keys every rental of the account.
   *
   * A waiting read: with `waitFor` (e.g. `ACTIVE,FAILED`) the answer is held until the status is
   * one of those (at once if it already is) or `waitSeconds` pass, then given as a plain read would
   * give it (200 either way: compare `status`). Use it instead of polling.
   * @param id The rental (order) id.
   * @param waitFor Statuses to wait for, comma separated (PENDING, PROVISIONING, ACTIVE, TERMINATING, TERMINATED, FAILED, AWAITING_PAYMENT).
   * @param waitSeconds How long to wait at most, 1 to 30 (default 25); only with waitFor.
   * @maxLength waitFor 200
   * @isInt waitSeconds
   * @minimum waitSeconds 1
   * @maximum waitSeconds 30
   */
  @Get('{id}')
  @OperationId('getRental')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(402, 'Never for this read: a frozen or negative account still reads its rentals.')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  @Response<ErrorEnvelope>(409, 'Never for this read: it changes nothing, so nothing can conflict.')
  @Response<ErrorEnvelope>(
    422,
    'VALIDATION_FAILED (waitFor names an unknown status, waitSeconds out of range); any id is accepted, and one that names no rental of the caller is 404 NOT_FOUND.',
  )
  async get(
    @Request() req: ExRequest,
    @Path() id: string,
    @Query() waitFor?: string,
    @Query() waitSeconds?: number,
  ): Promise<Envelope<RentalDto>> {
    return this.ok(req, await this.reads.get(principalOf(req), lookupId(id), parseWait(waitFor, waitSeconds)));
  }
}
