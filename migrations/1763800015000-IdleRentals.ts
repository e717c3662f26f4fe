import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Idle machines stop, and rentals say when they are about to end. Agent keys (and the setup codes
 * that mint them) may carry `idle_terminate_minutes`: a rental of such a key whose GPUs stay idle
 * for that long is warned, then ended. The sampling state of each watched rental lives in
 * `idle_watches`, so whichever worker samples next continues it. `expiring_event_at` records the
 * one `rental.expiring` event of a rental with an end.
 */
export class IdleRentals1763800015000 implements MigrationInterface {
  name = 'IdleRentals1763800015000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE api_keys ADD COLUMN idle_terminate_minutes INT NULL`);
    await q.query(`ALTER TABLE agent_authorizations ADD COLUMN idle_terminate_minutes INT NULL`);
    await q.query(`ALTER TABLE deployments ADD COLUMN expiring_event_at DATETIME(3) NULL`);
    await q.query(`CREATE TABLE idle_watches (
      deployment_id CHAR(36) NOT NULL,
      sampled_at DATETIME(3) NOT NULL,
      idle_since DATETIME(3) NULL,
      idle_samples INT NOT NULL DEFAULT 0,
      warned_at DATETIME(3) NULL,
      PRIMARY KEY (deployment_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE idle_watches`);
    await q.query(`ALTER TABLE deployments DROP COLUMN expiring_event_at`);
    await q.query(`ALTER TABLE agent_authorizations DROP COLUMN idle_terminate_minutes`);
    await q.query(`ALTER TABLE api_keys DROP COLUMN idle_terminate_minutes`);
  }
}
