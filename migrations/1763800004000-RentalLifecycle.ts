import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What provisioning, credentials, termination and metering need on top of the core order and
 * deployment rows: the chosen offer and provider instance, the deployment's SSH key (private half
 * encrypted), metering progress, termination bookkeeping, create attempts and the reveal audit.
 */
export class RentalLifecycle1763800004000 implements MigrationInterface {
  name = 'RentalLifecycle1763800004000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments
      ADD COLUMN provider_id VARCHAR(64) NULL,
      ADD COLUMN offer_id CHAR(36) NULL,
      ADD COLUMN hourly_price_minor BIGINT NOT NULL DEFAULT 0,
      ADD COLUMN spend_cap_minor BIGINT NULL,
      ADD COLUMN attempt INT NOT NULL DEFAULT 0,
      ADD COLUMN label VARCHAR(128) NULL,
      ADD COLUMN instance_id VARCHAR(191) NULL,
      ADD COLUMN ssh_host VARCHAR(255) NULL,
      ADD COLUMN ssh_port INT NULL,
      ADD COLUMN ssh_user VARCHAR(64) NULL,
      ADD COLUMN ssh_public_key TEXT NULL,
      ADD COLUMN ssh_private_key_enc VARBINARY(4096) NULL,
      ADD COLUMN ssh_key_kid VARCHAR(32) NULL,
      ADD COLUMN metered_until DATETIME(3) NULL,
      ADD COLUMN usage_minor BIGINT NOT NULL DEFAULT 0,
      ADD COLUMN terminate_requested_at DATETIME(3) NULL,
      ADD COLUMN termination_reason VARCHAR(32) NULL,
      ADD COLUMN verify_attempts INT NOT NULL DEFAULT 0,
      ADD COLUMN last_check_detail VARCHAR(512) NULL,
      ADD COLUMN status_changed_at DATETIME(3) NULL,
      ADD UNIQUE KEY uq_deployments_label (label),
      ADD KEY ix_deployments_metering (status, metered_until)`);

    await q.query(`CREATE TABLE deployment_attempts (
      id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
      deployment_id CHAR(36) NOT NULL,
      attempt INT NOT NULL,
      offer_id CHAR(36) NOT NULL,
      provider_id VARCHAR(64) NOT NULL,
      label VARCHAR(128) NOT NULL,
      outcome VARCHAR(32) NOT NULL,
      instance_id VARCHAR(191) NULL,
      detail VARCHAR(512) NULL,
      created_at DATETIME(3) NOT NULL,
      updated_at DATETIME(3) NOT NULL,
      UNIQUE KEY uq_attempts_deployment_attempt (deployment_id, attempt),
      UNIQUE KEY uq_attempts_label (label),
      CONSTRAINT fk_attempts_deployment FOREIGN KEY (deployment_id) REFERENCES deployments (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE credential_reveals (
      id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
      deployment_id CHAR(36) NOT NULL,
      account_id CHAR(36) NOT NULL,
      key_id CHAR(36) NOT NULL,
      request_id VARCHAR(128) NOT NULL,
      revealed_at DATETIME(3) NOT NULL,
      KEY ix_reveals_deployment (deployment_id, revealed_at),
      CONSTRAINT fk_reveals_deployment FOREIGN KEY (deployment_id) REFERENCES deployments (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE credential_reveals');
    await q.query('DROP TABLE deployment_attempts');
    await q.query(`ALTER TABLE deployments
      DROP KEY uq_deployments_label, DROP KEY ix_deployments_metering,
      DROP COLUMN provider_id, DROP COLUMN offer_id, DROP COLUMN hourly_price_minor, DROP COLUMN spend_cap_minor,
      DROP COLUMN attempt, DROP COLUMN label, DROP COLUMN instance_id, DROP COLUMN ssh_host, DROP COLUMN ssh_port,
      DROP COLUMN ssh_user, DROP COLUMN ssh_public_key, DROP COLUMN ssh_private_key_enc, DROP COLUMN ssh_key_kid,
      DROP COLUMN metered_until, DROP COLUMN usage_minor, DROP COLUMN terminate_requested_at,
      DROP COLUMN termination_reason, DROP COLUMN verify_attempts, DROP COLUMN last_check_detail,
      DROP COLUMN status_changed_at`);
  }
}
