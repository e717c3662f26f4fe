import { Extension, Get, OperationId, Request, Response, Route, Security, Tags } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import type { Envelope, ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import { principalOf } from '../keys/principal.js';
import type { ProviderCheckReportDto } from './provider-checks.dto.js';
import type { ProviderChecksService } from './provider-checks.service.js';

@Route('api/v1')
@Tags('Inventory')
export class ProviderChecksController extends BaseController {
  constructor(private readonly checks: ProviderChecksService) {
    super();
  }

  /**
   * Whether each configured cloud is usable, learned through read-only calls only (nothing is
   * created, registered or deleted): credentials accepted or the exact refusal, the account's
   * balance where the cloud tells it, offers listed and asks dropped per reason, SSH key
   * registration where a launch needs it, each call's time, and whether the edge accepted the
   * plugin's User-Agent; then one line per problem saying what to change. The same report as
   * `owner providers check --json` on the server. For the operator: an OWNER key with admin.
   * The report of one run is reused for a short while (`checkedAt` says when it ran), and each key
   * may ask a few times a minute (429 past that).
   */
  @Get('providers/check')
  @OperationId('checkProviders')
  @Extension('x-owner-only', true)
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (not an OWNER key with admin, or missing read)')
  @Response<ErrorEnvelope>(429, 'RATE_LIMITED (per key; see Retry-After)')
  async check(@Request() req: ExRequest): Promise<Envelope<ProviderCheckReportDto>> {
    return this.ok(req, await this.checks.checkFor(principalOf(req)));
  }
}
