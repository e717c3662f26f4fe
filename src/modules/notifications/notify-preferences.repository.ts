import type { DataSource } from 'typeorm';
import { EVENT_TYPES, type EventType } from '../events/event-types.js';

// The only code that reads or writes `telegram_notify_prefs`: the event types each owner's chat
// chose with /notify. A chat without a row gets the default set (notify-preferences.ts).

/** The event types chosen by each of `chatIds` that has chosen; chats absent from the answer have not. */
export async function chosenEventTypes(ds: DataSource, chatIds: readonly number[]): Promise<Map<number, EventType[]>> {
  if (chatIds.length === 0) return new Map();
  const rows: { chat_id: string | number; event_types: string }[] = await ds.query(
    'SELECT chat_id, event_types FROM telegram_notify_prefs WHERE chat_id IN (?)',
    [[...new Set(chatIds)]],
  );
  return new Map(rows.map((r) => [Number(r.chat_id), parseTypes(r.event_types)]));
}

/** Stores the chat's choice, replacing any earlier one. */
export async function saveEventTypes(ds: DataSource, chatId: number, types: readonly EventType[], now: Date): Promise<void> {
  await ds.query(
    'INSERT INTO telegram_notify_prefs (chat_id, event_types, updated_at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE event_types = VALUES(event_types), updated_at = VALUES(updated_at)',
    [chatId, types.join(','), now],
  );
}

// A type this service no longer knows is dropped rather than failing the whole choice.
function parseTypes(text: string): EventType[] {
  return text.split(',').filter((t): t is EventType => (EVENT_TYPES as readonly string[]).includes(t));
}
