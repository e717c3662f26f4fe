import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The metering sweep's first read (every ACTIVE or TERMINATING metered rental: id, account and
 * metering moment) is served by `ix_deployments_metered` alone, which now covers its columns, so
 * it reads the index instead of every deployment row however many ended rentals the table holds.
 * `ix_deployments_metering` (status, metered_until) goes: no statement reads it, and every sweep
 * moved each charged rental's entry in it.
 */
export class MeteringSweepIndex1763800018500 implements MigrationInterface {
  name = 'MeteringSweepIndex1763800018500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments
      DROP KEY ix_deployments_metering,
      DROP KEY ix_deployments_metered,
      ADD KEY ix_deployments_metered (billing_model, status, account_id, metered_until, started_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments
      DROP KEY ix_deployments_metered,
      ADD KEY ix_deployments_metered (billing_model, status, account_id),
      ADD KEY ix_deployments_metering (status, metered_until)`);
  }
}
