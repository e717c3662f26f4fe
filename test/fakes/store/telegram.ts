import type {
  NewNotification,
  NotificationsRepository,
  PendingNotification,
} from '../../../src/modules/notifications/notifications.repository.js';
import type {
  NotifyPreferencesRepository,
  StoredChoice,
} from '../../../src/modules/notifications/notify-preferences.repository.js';
import type {
  Conversation,
  ConversationsRepository,
  LimitStep,
} from '../../../src/modules/telegram/conversations.repository.js';
import type { TelegramRepository } from '../../../src/modules/telegram/telegram.repository.js';
import type { MemoryTables } from './memory-store.js';

/*
 * The Telegram aggregate in memory: `telegram_conversations` by chat, `telegram_notifications` by
 * id with its unique cause key, and `telegram_notify_prefs` by chat, each holding what the SQL's
 * columns hold (a dialogue's data as JSON, a choice as its two lists).
 */

interface ConversationRow extends Conversation {
  updatedAt: Date;
}

/** A notification row as its columns hold it. */
export interface MemoryNotificationRow {
  id: string;
  key: string;
  accountId: string;
  chatId: number;
  kind: string;
  text: string;
  createdAt: Date;
  attempts: number;
  claimedAt: Date | null;
  sentAt: Date | null;
  failedAt: Date | null;
  lastError: string | null;
}

interface ChoiceRow extends StoredChoice {
  updatedAt: Date;
}

const live = (row: ConversationRow, c: Conversation, step: LimitStep, now: Date) =>
  row.step === step && row.data.nonce === c.data.nonce && row.expiresAt.getTime() > now.getTime();

export class MemoryConversationsRepository implements ConversationsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<ConversationRow>('telegram_conversations');
  }

  async get(chatId: number): Promise<Conversation | null> {
    const row = this.rows.get(String(chatId));
    if (!row) return null;
    const { updatedAt: _, ...c } = row;
    return c;
  }

  async save(c: Conversation, now: Date): Promise<void> {
    this.rows.put(String(c.chatId), { ...c, updatedAt: now });
  }

  async advance(c: Conversation, fromStep: LimitStep, now: Date): Promise<boolean> {
    const row = this.rows.get(String(c.chatId));
    if (!row || !live(row, c, fromStep, now)) return false;
    return this.rows.update(String(c.chatId), { step: c.step, data: c.data, expiresAt: c.expiresAt, updatedAt: now });
  }

  async take(c: Conversation, step: LimitStep, now: Date): Promise<boolean> {
    const row = this.rows.get(String(c.chatId));
    if (!row || !live(row, c, step, now)) return false;
    return this.rows.delete(String(c.chatId));
  }

  async delete(chatId: number): Promise<void> {
    this.rows.delete(String(chatId));
  }
}

export class MemoryNotificationsRepository implements NotificationsRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<MemoryNotificationRow>('telegram_notifications');
  }

  private insert(n: NewNotification, now: Date, skipped: boolean): string | null {
    if (this.rows.first((r) => r.key === n.key)) return null;
    const id = this.rows.nextId();
    this.rows.insert(id, {
      id,
      key: n.key,
      accountId: n.accountId,
      chatId: n.chatId,
      kind: n.kind,
      text: n.text,
      createdAt: now,
      attempts: 0,
      claimedAt: null,
      sentAt: null,
      failedAt: skipped ? now : null,
      lastError: skipped ? 'turned off with /notify' : null,
    });
    return id;
  }

  async record(n: NewNotification, now: Date): Promise<string | null> {
    return this.insert(n, now, false);
  }

  async recordSkipped(n: NewNotification, now: Date): Promise<void> {
    this.insert(n, now, true);
  }

  async pending(id: string): Promise<PendingNotification | null> {
    const row = this.rows.get(id);
    if (!row || row.sentAt !== null || row.failedAt !== null) return null;
    return { chatId: row.chatId, text: row.text, attempts: row.attempts };
  }

  async startAttempt(id: string, now: Date): Promise<void> {
    const row = this.rows.get(id);
    if (row) this.rows.update(id, { claimedAt: now, attempts: row.attempts + 1 });
  }

  async markSent(id: string, now: Date): Promise<void> {
    this.rows.update(id, { sentAt: now });
  }

  async markFailedAttempt(id: string, error: string, givenUpAt: Date | null): Promise<void> {
    this.rows.update(id, { lastError: error.slice(0, 255), failedAt: givenUpAt });
  }
}

export class MemoryNotifyPreferencesRepository implements NotifyPreferencesRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get rows() {
    return this.tables.table<ChoiceRow>('telegram_notify_prefs');
  }

  async chosen(chatIds: readonly number[]): Promise<Map<number, StoredChoice>> {
    const out = new Map<number, StoredChoice>();
    for (const chatId of chatIds) {
      const row = this.rows.get(String(chatId));
      if (row) out.set(chatId, { on: row.on, off: row.off });
    }
    return out;
  }

  async save(chatId: number, choice: StoredChoice, now: Date): Promise<void> {
    this.rows.put(String(chatId), { on: [...choice.on], off: [...choice.off], updatedAt: now });
  }
}

export class MemoryTelegramRepository implements TelegramRepository {
  constructor(private readonly tables: MemoryTables) {}

  get conversations(): ConversationsRepository {
    return new MemoryConversationsRepository(this.tables);
  }

  get notifications(): NotificationsRepository {
    return new MemoryNotificationsRepository(this.tables);
  }

  get preferences(): NotifyPreferencesRepository {
    return new MemoryNotifyPreferencesRepository(this.tables);
  }
}

/** The notifications recorded in memory, in the order they were. */
export function memoryNotifications(tables: MemoryTables): MemoryNotificationRow[] {
  return tables.table<MemoryNotificationRow>('telegram_notifications').all();
}
