import type { DataSource } from 'typeorm';
import type { Clock } from '../../clock.js';
import type { EventType } from '../events/event-types.js';
import { chosenEventTypes, saveEventTypes } from './notify-preferences.repository.js';

/** The events the bot can tell an owner of, in the order /notify lists them; all are on until the owner chooses. */
export const NOTIFIABLE_EVENT_TYPES: readonly EventType[] = ['rental.active', 'rental.failed', 'rental.terminated', 'topup.paid', 'credits.low'];

/** How /notify names each type to an owner. */
export const NOTIFIABLE_LABELS: Readonly<Record<string, string>> = {
  'rental.active': 'Rental active',
  'rental.failed': 'Rental failed',
  'rental.terminated': 'Rental terminated',
  'topup.paid': 'Top-up credited',
  'credits.low': 'Credits running low',
};

/** Which event types each owner's Telegram chat is told about (/notify). */
export class NotifyPreferences {
  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
  ) {}

  /** The types chat `chatId` is told about. */
  async of(chatId: number): Promise<EventType[]> {
    return (await this.ofChats([chatId])).get(chatId)!;
  }

  /** The types each chat is told about, the default set for a chat that never chose. */
  async ofChats(chatIds: readonly number[]): Promise<Map<number, EventType[]>> {
    const chosen = await chosenEventTypes(this.ds, chatIds);
    return new Map(chatIds.map((id) => [id, chosen.get(id) ?? [...NOTIFIABLE_EVENT_TYPES]]));
  }

  /** Turns `type` on or off for the chat; answers the types it is told about now. */
  async toggle(chatId: number, type: EventType): Promise<EventType[]> {
    if (!NOTIFIABLE_EVENT_TYPES.includes(type)) throw new Error(`${type} is not an event the bot tells owners of`);
    const now = await this.of(chatId);
    const next = NOTIFIABLE_EVENT_TYPES.filter((t) => (t === type ? !now.includes(t) : now.includes(t)));
    await saveEventTypes(this.ds, chatId, next, this.clock.now());
    return next;
  }
}
