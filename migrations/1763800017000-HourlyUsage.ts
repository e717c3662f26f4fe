import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Metered usage reaches the ledger once per rental-hour instead of once per sweep. Each sweep
 * still takes usage to the second from `accounts.balance_minor` and the key's net spend, and adds
 * it to `accounts.unposted_usage_minor` until an hourly (or final) entry posts it; a deployment
 * records how much of its `usage_minor` is posted (`posted_usage_minor`) and up to when
 * (`posted_until`, NULL meaning its start). Everything metered before this migration is already in
 * the ledger, entry per sweep: those entries stay as they are, and each deployment counts its
 * usage as posted up to its `metered_until`.
 */
export class HourlyUsage1763800017000 implements MigrationInterface {
  name = 'HourlyUsage1763800017000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE accounts ADD COLUMN unposted_usage_minor BIGINT NOT NULL DEFAULT 0`);
    await q.query(
      `ALTER TABLE deployments ADD COLUMN posted_usage_minor BIGINT NOT NULL DEFAULT 0, ADD COLUMN posted_until DATETIME(3) NULL`,
    );
    await q.query(
      `UPDATE deployments SET posted_usage_minor = usage_minor, posted_until = metered_until WHERE usage_minor <> 0 OR metered_until IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments DROP COLUMN posted_until, DROP COLUMN posted_usage_minor`);
    await q.query(`ALTER TABLE accounts DROP COLUMN unposted_usage_minor`);
  }
}
