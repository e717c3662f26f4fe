import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What each owner's Telegram chat is told about (/notify): the event types chosen, a chat without
 * a row getting the default set. The bot's notifications now come from the event log, scanned by
 * time like the rest of its sources, so the log gets an index on `created_at`.
 */
export class NotifyPreferences1763800016000 implements MigrationInterface {
  name = 'NotifyPreferences1763800016000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE telegram_notify_prefs (
      chat_id BIGINT NOT NULL,
      event_types VARCHAR(1000) NOT NULL,
      updated_at DATETIME(3) NOT NULL,
      PRIMARY KEY (chat_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
    await q.query(`CREATE INDEX ix_events_created ON events (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX ix_events_created ON events`);
    await q.query(`DROP TABLE telegram_notify_prefs`);
  }
}
