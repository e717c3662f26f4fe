import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Hosted card checkouts (credit top-ups and card-paid orders) and the payment events received. */
export class Payments1763800003000 implements MigrationInterface {
  name = 'Payments1763800003000';

  async up(q: QueryRunner): Promise<void> {
    // One row per hosted payment page we hand out. A top-up is a checkout with purpose TOPUP; its id
    // is the top-up id, sent to the payment provider as metadata and client_reference_id.
    await q.query(`CREATE TABLE checkouts (
      id CHAR(36) NOT NULL PRIMARY KEY,
      purpose VARCHAR(8) NOT NULL,
      account_id CHAR(36) NOT NULL,
      key_id CHAR(36) NULL,
      order_id CHAR(36) NULL,
      amount_minor BIGINT NOT NULL,
      currency CHAR(3) NOT NULL,
      status VARCHAR(16) NOT NULL,
      provider VARCHAR(16) NOT NULL,
      session_id VARCHAR(191) NULL,
      checkout_url VARCHAR(2048) NULL,
      expires_at DATETIME(3) NULL,
      paid_at DATETIME(3) NULL,
      paid_event_id VARCHAR(191) NULL,
      created_at DATETIME(3) NOT NULL,
      updated_at DATETIME(3) NOT NULL,
      UNIQUE KEY uq_checkouts_session (provider, session_id),
      UNIQUE KEY uq_checkouts_order (order_id),
      KEY ix_checkouts_account (account_id, created_at),
      KEY ix_checkouts_status (status, expires_at),
      CONSTRAINT fk_checkouts_account FOREIGN KEY (account_id) REFERENCES accounts (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    // Every verified provider event, once: the audit trail and the first line of duplicate defence
    // (the second is the checkout row's status, the third the ledger's unique external reference).
    await q.query(`CREATE TABLE payment_events (
      id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
      provider VARCHAR(16) NOT NULL,
      event_id VARCHAR(191) NOT NULL,
      type VARCHAR(100) NOT NULL,
      checkout_id CHAR(36) NULL,
      outcome VARCHAR(32) NOT NULL,
      received_at DATETIME(3) NOT NULL,
      UNIQUE KEY uq_payment_events (provider, event_id),
      KEY ix_payment_events_checkout (checkout_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS payment_events`);
    await q.query(`DROP TABLE IF EXISTS checkouts`);
  }
}
