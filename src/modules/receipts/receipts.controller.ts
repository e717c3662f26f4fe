import { Get, OperationId, Path, Request, Response, Route, Security, Tags } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import { lookupId } from '../../ids.js';
import { principalOf } from '../keys/principal.js';
import type { SignedReceiptDto } from './receipts.dto.js';
import type { ReceiptsService } from './receipts.service.js';

@Route('api/v1/rentals')
@Tags('Rentals')
export class ReceiptsController extends BaseController {
  constructor(private readonly receipts: ReceiptsService) {
    super();
  }

  /**
   * The rental's teardown receipt: what the service verified when it destroyed the machine
   * (provider, instance, the provider's final answer, how a login with the rental's key failed,
   * what the rental was charged), signed with Ed25519. Keep `data` as it is: anyone can check it
   * offline against the keys at `/.well-known/gpr-receipt-keys.json` (`gpr receipt verify`; the
   * format and the canonical form are in docs/teardown-receipts.md). Issued once, when a rental
   * paid from credits becomes TERMINATED after a verified destruction; whoever can read the rental
   * can read it.
   * @param id The rental (order) id, or its deployment's id.
   */
  @Get('{id}/receipt')
  @OperationId('getRentalReceipt')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no read scope)')
  @Response<ErrorEnvelope>(
    404,
    'NOT_FOUND: no rental of the caller has this id, or the rental has no receipt; the message says why and, for a rental still running or ending, that one is issued when it becomes TERMINATED.',
  )
  async get(@Request() req: ExRequest, @Path() id: string): Promise<Envelope<SignedReceiptDto>> {
    return this.ok(req, await this.receipts.forRental(principalOf(req), lookupId(id)));
  }
}
