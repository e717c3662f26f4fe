import { Get, OperationId, Query, Request, Response, Route, Security, Tags } from '@tsoa/runtime';
import type { Request as ExRequest } from 'express';
import { API_VERSION, type ErrorEnvelope } from '../../errors/envelope.js';
import { BaseController } from '../../http/controller-base.js';
import { principalOf } from '../keys/principal.js';
import type { EventPage } from './events.dto.js';
import { EVENT_PAGE, type EventsService } from './events.service.js';

@Route('api/v1/events')
@Tags('Events')
export class EventsController extends BaseController {
  constructor(private readonly events: EventsService) {
    super();
  }

  /**
   * The caller's events, oldest first, after `after`: `rental.provisioning`, `rental.active`,
   * `rental.failed`, `rental.terminating`, `rental.terminated`, `rental.expiring`,
   * `rental.idle_warning`, `credits.low`, `topup.paid`. Each is written with the change it reports
   * and carries what a read returned then. Agent keys see their own rentals' events and
   * `credits.low`; owner keys every event of the account. Without `after` the page is the newest
   * `limit` events of the caller's history (the latest 50 by default), oldest first: a first look
   * shows what happened. Keep `meta.nextAfter` and pass it as `after` next time for what follows
   * (`after=0` reads the history from its start). The stream (`Accept: text/event-stream`) starts
   * from now without `after` or `Last-Event-ID`.
   * @param after The last event id seen; absent: the newest page of history.
   * @param limit Events per page, 1 to 100 (default 50).
   * @isInt limit
   * @minimum limit 1
   * @maximum limit 100
   * @maxLength after 20
   */
  @Get()
  @OperationId('listEvents')
  @Security('bearer', ['read'])
  @Response<ErrorEnvelope>(400, 'INVALID_REQUEST (after is not an event id)')
  @Response<ErrorEnvelope>(401, 'UNAUTHENTICATED')
  @Response<ErrorEnvelope>(403, 'FORBIDDEN (no read scope)')
  @Response<ErrorEnvelope>(422, 'VALIDATION_FAILED (limit out of range)')
  async list(@Request() req: ExRequest, @Query() after?: string, @Query() limit?: number): Promise<EventPage> {
    const { events, nextAfter } = await this.events.page(principalOf(req), after, limit ?? EVENT_PAGE.default);
    return { data: events, meta: { requestId: req.requestId, apiVersion: API_VERSION, nextAfter } };
  }
}
