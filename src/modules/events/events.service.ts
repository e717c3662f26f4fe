import type { DataSource } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import type { Viewer } from '../keys/visibility.js';
import type { EventDto } from './events.dto.js';
import { eventsAfter, latestAccountSeq, type NumberedEvent, type StoredEvent } from './events.repository.js';

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

/** `after` as given: an event id as the API shows them (digits), or absent for the events from now on. */
export function parseAfter(after: string | undefined): string | null {
  if (after === undefined || after === '') return null;
  if (!/^\d{1,20}$/.test(after)) throw new AppError('INVALID_REQUEST', 'after (or Last-Event-ID) is an event id as the API gave it: digits only. Leave it out to start with the next event.');
  return after.replace(/^0+(?=\d)/, '');
}

/** Reads of the durable event log, each caller seeing only what the one visibility rule lets it. */
export class EventsService {
  constructor(private readonly ds: DataSource) {}

  /** The viewer's events after `after` (none given: after its account's newest, so the page starts empty), oldest first. */
  async page(viewer: Viewer, after: string | undefined, limit: number): Promise<{ events: EventDto[]; nextAfter: string }> {
    const from = parseAfter(after) ?? (await latestAccountSeq(this.ds, viewer.accountId));
    const events = await eventsAfter(this.ds, viewer, from, limit);
    return { events: events.map(toAccountEventDto), nextAfter: events.length ? events[events.length - 1].seq : from };
  }
}
