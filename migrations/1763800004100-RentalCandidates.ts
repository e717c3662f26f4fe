import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The create candidates chosen at admission (up to three cached offer ids, cheapest first), so
 * provisioning never depends on a live search: it tries exactly what the customer was quoted for.
 */
export class RentalCandidates1763800004100 implements MigrationInterface {
  name = 'RentalCandidates1763800004100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders ADD COLUMN candidate_offer_ids JSON NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders DROP COLUMN candidate_offer_ids`);
  }
}
