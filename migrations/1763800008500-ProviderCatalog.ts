import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Offers keep the provider's cost beside the customer price, their region, and the moment they
 * stop being live unless refreshed (`stale_at`); `provider_status` records each provider's latest
 * refresh outcome for `GET /api/v1/providers`, shared by every api process.
 */
export class ProviderCatalog1763800008500 implements MigrationInterface {
  name = 'ProviderCatalog1763800008500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE offers
      ADD COLUMN cost_per_hour_minor BIGINT NULL AFTER price_per_hour_minor,
      ADD COLUMN region VARCHAR(64) NULL AFTER cost_per_hour_minor,
      ADD COLUMN stale_at DATETIME(3) NULL AFTER last_seen_at`);
    // Rows cached before this release get the default bound; the next refresh rewrites it.
    await q.query(`UPDATE offers SET stale_at = DATE_ADD(last_seen_at, INTERVAL 600 SECOND)`);
    await q.query(`ALTER TABLE offers MODIFY stale_at DATETIME(3) NOT NULL`);
    await q.query(`CREATE TABLE provider_status (
      provider_id VARCHAR(32) NOT NULL PRIMARY KEY,
      last_refresh_at DATETIME(3) NULL,
      last_refresh_ok TINYINT(1) NOT NULL DEFAULT 0,
      last_success_at DATETIME(3) NULL,
      offer_count INT NOT NULL DEFAULT 0,
      last_error_class VARCHAR(32) NULL,
      last_error_at DATETIME(3) NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE provider_status`);
    await q.query(`ALTER TABLE offers DROP COLUMN stale_at, DROP COLUMN region, DROP COLUMN cost_per_hour_minor`);
  }
}
