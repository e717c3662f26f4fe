import type { DataSource } from 'typeorm';
import { AppError } from '../../errors/app-error.js';
import type { Viewer } from '../keys/visibility.js';
import type { EventDto } from './events.dto.js';
import { eventsAfter, latestEventId, type StoredEvent } from './events.repository.js';

/** Page size bounds of GET /api/v1/events. */
export const EVENT_PAGE = { default: 50, max: 100 };

/** An event as the API shows it. */
export function toEventDto(e: StoredEvent): EventDto {
  return { id: e.id, type: e.type, createdAt: e.createdAt.toISOString(), data: e.data as EventDto['data'] };
}

/** `after` as given: an event id (digits), or absent for the events from now on. */
export function parseAfter(after: string | undefined): string | null {
  if (after === undefined || after === '') return null;
  if (!/^\d{1,20}$/.test(after)) throw new AppError('INVALID_REQUEST', 'after (or Last-Event-ID) is an event id as the API gave it: digits only. Leave it out to start with the next event.');
  return after.replace(/^0+(?=\d)/, '');
}

/** Reads of the durable event log, each caller seeing only what the one visibility rule lets it. */
export class EventsService {
  constructor(private readonly ds: DataSource) {}

  /** The viewer's events after `after` (none given: after the newest, so the page starts empty), oldest first. */
  async page(viewer: Viewer, after: string | undefined, limit: number): Promise<{ events: EventDto[]; nextAfter: string }> {
    const from = parseAfter(after) ?? (await latestEventId(this.ds));
    const events = await eventsAfter(this.ds, viewer, from, limit);
    return { events: events.map(toEventDto), nextAfter: events.length ? events[events.length - 1].id : from };
  }
}
