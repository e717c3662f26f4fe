import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the Telegram owner bot keeps between updates and across restarts: one open conversation
 * per chat (a /newagent or approval dialogue waiting for the next limit), the notifications it
 * owes owners (unique per cause, so each is sent once), and the dispatcher's scan positions.
 */
export class TelegramBot1763800006000 implements MigrationInterface {
  name = 'TelegramBot1763800006000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE telegram_conversations (
      chat_id BIGINT NOT NULL PRIMARY KEY,
      account_id CHAR(36) NOT NULL,
      kind VARCHAR(16) NOT NULL,
      step VARCHAR(16) NOT NULL,
      data TEXT NOT NULL,
      expires_at DATETIME(3) NOT NULL,
      updated_at DATETIME(3) NOT NULL,
      KEY ix_telegram_conversations_expiry (expires_at),
      CONSTRAINT fk_telegram_conversations_account FOREIGN KEY (account_id) REFERENCES accounts (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE telegram_notifications (
      id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
      notify_key VARCHAR(191) NOT NULL,
      account_id CHAR(36) NOT NULL,
      chat_id BIGINT NOT NULL,
      kind VARCHAR(32) NOT NULL,
      text TEXT NOT NULL,
      created_at DATETIME(3) NOT NULL,
      claimed_at DATETIME(3) NULL,
      sent_at DATETIME(3) NULL,
      failed_at DATETIME(3) NULL,
      attempts INT NOT NULL DEFAULT 0,
      last_error VARCHAR(255) NULL,
      UNIQUE KEY uq_telegram_notifications_key (notify_key),
      KEY ix_telegram_notifications_pending (sent_at, failed_at, id),
      CONSTRAINT fk_telegram_notifications_account FOREIGN KEY (account_id) REFERENCES accounts (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE telegram_cursors (
      name VARCHAR(64) NOT NULL PRIMARY KEY,
      position DATETIME(3) NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    // The dispatcher scans by these times; without indexes each scan would read whole tables.
    await q.query('ALTER TABLE ledger_entries ADD KEY ix_ledger_created (created_at)');
    await q.query('ALTER TABLE deployments ADD KEY ix_deployments_status_changed (status_changed_at)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE deployments DROP KEY ix_deployments_status_changed');
    await q.query('ALTER TABLE ledger_entries DROP KEY ix_ledger_created');
    await q.query('DROP TABLE telegram_cursors');
    await q.query('DROP TABLE telegram_notifications');
    await q.query('DROP TABLE telegram_conversations');
  }
}
