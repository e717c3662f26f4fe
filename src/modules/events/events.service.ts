import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import type { Viewer } from '../keys/visibility.js';
import type { EventDto } from './events.dto.js';
import type { EventsRepository, NumberedEvent, StoredEvent } from './events.repository.js';

/** Page size bounds of GET /api/v1/events. */
export const EVENT_PAGE = { default: 50, max: 100 };

/**
 * An event as agents and owners read it (pages and streams), under its number in its account:
 * the id `after`, `nextAfter` and Last-Event-ID speak of.
 */
export function toAccountEventDto(e: NumberedEvent): EventDto {
  return eventDto(e, e.seq);
}

/**
 * An event as a webhook delivery carries it (body, `webhook-id`, a listing's `eventId`): under its
 * account's own number as agents' reads show it, so no receiver learns of other accounts' activity.
 * An event written before numbering existed (by a process of the previous version during an
 * upgrade) has only its log-wide id.
 */
export function toEventDto(e: StoredEvent): EventDto {
  return eventDto(e, shownEventId(e));
}

/** The id an event is shown under: its account's number, or the log-wide id of an unnumbered one. */
export function shownEventId(e: Pick<StoredEvent, 'id' | 'seq'>): string {
  return e.seq ?? e.id;
}

function eventDto(e: StoredEvent, id: string): EventDto {
  return { id, type: e.type, createdAt: e.createdAt.toISOString(), data: e.data as EventDto['data'] };
}

/** `after` as given: an event id as the API shows them (digits), or absent (a page: the newest; a stream: from now on). */
export function parseAfter(after: string | undefined): string | null {
  if (after === undefined || after === '') return null;
  if (!/^\d{1,20}$/.test(after))
    throw new AppError(
      'INVALID_REQUEST',
      'after (or Last-Event-ID) is an event id as the API gave it: digits only. Leave it out for the newest page (a stream: from now on), or send 0 for the history from its start.',
    );
  return after.replace(/^0+(?=\d)/, '');
}

/** Reads of the durable event log, each caller seeing only what the one visibility rule lets it. */
export class EventsService {
  constructor(private readonly store: Store<{ events: EventsRepository }>) {}

  /**
   * The viewer's events after `after`, oldest first; none given: the newest `limit` of its
   * history, so a first look shows what happened. `nextAfter` is where the next page starts: the
   * last event's number, or when there is none, the number to wait after (`after`, or the
   * account's newest).
   */
  async page(
    viewer: Viewer,
    after: string | undefined,
    limit: number,
  ): Promise<{ events: EventDto[]; nextAfter: string }> {
    const from = parseAfter(after);
    const events = await this.store.read((r) =>
      from === null ? r.events.latest(viewer, limit) : r.events.after(viewer, from, limit),
    );
    const last = events.length
      ? events[events.length - 1].seq
      : (from ?? (await this.store.read((r) => r.events.latestAccountSeq(viewer.accountId))));
    return { events: events.map(toAccountEventDto), nextAfter: last };
  }
}
