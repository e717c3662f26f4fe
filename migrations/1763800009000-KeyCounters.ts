import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-key counters kept in step with the ledger and the rental state machine, so admission, `/me`,
 * key listings and the metering limits read one row instead of summing the ledger or counting
 * deployments: `net_spent_minor` (rental debits and usage minus reversals) and
 * `active_deployments` (deployments not TERMINATED or FAILED). Backfilled from what they summarise.
 */
export class KeyCounters1763800009000 implements MigrationInterface {
  name = 'KeyCounters1763800009000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE api_keys
      ADD COLUMN net_spent_minor BIGINT NOT NULL DEFAULT 0,
      ADD COLUMN active_deployments INT NOT NULL DEFAULT 0`);
    await q.query(`UPDATE api_keys k
      JOIN (SELECT key_id, -SUM(amount_minor) AS net FROM ledger_entries
             WHERE key_id IS NOT NULL AND kind IN ('RENTAL_DEBIT', 'USAGE', 'REVERSAL') GROUP BY key_id) s ON s.key_id = k.id
       SET k.net_spent_minor = s.net`);
    await q.query(`UPDATE api_keys k
      JOIN (SELECT key_id, COUNT(*) AS n FROM deployments WHERE status NOT IN ('TERMINATED', 'FAILED') GROUP BY key_id) s ON s.key_id = k.id
       SET k.active_deployments = s.n`);
    // The metering sweep finds its rentals by billing model and status, then works account by account.
    await q.query(`ALTER TABLE deployments ADD KEY ix_deployments_metered (billing_model, status, account_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE deployments DROP KEY ix_deployments_metered`);
    await q.query(`ALTER TABLE api_keys DROP COLUMN net_spent_minor, DROP COLUMN active_deployments`);
  }
}
