import type { MigrationInterface, QueryRunner } from 'typeorm';

/** A card order whose rental failed is refunded to the card; the refund is recorded on its checkout. */
export class CheckoutRefunds1763800007000 implements MigrationInterface {
  name = 'CheckoutRefunds1763800007000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE checkouts ADD COLUMN refund_id VARCHAR(191) NULL, ADD COLUMN refunded_at DATETIME(3) NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE checkouts DROP COLUMN refund_id, DROP COLUMN refunded_at`);
  }
}
