import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Signed webhooks. An endpoint belongs to an agent key (`key_id`: it receives what that key may
 * see) or to the account (null: an owner key made it); its signing secret is sealed, since it
 * must be opened to sign. `after_event_id` is the newest event when it was made: it receives only
 * later ones. One delivery per endpoint and event (the unique key), its tries in
 * `webhook_delivery_attempts`; `webhook_cursor` is the last event the dispatcher fanned out.
 */
export class Webhooks1763800014000 implements MigrationInterface {
  name = 'Webhooks1763800014000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE webhook_endpoints (
      id CHAR(36) NOT NULL,
      account_id CHAR(36) NOT NULL,
      key_id CHAR(36) NULL,
      url VARCHAR(2048) NOT NULL,
      event_types VARCHAR(512) NOT NULL,
      secret_sealed VARBINARY(512) NOT NULL,
      secret_key_id VARCHAR(64) NOT NULL,
      after_event_id BIGINT UNSIGNED NOT NULL,
      created_at DATETIME(3) NOT NULL,
      deleted_at DATETIME(3) NULL,
      PRIMARY KEY (id),
      KEY ix_webhook_endpoints_account (account_id, created_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
    await q.query(`CREATE TABLE webhook_deliveries (
      id CHAR(36) NOT NULL,
      endpoint_id CHAR(36) NOT NULL,
      event_id BIGINT UNSIGNED NOT NULL,
      status VARCHAR(16) NOT NULL,
      attempts INT NOT NULL DEFAULT 0,
      first_attempt_at DATETIME(3) NULL,
      next_attempt_at DATETIME(3) NULL,
      claimed_until DATETIME(3) NULL,
      created_at DATETIME(3) NOT NULL,
      completed_at DATETIME(3) NULL,
      PRIMARY KEY (id),
      UNIQUE KEY ux_webhook_deliveries_endpoint_event (endpoint_id, event_id),
      KEY ix_webhook_deliveries_due (status, next_attempt_at),
      KEY ix_webhook_deliveries_event (event_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
    await q.query(`CREATE TABLE webhook_delivery_attempts (
      id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      delivery_id CHAR(36) NOT NULL,
      attempted_at DATETIME(3) NOT NULL,
      status_code INT NULL,
      error VARCHAR(300) NULL,
      duration_ms INT NOT NULL,
      PRIMARY KEY (id),
      KEY ix_webhook_delivery_attempts_delivery (delivery_id, id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
    await q.query(`CREATE TABLE webhook_cursor (
      name VARCHAR(40) NOT NULL,
      last_event_id BIGINT UNSIGNED NOT NULL,
      PRIMARY KEY (name)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE webhook_cursor`);
    await q.query(`DROP TABLE webhook_delivery_attempts`);
    await q.query(`DROP TABLE webhook_deliveries`);
    await q.query(`DROP TABLE webhook_endpoints`);
  }
}
