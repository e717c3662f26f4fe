import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `ix_deployments_metered` no longer holds `metered_until`: every sweep moves that moment on for
 * every rental it charges, so an index holding it had one entry per rental rewritten (and later
 * purged) at each sweep, the largest part of the sweep's database work after the row itself. The
 * sweep's first read needs only which rentals to charge (id and account, of started rentals); the
 * moment is read under lock with the rest of the row.
 */
export class MeteringIndexWithoutMoment1763800018700 implements MigrationInterface {
  name = 'MeteringIndexWithoutMoment1763800018700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments
      DROP KEY ix_deployments_metered,
      ADD KEY ix_deployments_metered (billing_model, status, account_id, started_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments
      DROP KEY ix_deployments_metered,
      ADD KEY ix_deployments_metered (billing_model, status, account_id, metered_until, started_at)`);
  }
}
