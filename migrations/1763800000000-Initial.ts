import type { MigrationInterface, QueryRunner } from 'typeorm';

export class Initial1763800000000 implements MigrationInterface {
  name = 'Initial1763800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE accounts (
      id CHAR(36) NOT NULL PRIMARY KEY,
      billing_model VARCHAR(32) NOT NULL,
      balance_minor BIGINT NOT NULL DEFAULT 0,
      frozen TINYINT(1) NOT NULL DEFAULT 0,
      email VARCHAR(254) NULL,
      telegram_user_id BIGINT NULL,
      telegram_chat_id BIGINT NULL,
      created_at DATETIME(3) NOT NULL,
      UNIQUE KEY uq_accounts_telegram_user (telegram_user_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE api_keys (
      id CHAR(36) NOT NULL PRIMARY KEY,
      account_id CHAR(36) NOT NULL,
      kind VARCHAR(8) NOT NULL,
      name VARCHAR(100) NOT NULL,
      prefix CHAR(8) NOT NULL,
      secret_hash BINARY(32) NOT NULL,
      scopes VARCHAR(64) NOT NULL,
      max_per_rental_minor BIGINT NOT NULL,
      budget_limit_minor BIGINT NOT NULL,
      max_concurrent_deployments INT NOT NULL,
      is_admin TINYINT(1) NOT NULL DEFAULT 0,
      origin VARCHAR(32) NOT NULL,
      created_at DATETIME(3) NOT NULL,
      revoked_at DATETIME(3) NULL,
      last_used_at DATETIME(3) NULL,
      UNIQUE KEY uq_api_keys_prefix (prefix),
      KEY ix_api_keys_account (account_id),
      CONSTRAINT fk_api_keys_account FOREIGN KEY (account_id) REFERENCES accounts (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE ledger_entries (
      id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
      account_id CHAR(36) NOT NULL,
      key_id CHAR(36) NULL,
      rental_id CHAR(36) NULL,
      kind VARCHAR(32) NOT NULL,
      amount_minor BIGINT NOT NULL,
      balance_after_minor BIGINT NOT NULL,
      external_ref VARCHAR(191) NOT NULL,
      description VARCHAR(255) NOT NULL,
      created_at DATETIME(3) NOT NULL,
      UNIQUE KEY uq_ledger_external_ref (external_ref),
      KEY ix_ledger_account (account_id, id),
      KEY ix_ledger_key (key_id, kind),
      KEY ix_ledger_rental (rental_id),
      CONSTRAINT fk_ledger_account FOREIGN KEY (account_id) REFERENCES accounts (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE idempotency_records (
      id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
      scope VARCHAR(80) NOT NULL,
      idem_key VARCHAR(128) NOT NULL,
      request_hash CHAR(64) NOT NULL,
      resource_id VARCHAR(64) NULL,
      created_at DATETIME(3) NOT NULL,
      UNIQUE KEY uq_idempotency (scope, idem_key)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE rate_limit_counters (
      bucket VARCHAR(128) NOT NULL,
      window_start DATETIME NOT NULL,
      count INT NOT NULL,
      PRIMARY KEY (bucket, window_start)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE offers (
      id CHAR(36) NOT NULL PRIMARY KEY,
      provider VARCHAR(32) NOT NULL,
      provider_offer_key VARCHAR(191) NOT NULL,
      name VARCHAR(100) NOT NULL,
      slug VARCHAR(100) NOT NULL,
      category VARCHAR(64) NOT NULL,
      vram_gb INT NULL,
      gpu_count INT NOT NULL,
      cpu_cores INT NULL,
      memory_gb INT NULL,
      storage_gb INT NULL,
      price_per_hour_minor BIGINT NOT NULL,
      currency CHAR(3) NOT NULL,
      maximum_duration_seconds INT NOT NULL,
      available TINYINT(1) NOT NULL,
      first_seen_at DATETIME(3) NOT NULL,
      last_seen_at DATETIME(3) NOT NULL,
      KEY ix_offers_available_slug (available, slug, gpu_count, price_per_hour_minor),
      KEY ix_offers_provider (provider, available)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    // A single counter row lets every api process notice an inventory change with one cheap read.
    await q.query(`CREATE TABLE inventory_state (
      id TINYINT NOT NULL PRIMARY KEY,
      version BIGINT NOT NULL,
      refreshed_at DATETIME(3) NULL
    ) ENGINE=InnoDB`);
    await q.query(`INSERT INTO inventory_state (id, version, refreshed_at) VALUES (1, 0, NULL)`);

    await q.query(`CREATE TABLE orders (
      id CHAR(36) NOT NULL PRIMARY KEY,
      account_id CHAR(36) NOT NULL,
      key_id CHAR(36) NOT NULL,
      funding VARCHAR(8) NOT NULL,
      billing_model VARCHAR(32) NOT NULL,
      status VARCHAR(32) NOT NULL,
      request_kind VARCHAR(8) NOT NULL,
      offer_id CHAR(36) NULL,
      gpu_model VARCHAR(100) NULL,
      gpu_slug VARCHAR(100) NULL,
      gpu_count INT NULL,
      max_hourly_price_minor BIGINT NULL,
      budget_minor BIGINT NULL,
      hourly_price_minor BIGINT NOT NULL,
      duration_seconds INT NULL,
      total_minor BIGINT NOT NULL,
      currency CHAR(3) NOT NULL,
      failure_code VARCHAR(64) NULL,
      failure_reason VARCHAR(255) NULL,
      reversal_status VARCHAR(16) NULL,
      created_at DATETIME(3) NOT NULL,
      updated_at DATETIME(3) NOT NULL,
      KEY ix_orders_account (account_id, created_at),
      KEY ix_orders_key (key_id),
      KEY ix_orders_status (status, updated_at),
      CONSTRAINT fk_orders_account FOREIGN KEY (account_id) REFERENCES accounts (id),
      CONSTRAINT fk_orders_key FOREIGN KEY (key_id) REFERENCES api_keys (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);

    await q.query(`CREATE TABLE deployments (
      id CHAR(36) NOT NULL PRIMARY KEY,
      order_id CHAR(36) NOT NULL,
      account_id CHAR(36) NOT NULL,
      key_id CHAR(36) NOT NULL,
      status VARCHAR(32) NOT NULL,
      billing_model VARCHAR(32) NOT NULL,
      hours_purchased INT NULL,
      duration_seconds INT NULL,
      started_at DATETIME(3) NULL,
      ends_at DATETIME(3) NULL,
      ended_at DATETIME(3) NULL,
      created_at DATETIME(3) NOT NULL,
      updated_at DATETIME(3) NOT NULL,
      UNIQUE KEY uq_deployments_order (order_id),
      KEY ix_deployments_key_status (key_id, status),
      KEY ix_deployments_account (account_id, created_at),
      KEY ix_deployments_status (status, updated_at),
      CONSTRAINT fk_deployments_order FOREIGN KEY (order_id) REFERENCES orders (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of [
      'deployments',
      'orders',
      'inventory_state',
      'offers',
      'rate_limit_counters',
      'idempotency_records',
      'ledger_entries',
      'api_keys',
      'accounts',
    ]) {
      await q.query(`DROP TABLE IF EXISTS ${t}`);
    }
  }
}
