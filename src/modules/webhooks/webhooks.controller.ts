import {
  Body,
  Delete,
  Get,
  Header,
  OperationId,
  Path,
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
import { lookupId } from '../../ids.js';
import { principalOf } from '../keys/principal.js';
import type {
  CreateWebhookEndpointRequest,
  WebhookDeliveryDto,
  WebhookEndpointCreated,
  WebhookEndpointDto,
} from './webhooks.dto.js';
import type { WebhooksService } from './webhooks.service.js';

@Route('api/v1/webhook-endpoints')
@Tags('Webhook endpoints')
export class WebhookEndpointsController extends BaseController {
  constructor(private readonly webhooks: WebhooksService) {
    super();
  }

  /**
   * Events pushed to your URL as they happen, instead of polling. Each delivery is a POST of the
   * event as `GET /api/v1/events` shows it, signed per Standard Webhooks: headers `webhook-id`
   * (the event id, the same on every retry: drop ids you already have), `webhook-timestamp` (unix
   * seconds) and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`
   * keyed by the base64-decoded part of `secret` after `whsec_`). Answer 2xx within 10 seconds;
   * anything else (a redirect too: none is followed) is retried after 30 s, then at doubling
   * waits up to an hour, for 24 hours. An agent key's endpoint receives what that key may see
   * (its own rentals' events and `credits.low`); an owner key's, every event of the account.
   * Revoking the key that made an endpoint stops it (`status: STOPPED`). A key may have made 10
   * live endpoints; an account has at most 3 tries in flight at once, the rest wait their turn.
   * `url` is kept as parsed. 201 with `secret` once; an identical replay of the Idempotency-Key
   * answers 200 with `secret: null`.
   * @param idempotencyKey 1 to 128 characters, fresh per endpoint you mean to make.
   */
  @Post()
  @OperationId('createWebhookEndpoint')
  @Security('bearer', ['manage'])
  @SuccessResponse(201, 'Created')
  @Response<Envelope<WebhookEndpointCreated>>(200, 'An identical replay: the same endpoint, `secret: null`')
  @Response<ErrorEnvelope>(400, 'INVALID_REQUEST (missing or malformed Idempotency-Key)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no manage scope)')
  @Response<ErrorEnvelope>(409, 'IDEMPOTENCY_CONFLICT')
  @Response<ErrorEnvelope>(
    422,
    'VALIDATION_FAILED (url not https, with control characters, a host that reads differently once parsed, or no address webhooks may reach; eventTypes empty or unknown; the key already has 10 endpoints)',
  )
  async create(
    @Request() req: ExRequest,
    @Header('Idempotency-Key') idempotencyKey: string | undefined,
    @Body() body: CreateWebhookEndpointRequest,
  ): Promise<Envelope<WebhookEndpointCreated>> {
    const { endpoint, created } = await this.webhooks.create(principalOf(req), idempotencyKey, body);
    return this.ok(req, endpoint, created ? 201 : 200);
  }

  /**
   * Your endpoints (an owner key: every endpoint of the account), newest first, never their
   * secrets; each says whether it still receives events (`status`, `stoppedReason`).
   */
  @Get()
  @OperationId('listWebhookEndpoints')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  async list(@Request() req: ExRequest): Promise<Envelope<WebhookEndpointDto[]>> {
    return this.ok(req, await this.webhooks.list(principalOf(req)));
  }

  /** Deletes an endpoint: nothing more is sent to it, retries included. */
  @Delete('{id}')
  @OperationId('deleteWebhookEndpoint')
  @Security('bearer', ['manage'])
  @SuccessResponse(204, 'Deleted')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no manage scope)')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  async delete(@Request() req: ExRequest, @Path() id: string): Promise<void> {
    await this.webhooks.delete(principalOf(req), lookupId(id));
    this.setStatus(204);
  }

  /** The endpoint's last 100 deliveries, newest event first, each with its tries (status code, error, time). */
  @Get('{id}/deliveries')
  @OperationId('listWebhookDeliveries')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  async deliveries(@Request() req: ExRequest, @Path() id: string): Promise<Envelope<WebhookDeliveryDto[]>> {
    return this.ok(req, await this.webhooks.deliveries(principalOf(req), lookupId(id)));
  }

  /**
   * Sends a delivery again now, with the same `webhook-id`, whatever its status, and retries it
   * for another 24 hours if it fails. At most 5 times an hour per delivery and 100 per key (429
   * with `Retry-After` past that). Send no body.
   */
  @Post('{id}/deliveries/{deliveryId}/redeliver')
  @OperationId('redeliverWebhook')
  @Security('bearer', ['manage'])
  @SuccessResponse(202, 'Accepted')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no manage scope)')
  @Response<ErrorEnvelope>(404, 'NOT_FOUND')
  @Response<ErrorEnvelope>(429, 'RATE_LIMITED (per delivery and per key; see Retry-After)')
  async redeliver(@Request() req: ExRequest, @Path() id: string, @Path() deliveryId: string): Promise<void> {
    await this.webhooks.redeliver(principalOf(req), lookupId(id), lookupId(deliveryId));
    this.setStatus(202);
  }
}
