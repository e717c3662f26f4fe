import type { Executor } from '../../db/mysql-store.js';
import { EVENT_TYPES, type EventType } from '../events/event-types.js';

// The only code that reads or writes `telegram_notify_prefs`: the event types each owner's chat
// chose with /notify. A chat without a row gets the default set (notify-preferences.ts).

/** A chat's stored choice: the types it turned on and those it turned off. */
export interface StoredChoice {
  on: EventType[];
  off: EventType[];
}

/** The choice of each of `chatIds` that has chosen; chats absent from the answer have not. */
export async function chosenEventTypes(ds: Executor, chatIds: readonly number[]): Promise<Map<number, StoredChoice>> {
  if (chatIds.length === 0) return new Map();
  const rows: { chat_id: string | number; event_types: string }[] = await ds.query(
    'SELECT chat_id, event_types FROM telegram_notify_prefs WHERE chat_id IN (?)',
    [[...new Set(chatIds)]],
  );
  return new Map(rows.map((r) => [Number(r.chat_id), parseChoice(r.event_types)]));
}

/** Stores the chat's choice, replacing any earlier one; a type turned off is kept as `!type`. */
export async function saveEventTypes(ds: Executor, chatId: number, choice: StoredChoice, now: Date): Promise<void> {
  await ds.query(
    'INSERT INTO telegram_notify_prefs (chat_id, event_types, updated_at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE event_types = VALUES(event_types), updated_at = VALUES(updated_at)',
    [chatId, [...choice.on, ...choice.off.map((t) => `!${t}`)].join(','), now],
  );
}

// A type this service no longer knows is dropped rather than failing the whole choice.
function parseChoice(text: string): StoredChoice {
  const known = (t: string): t is EventType => (EVENT_TYPES as readonly string[]).includes(t);
  const entries = text.split(',');
  return {
    on: entries.filter(known),
    off: entries
      .filter((e) => e.startsWith('!'))
      .map((e) => e.slice(1))
      .filter(known),
  };
}

/** The event types each owner's chat chose with /notify (`telegram_notify_prefs`); each call stands alone. */
export interface NotifyPreferencesRepository {
  /** The stored choice of each of `chatIds` that has chosen; chats absent from the answer have not. */
  chosen(chatIds: readonly number[]): Promise<Map<number, StoredChoice>>;
  /** Stores the chat's choice, replacing any earlier one. */
  save(chatId: number, choice: StoredChoice, now: Date): Promise<void>;
}

export class MysqlNotifyPreferencesRepository implements NotifyPreferencesRepository {
  constructor(private readonly sql: Executor) {}

  chosen(chatIds: readonly number[]): Promise<Map<number, StoredChoice>> {
    return chosenEventTypes(this.sql, chatIds);
  }

  save(chatId: number, choice: StoredChoice, now: Date): Promise<void> {
    return saveEventTypes(this.sql, chatId, choice, now);
  }
}
