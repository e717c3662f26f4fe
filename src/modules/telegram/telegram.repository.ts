import type { Executor } from '../../db/mysql-store.js';
import {
  MysqlNotificationsRepository,
  type NotificationsRepository,
} from '../notifications/notifications.repository.js';
import {
  MysqlNotifyPreferencesRepository,
  type NotifyPreferencesRepository,
} from '../notifications/notify-preferences.repository.js';
import { MysqlConversationsRepository, type ConversationsRepository } from './conversations.repository.js';

/**
 * The Telegram aggregate: the owner bot's open dialogues (`telegram_conversations`), the
 * notifications owners are sent (`telegram_notifications`) and what each chat chose to be told
 * of (`telegram_notify_prefs`). The notifications' place in the event log is the event log's own
 * cursor (events/event-tail.ts); the chat an account's notifications go to is the account's.
 */
export interface TelegramRepository {
  readonly conversations: ConversationsRepository;
  readonly notifications: NotificationsRepository;
  readonly preferences: NotifyPreferencesRepository;
}

/** The Telegram aggregate on MySQL; each part is made on first use. */
export class MysqlTelegramRepository implements TelegramRepository {
  private talks?: ConversationsRepository;
  private sent?: NotificationsRepository;
  private chosen?: NotifyPreferencesRepository;

  constructor(private readonly sql: Executor) {}

  get conversations(): ConversationsRepository {
    return (this.talks ??= new MysqlConversationsRepository(this.sql));
  }

  get notifications(): NotificationsRepository {
    return (this.sent ??= new MysqlNotificationsRepository(this.sql));
  }

  get preferences(): NotifyPreferencesRepository {
    return (this.chosen ??= new MysqlNotifyPreferencesRepository(this.sql));
  }
}
