import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import type { EventType } from '../events/event-types.js';
import type { TelegramRepository } from '../telegram/telegram.repository.js';
import type { StoredChoice } from './notify-preferences.repository.js';

/**
 * The events the bot can tell an owner of, in the order /notify lists them; all are on until the
 * owner chooses. New types go last: a button's index is its callback data, so /notify menus sent
 * earlier keep toggling the type they show.
 */
export const NOTIFIABLE_EVENT_TYPES: readonly EventType[] = [
  'rental.active',
  'rental.failed',
  'rental.terminated',
  'topup.paid',
  'credits.low',
  'rental.expiring',
  'rental.idle_warning',
];

/**
 * The types /notify offered while a stored choice listed only the types turned on: in such a
 * choice, one of these left out was turned off, while a type added since is on by default.
 */
const OFFERED_BEFORE_OFF_WAS_STORED: readonly EventType[] = [
  'rental.active',
  'rental.failed',
  'rental.terminated',
  'topup.paid',
  'credits.low',
];

/** How /notify names each type to an owner. */
export const NOTIFIABLE_LABELS: Readonly<Record<string, string>> = {
  'rental.active': 'Rental active',
  'rental.failed': 'Rental failed',
  'rental.terminated': 'Rental terminated',
  'topup.paid': 'Top-up credited',
  'credits.low': 'Credits running low',
  'rental.expiring': 'Rental ending soon',
  'rental.idle_warning': 'Rental idle, about to stop',
};

/** The types on under a stored choice: those it turned on, and those it never saw (on by default). */
function onUnder(choice: StoredChoice): EventType[] {
  return NOTIFIABLE_EVENT_TYPES.filter(
    (t) => choice.on.includes(t) || (!choice.off.includes(t) && !OFFERED_BEFORE_OFF_WAS_STORED.includes(t)),
  );
}

/** Which event types each owner's Telegram chat is told about (/notify). */
export class NotifyPreferences {
  constructor(
    private readonly store: Store<{ telegram: TelegramRepository }>,
    private readonly clock: Clock,
  ) {}

  /** The types chat `chatId` is told about. */
  async of(chatId: number): Promise<EventType[]> {
    return (await this.ofChats([chatId])).get(chatId)!;
  }

  /** The types each chat is told about, the default set for a chat that never chose. */
  async ofChats(chatIds: readonly number[]): Promise<Map<number, EventType[]>> {
    const chosen = await this.store.read((r) => r.telegram.preferences.chosen(chatIds));
    return new Map(
      chatIds.map((id) => {
        const choice = chosen.get(id);
        return [id, choice ? onUnder(choice) : [...NOTIFIABLE_EVENT_TYPES]];
      }),
    );
  }

  /** Turns `type` on or off for the chat; answers the types it is told about now. */
  async toggle(chatId: number, type: EventType): Promise<EventType[]> {
    if (!NOTIFIABLE_EVENT_TYPES.includes(type)) throw new Error(`${type} is not an event the bot tells owners of`);
    const now = await this.of(chatId);
    const next = NOTIFIABLE_EVENT_TYPES.filter((t) => (t === type ? !now.includes(t) : now.includes(t)));
    const choice = { on: next, off: NOTIFIABLE_EVENT_TYPES.filter((t) => !next.includes(t)) };
    await this.store.read((r) => r.telegram.preferences.save(chatId, choice, this.clock.now()));
    return next;
  }
}
