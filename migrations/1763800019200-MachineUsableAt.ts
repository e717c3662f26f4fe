import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `deployments.usable_at`: the first moment a machine that runs the rental's own code (a startup
 * script, an image or environment variables) let the service's check in with the rental's key,
 * before the check passed. From then on the machine works for its renter, so its time is charged
 * from then (docs/rentals-and-money.md, Time before ACTIVE). `ix_deployments_key_failed_usable`
 * serves admission's look at a key's recent rentals that FAILED after that moment: one range of
 * exactly those rows, whatever else the key ran.
 */
export class MachineUsableAt1763800019200 implements MigrationInterface {
  name = 'MachineUsableAt1763800019200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments
      ADD COLUMN usable_at DATETIME(3) NULL,
      ADD KEY ix_deployments_key_failed_usable (key_id, status, usable_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments
      DROP KEY ix_deployments_key_failed_usable,
      DROP COLUMN usable_at`);
  }
}
