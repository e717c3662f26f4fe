import {
  Extension,
  Get,
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
import type { Envelope, ErrorEnvelope } from '../../../errors/envelope.js';
import { assertBodyless } from '../../../http/bodyless.js';
import { BaseController } from '../../../http/controller-base.js';
import { lookupId } from '../../../ids.js';
import { parseWait, type RentalReadsService } from '../reads/rental-reads.service.js';
import type { RentalsService } from '../admission/rental-requests.service.js';
import type { CredentialsService } from '../../credentials/credentials.service.js';
import { principalOf } from '../../keys/principal.js';
import type { CredentialsDto, DeploymentDto, TerminateAccepted } from '../wire/rentals.dto.js';

@Route('api/v1/deployments')
@Tags('Deployments')
export class DeploymentsController extends BaseController {
  constructor(
    private readonly rentals: RentalsService,
    private readonly reads: RentalReadsService,
    private readonly credentials: CredentialsService,
  ) {
    super();
  }

  /**
   * Deployments of the calling key's account, newest first. Agent keys see only their own.
   * @param limit How many (default 100).
   * @isInt limit
   * @minimum limit 1
   * @maximum limit 500
   */
  @Get()
  @OperationId('listDeployments')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED')
  async list(@Request() req: ExRequest, @Query() limit?: number): Promise<Envelope<DeploymentDto[]>> {
    return this.ok(req, await this.reads.listDeployments(principalOf(req), limit ?? 100));
  }

  /**
   * One deployment. Agent keys see only their own; owner keys every deployment of the account.
   * With `waitFor` the answer waits for one of those statuses, as GET /api/v1/rentals/{id} does.
   * @param waitFor Statuses to wait for, comma separated (e.g. ACTIVE,FAILED).
   * @param waitSeconds How long to wait at most, 1 to 30 (default 25); only with waitFor.
   * @maxLength waitFor 200
   * @isInt waitSeconds
   * @minimum waitSeconds 1
   * @maximum waitSeconds 30
   */
  @Get('{id}')
  @OperationId('getDeployment')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED (waitFor names an unknown status, waitSeconds out of range)')
  async get(
    @Request() req: ExRequest,
    @Path() id: string,
    @Query() waitFor?: string,
    @Query() waitSeconds?: number,
  ): Promise<Envelope<DeploymentDto>> {
    return this.ok(
      req,
      await this.reads.getDeployment(principalOf(req), lookupId(id), parseWait(waitFor, waitSeconds)),
    );
  }

  /**
   * Terminates the deployment: irreversible, everything on the instance is destroyed. Accepted at
   * once (202) and repeatable; the deployment goes TERMINATING, then TERMINATED once the provider
   * reports the instance gone and its SSH key no longer gets in (`endedAt` is that moment). Legacy
   * rentals forfeit their remaining paid time; metered rentals stop accruing and settle actual use.
   * Every answer, a repeat included, gives the status after the request, `terminateRequestedAt`
   * and a `message`; one that had already finished says it is TERMINATED or FAILED.
   * Send no body and no JSON Content-Type. Agent keys may terminate only their own deployments.
   * @param id The deployment id, or the id of its rental (the same access rules apply).
   */
  @Post('{id}/terminate')
  @OperationId('terminateDeployment')
  @Security('bearer', ['manage'])
  @SuccessResponse(202, 'Accepted')
  @Response<ErrorEnvelope>(400, 'INVALID_REQUEST (a JSON Content-Type on this bodyless call)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no manage scope)')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  async terminate(@Request() req: ExRequest, @Path() id: string): Promise<Envelope<TerminateAccepted>> {
    assertBodyless(req);
    return this.ok(req, await this.rentals.terminate(principalOf(req), lookupId(id)), 202);
  }

  /**
   * SSH access to an ACTIVE deployment: host, port, user, its own private key and a ready `ssh`
   * command line. Every call is audited (key, time, request id, and whether it revealed; refused calls are
   * counted per key, reason and minute). Before ACTIVE and after termination there are no credentials to
   * reveal: 409 DEPLOYMENT_NOT_ACTIVE names the status, with `Retry-After` while it is PENDING or
   * PROVISIONING; TERMINATING, TERMINATED and FAILED never become ACTIVE again, so do not retry those.
   * Send no body and no JSON Content-Type. Needs the `manage` scope, like termination: the key
   * is root on the machine, so a read-only key must not obtain it.
   * @param id The deployment id, or the id of its rental (the same access rules apply).
   */
  @Post('{id}/credentials/reveal')
  @OperationId('revealCredentials')
  @Extension('x-retry-after', [409])
  @Security('bearer', ['manage'])
  @Response<ErrorEnvelope>(400, 'INVALID_REQUEST (a JSON Content-Type on this bodyless call)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no manage scope)')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND (no deployment or rental with this id for this key)')
  @Response<ErrorEnvelope>(
    409,
    'DEPLOYMENT_NOT_ACTIVE (not ACTIVE now: the message gives the status; Retry-After while it is starting)',
  )
  async reveal(@Request() req: ExRequest, @Path() id: string): Promise<Envelope<CredentialsDto>> {
    try {
      assertBodyless(req);
    } catch (err) {
      await this.credentials.recordRefusal(principalOf(req), lookupId(id), req.requestId, 'JSON_BODY');
      throw err;
    }
    this.setHeader('Cache-Control', 'no-store');
    return this.ok(req, await this.credentials.reveal(principalOf(req), lookupId(id), req.requestId));
  }
}
