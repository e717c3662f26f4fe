import type { EventType } from './event-types.js';

/** One event of the durable log. */
export interface EventDto {
  /**
   * The event's number among its account's events, growing with time (other accounts' events do
   * not move it): pass the last one seen as `after` (or the stream's `Last-Event-ID`) to resume.
   * @example "1042"
   */
  id: string;
  type: EventType;
  /** @format date-time */
  createdAt: string;
  /**
   * What a read returned at that moment: the rental as `GET /api/v1/rentals/{id}` shows it for
   * `rental.*` events; the account's balance and billing for `credits.low` and `topup.paid`.
   */
  data: { [key: string]: unknown };
}

/** `meta` of a page of events: the envelope's fields and where the next page starts. */
export interface EventPageMeta {
  requestId: string;
  apiVersion: string;
  /** Pass as `after` for the next page: the last event's id, or the `after` given when the page is empty. */
  nextAfter: string;
}

/** Events oldest first, after `after`. */
export interface EventPage {
  data: EventDto[];
  meta: EventPageMeta;
}
